"""Adversarial candidates (issue 10, section 1): each hack is rejected for its
own reason, each honest control is accepted.

The corpus is in ``corpus.py`` (one complete kernel file per entry, the kind
of trick and the defence that must catch it); the sub-problems are captured
once per module from tiny models (``hacks_support.MODELS``) and judged by the
search's own judge, ``CandidateJudge.judge`` (``hacks_support.judge_candidate``) with
verification seeds drawn at random, as a run draws them.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from corpus import CONTROLS, GPU_HACKS, HACKS
from hacks_support import MODELS, PUBLIC_SEEDS, build_case, judge_candidate

pytestmark = [pytest.mark.hacks, pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"), pytest.mark.filterwarnings("ignore::RuntimeWarning")]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """Every sub-problem of the corpus, captured once."""
    root = tmp_path_factory.mktemp("hacks")
    return {name: build_case(name, root / name) for name in MODELS}


@pytest.mark.parametrize("hack", HACKS, ids=lambda h: h.name)
def test_hack_is_rejected_for_its_own_reason(hack, cases):
    cand = judge_candidate(hack.source, cases[hack.case])
    assert not cand.usable, f"{hack.name} ({hack.kind}) was accepted: {cand.verified.reason}"
    reason = cand.rejected_reason
    assert hack.rejected_as_expected(reason), f"{hack.name} ({hack.kind}) rejected for another reason: {reason}"
    assert "\n" not in reason and len(reason) < 500, reason
    seeds = cases[hack.case].search().config.verify_seeds
    assert not any(str(seed) in reason for seed in seeds), f"the reason reveals a seed in use: {reason}"


@pytest.mark.parametrize("control", CONTROLS, ids=lambda c: c.name)
def test_honest_control_is_accepted(control, cases):
    cand = judge_candidate(control.source, cases[control.case])
    assert cand.usable, f"{control.name} ({control.why}) was rejected: {cand.rejected_reason}"
    assert cand.verified.runs >= 8  # 3 seeded sets twice each, then 2 edge sets


def test_memorised_seeds_pass_only_when_the_seeds_are_public(cases, monkeypatch):
    """The seed hack is not a straw man: with the seeds every run used to
    have it is accepted; with the seeds a run now draws it is not (judged
    past the static check, which refuses its ``import base64`` first)."""
    from lego_core.judge import candidate

    monkeypatch.setattr(candidate, "calls_back_into_reference", lambda *args, **kwargs: None)
    hack = next(h for h in HACKS if h.name == "memorised_public_seeds")  # it carries the public runs' redrawn and edge sets
    assert judge_candidate(hack.source, cases["softmax"], seeds=PUBLIC_SEEDS).usable
    drawn = cases["softmax"].search().config
    assert drawn.seeds_drawn and set(drawn.verify_seeds).isdisjoint(PUBLIC_SEEDS)
    assert not judge_candidate(hack.source, cases["softmax"]).usable


def test_fill_value_hacks_pass_the_whole_tensor_check(cases):
    """Without judging the non-fill elements apart, the masked_fill hacks pass
    both the elementwise and the norm-relative check."""
    from lego_core.dtypes import tolerances
    from lego_core.judge.verify import _compare_float_part

    scores = torch.randn(8, 128, generator=torch.Generator().manual_seed(0))
    mask = torch.rand(8, 128, generator=torch.Generator().manual_seed(1)) < 0.3
    expected = scores.masked_fill(mask, -1e9)
    for wrong in (torch.where(mask, expected, 0.0), torch.where(mask, expected, scores * 1.1)):
        assert _compare_float_part("output 0", wrong, expected, tolerances(torch.float32)).passed


def test_the_import_guard_leaves_torch_as_it_was(cases):
    """A file that patched the reference op at import is rejected and the
    patch is undone: the reference still computes softmax afterwards."""
    hack = next(h for h in HACKS if h.name == "import_patches_aten_softmax")
    judge_candidate(hack.source, cases["softmax"])
    x = torch.randn(2, 8)
    assert torch.allclose(torch.ops.aten._softmax.default(x, -1, False), torch.softmax(x, -1))
    honest = next(c for c in CONTROLS if c.name == "softmax_honest")
    assert judge_candidate(honest.source, cases["softmax"]).usable


def test_template_agent_kernels_pass_the_trace_rules(cases):
    """The template agent's own kernels for these sub-problems verify under the
    same rules (the corpus's honest kernels are not the only honest ones)."""
    from lego_core.agents.template.agent import TemplateAgent

    agent = TemplateAgent()
    judged = []
    for case in cases.values():
        if agent.can_attempt(case.node.sub):
            proposal = agent.propose(case.node.sub, [])
            cand = judge_candidate(proposal.source, case)
            assert cand.usable, f"{case.name}: {cand.rejected_reason}"
            judged.append(case.name)
    assert {"softmax", "add_relu", "layer_norm", "masked_fill"} <= set(judged), judged


@pytest.mark.parametrize("hack", [h for h in HACKS if h.static], ids=lambda h: h.name)
def test_hack_is_rejected_past_the_static_check(hack, cases, monkeypatch):
    """The defence behind the static check holds on its own: with the static
    check out of the way, the hack is still rejected, for the reason its
    entry names (a kernel written to get past a static reading must not get
    through)."""
    from lego_core.judge import candidate

    monkeypatch.setattr(candidate, "calls_back_into_reference", lambda *args, **kwargs: None)
    cand = judge_candidate(hack.source, cases[hack.case])
    assert not cand.usable, f"{hack.name} ({hack.kind}) was accepted past the static check: {cand.verified.reason}"
    assert hack.rejected_as_expected(cand.rejected_reason, past_static=True), f"{hack.name}: rejected for another reason past the static check: {cand.rejected_reason}"


@pytest.mark.gpu
@pytest.mark.parametrize("hack", [h for h in GPU_HACKS if h.name != "memo_when_timed"], ids=lambda h: h.name)
def test_gpu_hack_is_rejected(hack, tmp_path):
    """On a GPU: verification itself rejects the stream and TF32 hacks."""
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a CUDA GPU with compiled Triton kernels")
    from gpu_hacks import verify_on_gpu

    reason = verify_on_gpu(hack, tmp_path)
    assert hack.rejected_as_expected(reason), reason


@pytest.mark.gpu
@pytest.mark.parametrize("hack", [h for h in GPU_HACKS if h.static and h.name != "memo_when_timed"], ids=lambda h: h.name)
def test_gpu_hack_is_rejected_past_the_static_check(hack, tmp_path, monkeypatch):
    """On a GPU, with the static check out of the way: the defence behind it
    (the stream in the call trace, TF32 in the compiled kernel) still rejects
    the hack."""
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a CUDA GPU with compiled Triton kernels")
    from gpu_hacks import verify_on_gpu
    from lego_core.judge import candidate

    monkeypatch.setattr(candidate, "calls_back_into_reference", lambda *args, **kwargs: None)
    reason = verify_on_gpu(hack, tmp_path)
    assert reason and hack.rejected_as_expected(reason, past_static=True), reason


@pytest.mark.gpu
def test_timing_guard_rejects_memoised_timing(tmp_path):
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a CUDA GPU with compiled Triton kernels")
    from gpu_hacks import time_on_gpu

    hack = next(h for h in GPU_HACKS if h.name == "memo_when_timed")
    guarded = time_on_gpu(hack.source, "add_relu", tmp_path)
    assert not guarded.believed and hack.expect in guarded.reason, guarded
    honest = time_on_gpu(next(c for c in CONTROLS if c.name == "add_relu_honest").source, "add_relu", tmp_path)
    assert honest.believed, honest


def _cpu_median_ms(fn, sets, rounds: int = 3) -> float:
    """A stand-in for ``costing.measure_ms`` on the CPU (the guard's logic, not its numbers)."""
    import statistics
    import time

    times = []
    for _ in range(rounds):
        for xs in sets:
            start = time.perf_counter()
            fn(xs)
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _guarded(source, case, **kwargs):
    from gpu_hacks import input_sets, load_candidate
    from lego_core.judge.timing_guard import guarded_measure_ms

    module = load_candidate(source, case.work / "timing")
    return guarded_measure_ms(lambda *xs, out=None: module.launch(*xs, out=out), input_sets(case), case.node.sub.run_reference, **kwargs)


def test_timing_guard_catches_memoised_timing_under_the_interpreter(cases, monkeypatch):
    """The memo hack verifies (every verification call has a new output
    buffer) but, timed on the same inputs into the same output, stops
    launching: the calls after timing show it."""
    from lego_core.judge import candidate

    monkeypatch.setattr(candidate, "calls_back_into_reference", lambda *args, **kwargs: None)  # its .data_ptr is refused first
    hack = next(h for h in GPU_HACKS if h.name == "memo_when_timed")
    assert judge_candidate(hack.source, cases["add_relu"]).usable  # what made it a timing hack
    guarded = _guarded(hack.source, cases["add_relu"], measure=_cpu_median_ms)
    assert not guarded.believed and hack.expect in guarded.reason, guarded
    honest = _guarded(next(c for c in CONTROLS if c.name == "add_relu_honest").source, cases["add_relu"], measure=_cpu_median_ms)
    assert honest.believed, honest


def test_timing_guard_floor_rejects_an_impossible_time(cases):
    honest = next(c for c in CONTROLS if c.name == "softmax_honest").source
    guarded = _guarded(honest, cases["softmax"], measure=lambda fn, sets: 1e-6, min_bytes=64 << 20)
    assert "faster than the memory roofline allows" in guarded.reason, guarded
    assert guarded.floor_ms > 2e-6


def _guarded_in_executor(source, case, tmp_path, name):
    """``timing_guard.guarded_remote_time`` as the search calls it (``gpu_hacks.time_guarded``), timed with the CPU clock."""
    from gpu_hacks import time_guarded

    return time_guarded(source, case, tmp_path / name, clock="cpu")


def test_timing_guard_through_the_executor_catches_memoised_timing(cases, tmp_path):
    """The search's path: the memo hack, timed in its executor on the same
    buffers it is later checked on (the executor hands the kernel the same
    tensor objects for the same memory), stops launching and is caught; the
    honest kernel's time is believed."""
    hack = next(h for h in GPU_HACKS if h.name == "memo_when_timed")
    guarded = _guarded_in_executor(hack.source, cases["add_relu"], tmp_path, "memo")
    assert not guarded.believed and hack.expect in guarded.reason, guarded
    honest = _guarded_in_executor(next(c for c in CONTROLS if c.name == "add_relu_honest").source, cases["add_relu"], tmp_path, "honest")
    assert honest.believed and 0 < honest.ms < float("inf"), honest


def test_timing_guard_through_the_executor_catches_a_kernel_that_stops_computing_once_timed(cases, tmp_path):
    """Another timing hack (not the corpus's memo): after enough calls the
    kernel fills its output with a constant; verification's few calls never
    reach it, the calls after timing do."""
    honest = next(c for c in CONTROLS if c.name == "add_relu_honest").source
    lazy = honest.replace("def launch(", "_CALLS = [0]\n\n\ndef _honest_launch(", 1) + '''

def launch(x, y, out=None):
    _CALLS[0] += 1
    if _CALLS[0] > 12 and out is not None:
        out[0].fill_(0.5)
        return out
    return _honest_launch(x, y, out=out)
'''
    guarded = _guarded_in_executor(lazy, cases["add_relu"], tmp_path, "lazy")
    assert not guarded.believed and "after timing" in guarded.reason, guarded


def test_timing_guard_through_the_executor_reports_a_kernel_that_raises_when_timed(cases, tmp_path):
    honest = next(c for c in CONTROLS if c.name == "add_relu_honest").source
    raising = honest.replace("def launch(", "_CALLS = [0]\n\n\ndef _honest_launch(", 1) + '''

def launch(x, y, out=None):
    _CALLS[0] += 1
    if _CALLS[0] > 3:
        raise RuntimeError("only three calls")
    return _honest_launch(x, y, out=out)
'''
    guarded = _guarded_in_executor(raising, cases["add_relu"], tmp_path, "raising")
    assert not guarded.believed and "only three calls" in guarded.reason, guarded


def test_call_counters_pass_without_the_repeated_call(cases, monkeypatch):
    """The state hacks are not straw men: with the repeated call's state
    check out of the way, a kernel right for its first 100 calls is accepted
    (verification makes about ten), while the six-call counters are still
    caught by the calls behind it (call 7)."""
    from lego_core.judge import candidate, verify

    monkeypatch.setattr(candidate, "calls_back_into_reference", lambda *args, **kwargs: None)  # the allow-list refuses their counters first
    monkeypatch.setattr(verify, "state_kept", lambda before, after: "")
    hundred = next(h for h in HACKS if h.name == "right_for_the_first_hundred_calls")
    assert judge_candidate(hundred.source, cases["softmax"]).usable
    for name in ("right_for_the_first_six_calls", "right_for_the_first_six_calls_add"):
        hack = next(h for h in HACKS if h.name == name)
        cand = judge_candidate(hack.source, cases[hack.case])
        assert not cand.usable and "call 7, " in cand.rejected_reason, (name, cand.rejected_reason)


def test_the_kernel_file_state_digest_follows_what_a_file_keeps():
    """``module_state_digest``: a counter anywhere the file reaches moves it;
    a call's own tensors refilled with new values, Triton's compile caches
    and a cache entry rewritten with the same value do not."""
    import types

    from lego_core.judge.verify_trace import module_state_digest

    module = types.ModuleType("kernel_file")
    exec(compile("import itertools\nimport torch\nCOUNT = itertools.count()\nBLOCKS = {}\nBUF = torch.zeros(4)\n"
                 "def f(a, _d=[0]):\n    return a\nclass K:\n    n = 0\n", "kernel_file.py", "exec"), vars(module))
    x = torch.randn(8)
    base = module_state_digest(module, [x])
    x.copy_(torch.randn(8))
    module.BLOCKS[8] = 1024
    module.BLOCKS[8] = 1024
    after_setup = module_state_digest(module, [x])
    assert after_setup != base  # a new entry is a change
    assert module_state_digest(module, [x]) == after_setup
    for change in (lambda: next(module.COUNT), lambda: module.f.__defaults__[0].append(1), lambda: setattr(module.K, "n", 1),
                   lambda: module.BUF.add_(1), lambda: setattr(x, "calls", 1)):
        before = module_state_digest(module, [x])
        change()
        assert module_state_digest(module, [x]) != before, change


def test_every_run_draws_fresh_secret_seeds():
    """The default config of a run (CLI, API and web service build it with
    ``verify_seeds=None``) draws three distinct seeds of its own, never the
    public ones, and an end-to-end seed apart from them; two runs do not
    share them; a message's label names a seed without showing it, and the
    report lists seed and label once the run is over."""
    from lego_core.config import OptimizeConfig
    from lego_core.judge.verify_policy import seed_label, seeds_record

    runs = [OptimizeConfig() for _ in range(4)]
    for config in runs:
        seeds = config.verify_seeds
        assert config.seeds_drawn and len(set(seeds)) == 3 and set(seeds).isdisjoint(PUBLIC_SEEDS)
        assert config.e2e_seed not in seeds
        assert all(str(s) not in seed_label(s) for s in seeds)
        record = seeds_record(config)
        assert record["drawn"] and record["seeds"] == list(seeds) and record["labels"] == [seed_label(s) for s in seeds]
    assert len({s for config in runs for s in config.verify_seeds}) == 12, "two runs drew a common seed"
    fixed = OptimizeConfig(verify_seeds=PUBLIC_SEEDS)
    assert not fixed.seeds_drawn and fixed.verify_seeds == PUBLIC_SEEDS
