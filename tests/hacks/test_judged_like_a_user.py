"""Kernels judged like a user (issue 27): hacks that tell the judge from a
user's program, keep state it does not see, hand out memory twice, degrade
precision or defer their work, and honest LayerNorm kernels (``corpus_judged.py``).

For each hack, both defences between it and a user are checked apart:

* the search's judge as a run uses it (``hacks_support.judge_candidate``:
  ``CandidateJudge.judge``, the path of ``Search._check``, with seeds drawn
  as a run draws them): the static check refuses the file (and the
  kernel-file allow-list alone does), and, switched off, the judge in its
  executor rejects it for the reason the entry names (``expect``), or
  accepts it where the entry says the run's later checks are its defence
  (``pipeline``) or only the static check is (``static_only``: the entry's
  ``defence`` says why);
* a whole run (``lego_core.pipeline.run_pipeline`` on the hack's tiny model,
  the agent answering the hacks one attempt after another, then an honest
  kernel; ``force_triton``, so that whatever verifies ships): no hack's
  marker is in the shipped ``optimized_model.py`` or ``kernels/``, with the
  static check on, and, switched off, for every hack a run can see at all;
  the static-only ones, switched off, do ship, and a user's plain python
  gets wrong results from them (what ``static_only`` claims, shown).

The whole runs are ``slow`` (about 4 s each on a CPU, 15 of them).

The honest controls must be accepted on 20 of 20 seed draws.

The kernel files lie where a run's lie (a temporary folder with a neutral
name, ``lego_core.pipeline``): a kernel that reads its own path sees here what
it sees in a run.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

from corpus import CONTROLS
from corpus_judged import JUDGED_CONTROLS, JUDGED_HACKS, MARKER, JudgedHack
from hacks_support import build_case, judge_candidate, model_file, MODELS

pytestmark = [pytest.mark.hacks, pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"), pytest.mark.filterwarnings("ignore::RuntimeWarning")]

DRAWS = 20  # seed draws each honest control must pass
HONEST = {c.case: c.source for c in CONTROLS if c.name in ("softmax_honest", "add_relu_honest", "layer_norm_honest", "linear_relu_honest")}


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """The sub-problems of the entries, captured once, kernels written under a neutrally named folder (as a run's)."""
    root = tmp_path_factory.mktemp("judged")
    return {name: build_case(name, root / name) for name in sorted({h.case for h in JUDGED_HACKS} | {c.case for c in JUDGED_CONTROLS})}


@pytest.fixture
def past_the_static_check(monkeypatch):
    """The static check switched off: the hack reaches the executor, as code that got past a static reading would."""
    from lego_core.judge import candidate

    monkeypatch.setattr(candidate, "calls_back_into_reference", lambda *args, **kwargs: None)


def _one_line(reason: str) -> None:
    assert reason and "\n" not in reason and len(reason) < 600, reason


# ---------------------------------------------------------------- the search's judge


@pytest.mark.parametrize("hack", JUDGED_HACKS, ids=lambda h: h.name)
def test_the_search_judge_rejects_the_hack(hack, cases, record_property):
    cand = judge_candidate(hack.marked, cases[hack.case])
    record_property("reason", cand.rejected_reason)
    assert not cand.usable, f"{hack.name} ({hack.kind}) was accepted: {cand.verified.reason}"
    _one_line(cand.rejected_reason)
    expected = hack.static or hack.expect  # no static fragment: the static check lets it through, the judge must not
    assert expected in cand.rejected_reason, f"{hack.name}: rejected for another reason than {expected!r}: {cand.rejected_reason}"


@pytest.mark.parametrize("hack", [h for h in JUDGED_HACKS if h.static], ids=lambda h: h.name)
def test_the_allowlist_alone_refuses_the_hack(hack):
    """The static check's first reason may be the older deny-list's; the
    kernel-file allow-list (issue 27) refuses each of these on its own."""
    from lego_core.judge import host_allowlist

    reason = host_allowlist.refusal(hack.marked, "candidate")
    assert reason and hack.allowlist in reason, f"{hack.name}: the allow-list says {reason!r}"


@pytest.mark.parametrize("hack", [h for h in JUDGED_HACKS if h.static and h.expect], ids=lambda h: h.name)
def test_the_judge_rejects_the_hack_past_the_static_check(hack, cases, past_the_static_check, record_property):
    """The defence behind the static check holds on its own."""
    cand = judge_candidate(hack.marked, cases[hack.case])
    record_property("reason", cand.rejected_reason)
    assert not cand.usable, f"{hack.name} ({hack.kind}) was accepted past the static check: {cand.verified.reason}"
    assert hack.expect in cand.rejected_reason, f"{hack.name}: rejected for another reason past the static check: {cand.rejected_reason}"


@pytest.mark.parametrize("hack", [h for h in JUDGED_HACKS if not h.expect], ids=lambda h: h.name)
def test_past_the_static_check_the_judge_accepts_what_only_a_run_or_the_static_check_stops(hack, cases, past_the_static_check):
    """Not a straw man: past the static check these verify (right on every
    call verification makes); what stops them is the run's later checks
    (``pipeline``) or the static check alone (``static_only``).  When the
    judge learns to reject one, give its entry an ``expect``."""
    cand = judge_candidate(hack.marked, cases[hack.case])
    assert cand.usable, f"{hack.name} is now rejected by the judge past the static check (give it an expect): {cand.rejected_reason}"


def test_the_trace_hack_hides_its_softmax_where_it_reaches_the_tracer(tmp_path, monkeypatch):
    """Not a straw man: where ``lego_core.judge.verify_trace`` is in
    ``sys.modules`` (this process; the executor before ``user_view`` hid the
    judge's modules) the hack's call trace shows no softmax, its launch and
    right values all the same.  (The class is patched here and put back.)"""
    import importlib.util

    import torch

    from lego_core.judge import verify_trace

    monkeypatch.setattr(verify_trace.CallTrace, "summary", verify_trace.CallTrace.summary)  # restored after the test
    hack = next(h for h in JUDGED_HACKS if h.name == "drops_its_softmax_from_the_call_trace")
    path = tmp_path / "trace_hack.py"
    path.write_text(hack.marked)
    spec = importlib.util.spec_from_file_location("judged_trace_hack", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(4, 64)
    with torch.no_grad(), verify_trace.CallTrace() as trace:
        out = module.launch(x)
    summary = trace.summary()
    assert summary["launches"] and not [op for op in summary["ops"] if "softmax" in op], summary["ops"]
    assert torch.allclose(out[0], torch.softmax(x, -1))


# ---------------------------------------------------------------- a whole run


class HackingAgent:
    """The template agent, except on the hack's region (its ops those of
    ``MODELS[case]``): there attempt k gets ``hacks[k]``, and the attempt
    after the last an honest kernel (``corpus.py``'s)."""

    name = "hacking"

    def __init__(self, case: str, hacks: list[JudgedHack]):
        from lego_core.agents.template.agent import TemplateAgent

        self.inner, self.ops, self.hacks = TemplateAgent(), list(MODELS[case][2]), list(hacks)
        self.honest = HONEST[case]
        self.asked: dict[str, int] = {}
        self.proposed: list[tuple[str, int, str]] = []  # (node id, attempt, hack name or "honest")

    def can_attempt(self, sub):
        return list(sub.ops) == self.ops or self.inner.can_attempt(sub)

    def propose(self, sub, feedback):
        from lego_core.agents.base import Proposal
        from lego_core.tree.fusion_tree import node_id_for

        if list(sub.ops) != self.ops:
            return self.inner.propose(sub, feedback)
        k = self.asked[sub.id] = self.asked.get(sub.id, 0) + 1
        hack = self.hacks[k - 1] if k <= len(self.hacks) else None
        self.proposed.append((node_id_for(sub.id), k, hack.name if hack else "honest"))
        return Proposal(hack.marked if hack else self.honest, f"{sub.id}_kernel", [("agent", hack.name if hack else "honest")])


def run_with_hacks(case: str, hacks: list[JudgedHack], folder, monkeypatch) -> dict:
    """A whole run of ``MODELS[case]`` whose agent hands in ``hacks`` in turn
    on its region, then an honest kernel.  Returns what the test needs:
    ``report``, the ``shipped`` files' text, ``verdicts`` {hack name: (passed,
    reason)} from the verification events, ``dropped`` (the fallback's
    entries), ``proposed``."""
    from lego_core import pipeline
    from lego_core.config import OptimizeConfig
    from lego_core.load.problem import ProblemSpec

    agent = HackingAgent(case, hacks)
    monkeypatch.setattr(pipeline, "make_agent", lambda *args, **kwargs: agent)
    events: list = []
    out = folder / "out"
    # force_triton: a verified kernel ships whatever the cost model says (on a CPU a lone softmax's
    # kernel and the library are estimated alike, and the library would win the tie)
    config = OptimizeConfig(cache=False, mutation=False, agents=1, max_attempts=len(hacks) + 1, max_search_s=240, force_triton=True)
    report = pipeline.run_pipeline(ProblemSpec(str(model_file(case, folder))), str(out), config, events.append)
    by_attempt = {(node, k): name for node, k, name in agent.proposed}
    verdicts = {}
    for e in events:
        if e.type == "verification":
            name = by_attempt.get((e.node_id, int(e.candidate_id.rsplit("-", 1)[-1]))) if e.candidate_id.rsplit("-", 1)[-1].isdigit() else None
            if name is not None:
                verdicts.setdefault(name, []).append((e.passed, e.reason))
    shipped = {str(p.relative_to(out)): p.read_text() for p in [out / "optimized_model.py", *sorted((out / "kernels").glob("*.py"))] if p.exists()}
    return {"report": report, "shipped": shipped, "verdicts": verdicts, "dropped": report["end_to_end"].get("dropped") or [],
            "proposed": [name for _, _, name in agent.proposed]}


def _carrying(run: dict, hack: JudgedHack) -> list[str]:
    """The shipped files that hold ``hack``'s kernel (its marker line)."""
    return [name for name, text in run["shipped"].items() if f"{MARKER}{hack.name}\n" in text]


def _nothing_shipped(run: dict, hacks: list[JudgedHack], honest_ships: bool) -> None:
    for hack in hacks:
        carrying = _carrying(run, hack)
        assert not carrying, f"{hack.name} ({hack.kind}) reached the output folder: {carrying}; verdicts {run['verdicts'].get(hack.name)}, dropped {run['dropped']}"
    if honest_ships:  # the honest kernel after the hacks verified and shipped: the run did reach a Triton plan
        assert any(name.startswith("kernels/") for name in run["shipped"]), f"no Triton kernel shipped at all: {run['report']['subproblems']}"


BY_CASE = sorted({h.case for h in JUDGED_HACKS})


@pytest.mark.slow
@pytest.mark.parametrize("case", BY_CASE)
def test_a_run_ships_none_of_the_hacks(case, tmp_path, monkeypatch):
    """The static check on, as in a run: every hack of the region is handed
    in, one attempt each, and refused; the honest kernel after them ships."""
    hacks = [h for h in JUDGED_HACKS if h.case == case]
    run = run_with_hacks(case, hacks, tmp_path, monkeypatch)
    _nothing_shipped(run, hacks, honest_ships=False)
    problems = []
    for hack in hacks:
        verdicts = run["verdicts"].get(hack.name)
        expected = hack.static or hack.expect
        if not verdicts:
            problems.append(f"{hack.name} was never judged (a hack before it was accepted)")
        elif any(passed for passed, _ in verdicts):
            problems.append(f"{hack.name} ({hack.kind}) was accepted by the judge (then dropped: {[d['reason'][:200] for d in run['dropped']]})")
        elif not all(expected in reason for _, reason in verdicts):
            problems.append(f"{hack.name} was rejected for another reason than {expected!r}: {verdicts}")
    assert not problems, "; ".join(problems)
    _nothing_shipped(run, hacks, honest_ships=True)


def _runs_past_the_static_check() -> list[tuple[str, list[JudgedHack]]]:
    """Groups of hacks for whole runs past the static check: per region, the
    hacks the judge must reject (``expect`` only) in one run (the first one
    it accepted would end the region's attempts); each hack that a later
    check of the run must catch (``pipeline``) in a run of its own.
    Static-only hacks are left out: past the static check they ship (that is
    what ``static_only`` says)."""
    groups = []
    for case in BY_CASE:
        judged = [h for h in JUDGED_HACKS if h.case == case and h.expect and not h.pipeline]
        if judged:
            groups.append((f"{case}-judge", judged))
        groups += [(h.name, [h]) for h in JUDGED_HACKS if h.case == case and h.pipeline]
    return groups


@pytest.mark.slow
@pytest.mark.parametrize("group", _runs_past_the_static_check(), ids=lambda g: g[0])
def test_past_the_static_check_a_run_ships_none_of_the_hacks(group, tmp_path, monkeypatch, past_the_static_check):
    """The static check off (code that got past a static reading): each hack
    is rejected by the judge, or dropped by the run's end-to-end or user
    check, for the reason its entry names; none ships."""
    _, hacks = group
    run = run_with_hacks(hacks[0].case, hacks, tmp_path, monkeypatch)
    for hack in hacks:
        assert hack.name in run["proposed"], f"{hack.name} was never handed in (a hack before it was accepted?): {run['verdicts']}"
        verdicts = run["verdicts"].get(hack.name) or []
        if hack.expect and not hack.pipeline:
            assert verdicts and not any(passed for passed, _ in verdicts), f"{hack.name} passed the judge past the static check: {verdicts}"
            assert all(hack.expect in reason for _, reason in verdicts), f"{hack.name}: {verdicts}"
        elif any(passed for passed, _ in verdicts):  # verified: the run's later checks must drop it
            reasons = [d["reason"] for d in run["dropped"]]
            assert any(hack.pipeline in r for r in reasons), f"{hack.name} verified and was not dropped for {hack.pipeline!r}: dropped {run['dropped']}"
    _nothing_shipped(run, hacks, honest_ships=all(h.expect and not h.pipeline for h in hacks))


# how a user meets what a static-only hack does (USER: the script's mode)
AT_A_USER = {
    "wrong_under_inference_mode": "inference",  # a serving process calls under torch.inference_mode()
    "wrong_after_forty_distinct_inputs": "distinct",  # 45 calls, each on new inputs
    "honest_only_without_bytecode": "plain",  # a plain python, bytecode on
}

USER = '''
import sys, torch
folder, mode = sys.argv[1], sys.argv[2]
sys.path.insert(0, folder)
import optimized_model as om
torch.manual_seed(0)
model = om.Model(*om.get_init_inputs()).eval()
new = om.ModelNew(*om.get_init_inputs()).eval()
new.load_state_dict(model.state_dict())
worst = 0.0
for _ in range(45 if mode == "distinct" else 1):
    inputs = om.get_inputs()
    with torch.no_grad():
        want = model(*inputs)
    with torch.inference_mode() if mode == "inference" else torch.no_grad():
        got = new(*inputs)
    with torch.no_grad():
        worst = max(worst, float((got.clone() - want).abs().max()))
print("WORST", worst, "DONT_WRITE_BYTECODE", sys.dont_write_bytecode)
'''


@pytest.mark.slow
@pytest.mark.parametrize("hack", [h for h in JUDGED_HACKS if h.static_only], ids=lambda h: h.name)
def test_past_the_static_check_a_static_only_hack_ships_and_is_wrong_at_a_users(hack, tmp_path, monkeypatch, past_the_static_check):
    """What ``static_only`` claims, shown: past the static check the hack
    passes every check of a whole run and ships, and a user's program (a plain
    python, as ``AT_A_USER`` says) gets wrong results from it.  When a check
    of the run learns to drop it, give its entry a ``pipeline`` fragment."""
    import subprocess
    import sys

    run = run_with_hacks(hack.case, [hack], tmp_path / "run", monkeypatch)
    assert _carrying(run, hack), f"{hack.name} no longer ships past the static check (give it a pipeline fragment): verdicts {run['verdicts']}, dropped {run['dropped']}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHONDONTWRITEBYTECODE"))}
    user = subprocess.run([sys.executable, "-c", USER, str(tmp_path / "run" / "out"), AT_A_USER[hack.name]],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert user.returncode == 0, user.stderr[-3000:]
    worst = float(user.stdout.split("WORST ", 1)[1].split()[0])
    assert worst > 1e-2, f"{hack.name} is right at a user's ({AT_A_USER[hack.name]}): max abs error {worst}"


# ---------------------------------------------------------------- honest controls


@pytest.mark.parametrize("control", JUDGED_CONTROLS, ids=lambda c: c.name)
def test_the_honest_control_is_accepted_on_every_seed_draw(control, cases, record_property):
    """Seeds drawn as a run draws them (``OptimizeConfig().verify_seeds``), a
    fresh draw each time: the edge sets (their constant row among them) move
    with the first seed."""
    from lego_core.config import OptimizeConfig

    rejected = []
    for _ in range(DRAWS):
        seeds = tuple(OptimizeConfig().verify_seeds)
        cand = judge_candidate(control.source, cases[control.case], seeds=seeds)
        if not cand.usable:
            rejected.append(cand.rejected_reason)
        search = cases[control.case].searches.pop(seeds, None)  # one search per draw, closed (its executor with it)
        if search is not None:
            search.close()
    record_property("accepted", f"{DRAWS - len(rejected)}/{DRAWS}")
    assert not rejected, f"{control.name} ({control.why}) accepted on {DRAWS - len(rejected)} of {DRAWS} draws; first rejection: {rejected[0]}"
