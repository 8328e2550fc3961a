"""Per-shape tuning (``lego_core.judge.tuning``) and its hook in the candidate judge.

CPU only (TRITON_INTERPRET=1, fp32, tiny): the timer is a fake injected into
``tune_source`` that prices each configuration from a table, so the test is
about the choice, the rewrite of the ``CONFIG`` line and the guards (a
configuration that raises or changes the result never wins), and about the
rewritten file still passing ``verify``.  The real GPU timing is exercised
by bench/gpu_checks/check_attention.py and check_gemm.py.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import test_attention as attention_tests  # noqa: E402
import test_gemm_epilogue as gemm_tests  # noqa: E402
from lego_core.agents.template.attention_codegen import generate as attention_source  # noqa: E402
from lego_core.agents.template.codegen import generate  # noqa: E402
from lego_core.agents.template.agent import TemplateAgent  # noqa: E402
from lego_core.load.capture import capture_graph  # noqa: E402
from lego_core.tree.fusion.attention import find_attention  # noqa: E402
from lego_core.tree.fusion.gemm import grow_epilogue  # noqa: E402
from lego_core.judge.inputs import load_module  # noqa: E402
from lego_core.judge import tuning  # noqa: E402
from lego_core.tree.subproblem import make_subproblem  # noqa: E402
from lego_core.judge.verify import verify  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")


class Loader:
    """``load`` for tune_source: imports a source from tmp_path and keeps the module
    (the fake timer reads its CONFIG); ``wrap`` may replace its launch."""

    def __init__(self, tmp_path: Path, wrap=None):
        self.tmp_path, self.wrap, self.module, self.count = tmp_path, wrap, None, 0

    def __call__(self, source: str):
        self.count += 1
        path = self.tmp_path / f"tuning_{self.count}.py"
        path.write_text(source)
        self.module = load_module(path, f"lego_test_tuning_{id(self)}_{self.count}")
        if self.wrap:
            self.wrap(self.module)
        return self.module


def table_timer(loader: Loader, prices: dict):
    """A fake timer: runs ``fn`` once (as a timer would) and returns the price of the current CONFIG."""

    def timer(fn, sets):
        fn(sets[0])
        return prices[_key(loader.module.CONFIG)]

    return timer


def _key(cfg: dict) -> tuple:
    return tuple(sorted(cfg.items()))


def _gemm(tmp_path):
    """A fp32 Linear + GELU + residual: M = K = N = 40 (several distinct configurations fit)."""
    source = gemm_tests.problem_source("return x + F.gelu(self.fc(x))", "torch.randn(40, 40)", gemm_tests.linear(40, 40))
    problem, graph = gemm_tests.capture(tmp_path, source)
    sub = gemm_tests.subproblem(graph, grow_epilogue(gemm_tests.gemms(graph)[0]))
    return sub, generate(sub), gemm_tests.input_sets(problem, graph, sub)


def _verifies(tmp_path, sub, source, sets) -> None:
    path = tmp_path / f"verify_{abs(hash(source))}.py"
    path.write_text(source)
    module = load_module(path, f"lego_test_tuned_{path.stem}")
    report = verify(lambda xs, out: module.launch(*xs, out=out), sub.run_reference, sets, torch.float32, list(gemm_tests.SEEDS))
    assert report.passed, report.reason


def _changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    a, b = before.splitlines(), after.splitlines()
    assert len(a) == len(b)
    return [(x, y) for x, y in zip(a, b) if x != y]


def test_gemm_tuning_picks_the_fastest_and_rewrites_only_the_config_line(tmp_path):
    sub, source, sets = _gemm(tmp_path)
    assert tuning.tunable(source)
    default = tuning.default_config(source)
    probe = Loader(tmp_path)
    configs = [dict(c) for c in probe(source).TUNE_CONFIGS]
    assert configs[0] == default and len(configs) >= 4 and len({_key(c) for c in configs}) == len(configs)
    prices = {_key(c): 1.0 + k for k, c in enumerate(configs)}
    fastest = configs[2]
    prices[_key(fastest)] = 0.25
    loader = Loader(tmp_path)
    result = tuning.tune_source(source, [sets[0]], load=loader, timer=table_timer(loader, prices), device_name="test device")
    assert result.winner == fastest and result.default == default
    assert [cfg for cfg, _, _ in result.times] == configs and all(ms is not None for _, ms, _ in result.times)
    (old, new), = _changed_lines(source, result.source)
    assert old.startswith("CONFIG = ") and new.startswith(f"CONFIG = {fastest!r}  # tuned: 0.2500 ms on test device")
    assert tuning.default_config(result.source) == fastest and not tuning.tunable(result.source)
    assert "1.0000 ms" in new  # the default's time is in the comment
    assert "tuned" in result.summary() and "4.00x the default" in result.summary()
    _verifies(tmp_path, sub, result.source, sets)  # the tuned file still verifies


def test_a_config_that_raises_or_differs_never_wins(tmp_path):
    sub, source, sets = _gemm(tmp_path)
    configs = [dict(c) for c in Loader(tmp_path)(source).TUNE_CONFIGS]
    broken = {**configs[1], "BLOCK_M": 24}  # tl.arange needs a power of two: the launch raises
    source = source.replace(f"    {configs[1]!r},\n", f"    {broken!r},\n", 1)
    differs = configs[2]

    def corrupt(module):  # one configuration computes a different result
        launch = module.launch

        def wrapped(*args, **kwargs):
            out = launch(*args, **kwargs)
            if module.CONFIG == differs:
                out[0].add_(1.0)
            return out

        module.launch = wrapped

    prices = {_key(c): 2.0 for c in configs}
    prices[_key(broken)] = prices[_key(differs)] = 0.1  # the fake timer would prefer them
    loader = Loader(tmp_path, wrap=corrupt)
    result = tuning.tune_source(source, [sets[0]], load=loader, timer=table_timer(loader, prices))
    notes = {_key(cfg): note for cfg, ms, note in result.times if ms is None}
    assert set(notes) == {_key(broken), _key(differs)}
    assert "differs from the default" in notes[_key(differs)] and notes[_key(broken)]
    assert result.winner == configs[0]  # every other one costs the same as the default: the default stays
    (old, new), = _changed_lines(source, result.source)
    assert new.startswith(f"CONFIG = {configs[0]!r}  # tuned: default kept")
    _verifies(tmp_path, sub, result.source, sets)


def test_a_default_that_fails_propagates(tmp_path):
    _, source, sets = _gemm(tmp_path)
    bad = tuning.with_config(source, {"BLOCK_M": 24, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 4, "num_stages": 2})
    with pytest.raises(Exception):
        tuning.tune_source(bad, [sets[0]], load=Loader(tmp_path), timer=lambda fn, s: 1.0)
    with pytest.raises(ValueError):  # a tuned file is not tuned again
        tuning.tune_source(tuning.with_config(source, tuning.default_config(source), "done"), [sets[0]], timer=lambda fn, s: 1.0)


def test_attention_tuning_keeps_a_verified_kernel(tmp_path):
    """Causal GQA attention, T=40, head dim 24 (padded): the tuned file verifies on the model's activations."""
    problem = attention_tests._custom(tmp_path, mode=2, n_heads=4, n_kv_heads=2, seq_len=40, head_dim=24)
    graph = capture_graph(problem)
    group, = find_attention(graph.compute_nodes)
    sub = make_subproblem("sp_tune_att", group.nodes, graph.output_nodes, "attention", group=group)
    source = attention_source(sub)
    configs = [dict(c) for c in Loader(tmp_path)(source).TUNE_CONFIGS]
    assert len(configs) >= 3 and all(c["BLOCK_N"] <= c["BLOCK_M"] for c in configs)
    prices = {_key(c): 1.0 for c in configs}
    prices[_key(configs[-1])] = 0.5
    envs = [graph.run(problem.model, problem.make_inputs(seed=s)) for s in attention_tests.SEEDS]
    sets = [[env[n.name] for n in sub.inputs] for env in envs]
    loader = Loader(tmp_path)
    result = tuning.tune_source(source, [sets[0]], load=loader, timer=table_timer(loader, prices))
    assert result.winner == configs[-1]
    assert len(_changed_lines(source, result.source)) == 1
    path = tmp_path / "tuned_attention.py"
    path.write_text(result.source)
    module = load_module(path, "lego_test_tuned_attention")
    report = verify(lambda xs, out: module.launch(*xs, out=out), sub.run_reference, sets, torch.float32, attention_tests.SEEDS)
    assert report.passed, report.reason


# ------------------------------------------------------------- the judge's hook


def _gemm_judge(tmp_path, tune=None):
    """A CandidateJudge for the GEMM problem of ``_gemm`` (CPU, fp32; ``tune``:
    tuning forced on or off, None: as a run decides) and an OR node holding
    its GEMM + epilogue group."""
    from lego_core.config import OptimizeConfig
    from lego_core.judge.candidate import CandidateJudge
    from lego_core.tree.fusion_tree import OrNode

    sub, _, _ = _gemm(tmp_path)
    source = gemm_tests.problem_source("return x + F.gelu(self.fc(x))", "torch.randn(40, 40)", gemm_tests.linear(40, 40))
    problem, graph = gemm_tests.capture(tmp_path, source)
    activations = [graph.run(problem.model, problem.make_inputs(seed)) for seed in gemm_tests.SEEDS]
    parameters = {name for name, src in graph.sources.items() if src.kind == "parameter"}
    events = []
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    config = OptimizeConfig(cache=False, verify_seeds=gemm_tests.SEEDS)
    judge = CandidateJudge(activations, parameters, config, torch.float32, "cpu", work, events.append, tune=tune)
    return judge, events, OrNode("or_tune", sub, None)


def _candidate(node):
    from lego_core.tree.fusion_tree import Candidate

    proposal = TemplateAgent().propose(node.sub, [])
    return Candidate(f"{node.id}-t{id(proposal)}", node.id, "template", "triton", proposal.source, proposal.kernel_name)


def test_engine_hook_is_inert_on_cpu(tmp_path, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("tuning ran on a CPU search")

    monkeypatch.setattr(tuning, "tune_source", never)
    judge, events, node = _gemm_judge(tmp_path)
    assert not judge.tune  # device "cpu": nothing is measured, nothing tuned
    cand = _candidate(node)
    before = cand.source
    judge.judge(node, cand)
    assert cand.usable and cand.source == before and cand.time_kind == "estimated"
    assert not any(getattr(e, "agent", "") == "tuner" for e in events)


def test_engine_hook_bakes_the_tuned_config_or_keeps_the_default(tmp_path, monkeypatch):
    """With tuning on (as on a GPU run; timing replaced by the cost model here): the
    tuned source is verified and kept; a tuned source that fails verification and a
    tuner that raises both leave the default configuration, noted in the transcript."""
    judge, events, node = _gemm_judge(tmp_path, tune=True)
    cand = _candidate(node)
    default = tuning.default_config(cand.source)
    faster = {**default, "num_stages": default["num_stages"] + 1}

    def fake(source, input_sets, load=None, **kwargs):
        load(source)  # the judge's loader imports it
        return tuning.TuneResult(tuning.with_config(source, faster, "fake"), default, faster, [(default, 2.0, ""), (faster, 1.0, "")], 0.1)

    monkeypatch.setattr(tuning, "tune_source", fake)
    judge.judge(node, cand)
    assert cand.usable and tuning.default_config(cand.source) == faster and "# tuned: fake" in cand.source
    tuner = [e.content for e in events if getattr(e, "agent", "") == "tuner"]
    assert tuner and "tuned" in tuner[-1] and "2.0000 ms" in tuner[-1]

    broken = {**default, "BLOCK_M": 24}  # the launch raises: verification fails
    monkeypatch.setattr(tuning, "tune_source", lambda source, sets, **kw: tuning.TuneResult(tuning.with_config(source, broken, "fake"), default, broken, [], 0.1))
    cand = _candidate(node)
    judge.judge(node, cand)
    assert cand.usable and tuning.default_config(cand.source) == default
    assert any("the tuned configuration failed verification" in getattr(e, "content", "") for e in events)

    def boom(*args, **kwargs):
        raise RuntimeError("out of resources")

    monkeypatch.setattr(tuning, "tune_source", boom)
    cand = _candidate(node)
    judge.judge(node, cand)
    assert cand.usable and tuning.tunable(cand.source)
    assert any("tuning failed (RuntimeError: out of resources); keeping the default" in getattr(e, "content", "") for e in events)


def test_row_reduction_offers_warps_per_row_and_every_choice_verifies(tmp_path):
    """A row reduction's kernel file offers 1 to 16 warps per row (at least one
    element per thread), its template default first; tuning bakes the
    fastest, and the file verifies under each configuration (the warps change
    only how a row is reduced, never what)."""
    from lego_core.tree.fusion_tree import build_tree

    source = gemm_tests.problem_source("return torch.softmax(x * 2.0 + 1.0, dim=-1).sum(dim=-1)", "torch.randn(6, 200)", "pass")
    problem, graph = gemm_tests.capture(tmp_path, source)
    node = next(n for n in build_tree(graph).or_nodes() if n.sub.group is not None and n.sub.group.kind == "row_reduction")
    kernel = generate(node.sub)
    assert tuning.tunable(kernel) and tuning.default_config(kernel) == {"num_warps": 2}
    configs = [dict(c) for c in Loader(tmp_path)(kernel).TUNE_CONFIGS]
    assert configs == [{"num_warps": w} for w in (1, 2, 4, 8)]  # a 256-wide block: up to 8 warps of 32 threads
    sets = gemm_tests.input_sets(problem, graph, node.sub)
    for cfg in configs:
        _verifies(tmp_path, node.sub, tuning.with_config(kernel, cfg), sets)
    loader = Loader(tmp_path)
    prices = {_key(c): 1.0 for c in configs} | {_key({"num_warps": 1}): 0.5}
    result = tuning.tune_source(kernel, [sets[0]], load=loader, timer=table_timer(loader, prices), device_name="test device")
    assert result.winner == {"num_warps": 1}
    (old, new), = _changed_lines(kernel, result.source)
    assert new.startswith("CONFIG = {'num_warps': 1}  # tuned")
