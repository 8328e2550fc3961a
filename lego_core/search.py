"""Search: solve every leaf of the FusionTree and pick the cheapest verified plan.

This first strategy walks the leaves in schedule order.  For each leaf it
keeps the library candidate (the region's own ATen ops, always valid) and
asks the agent for a fused Triton candidate; a candidate is accepted only if
it passes verification (``lego_core.verify``) on the recorded input sets,
and chosen only if it is cheaper (measured on a GPU, estimated by the cost
model otherwise).  Leaves with equal signatures share one kernel: the first
one is solved, the others reuse its result.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import torch

from lego_core import costing
from lego_core.agents.base import Agent
from lego_core.config import OptimizeConfig
from lego_core.events import CandidateProposed, PlanImproved, Sink, Timing, TranscriptMessage, VerificationResult
from lego_core.tree import Candidate, FusionTree, OrNode
from lego_core.verify import calls_back_into_reference, verify

FUSABLE_KINDS = ("pointwise", "row_reduction")


@dataclasses.dataclass
class SearchResult:
    """The chosen plan: ``modules`` maps kernel names to loaded kernel modules;
    ``metrics`` counts agent calls, reused leaves and wall time."""

    modules: dict
    metrics: dict
    plan_cost_ms: float
    baseline_ms: float
    cost_kind: str


class LeafSolver:
    """Solves leaves one at a time; shares results between equal signatures."""

    def __init__(self, agent: Agent, config: OptimizeConfig, dtype: torch.dtype, device: str, work_dir: Path, emit: Sink):
        self.agent, self.config, self.dtype, self.emit = agent, config, dtype, emit
        self.measure = device == "cuda" and config.timing == "auto"
        self.work_dir = work_dir
        self.modules: dict[str, ModuleType] = {}
        self.solved: dict[str, OrNode] = {}
        self.agent_calls = 0
        self.reused = 0

    def solve(self, leaf: OrNode, input_sets: list[list]) -> None:
        sub = leaf.sub
        contested = self.config.use_triton and sub.kind in FUSABLE_KINDS
        earlier = self.solved.get(sub.signature) if contested else None
        if earlier is not None:
            self._reuse(leaf, earlier)
            return
        library = Candidate(f"{leaf.id}-library", leaf.id, "library", "library")
        self._time_library(leaf, library, input_sets)
        leaf.candidates.append(library)
        leaf.chosen = library
        if not contested:
            return
        self.solved[sub.signature] = leaf
        candidate = self._propose(leaf)
        if candidate is None:
            return
        module = self._load(candidate)
        self._verify(leaf, candidate, module, input_sets)
        if not candidate.usable:
            return
        self._time_triton(leaf, candidate, module, input_sets)
        if candidate.time_ms < library.time_ms or self.config.force_triton:
            leaf.chosen = candidate
            self.modules[candidate.kernel_name] = module

    def _propose(self, leaf: OrNode) -> Candidate | None:
        self.agent_calls += 1
        proposal = self.agent.propose(leaf.sub, feedback=[])
        for role, content in proposal.transcript:
            self.emit(TranscriptMessage(node_id=leaf.id, agent=self.agent.name, role=role, content=content))
        if proposal.source is None:
            return None
        candidate = Candidate(f"{leaf.id}-{self.agent.name}", leaf.id, self.agent.name, "triton", proposal.source, proposal.kernel_name)
        leaf.candidates.append(candidate)
        self.emit(CandidateProposed(node_id=leaf.id, candidate_id=candidate.id, agent=self.agent.name, implementation="triton", source=proposal.source))
        return candidate

    def _load(self, candidate: Candidate) -> ModuleType:
        path = self.work_dir / f"{candidate.kernel_name}.py"
        path.write_text(candidate.source)
        return load_module(path, f"lego_candidate_{candidate.kernel_name}")

    def _verify(self, leaf: OrNode, candidate: Candidate, module: ModuleType, input_sets: list[list]) -> None:
        sub = leaf.sub
        callback = calls_back_into_reference(candidate.source, sub.ops)
        if callback:
            from lego_core.verify import VerifyReport

            candidate.verified = VerifyReport(False, float("inf"), float("inf"), callback, list(self.config.verify_seeds))
        else:
            candidate.verified = verify(
                lambda inputs, out: module.launch(*inputs, out=out),
                sub.run_reference,
                input_sets,
                self.dtype,
                list(self.config.verify_seeds),
            )
        report = candidate.verified
        if not report.passed:
            candidate.rejected_reason = report.reason
        self.emit(
            VerificationResult(
                node_id=leaf.id,
                candidate_id=candidate.id,
                passed=report.passed,
                max_abs_error=report.to_dict()["max_abs_error"],
                reason=report.reason,
            )
        )

    def _time_library(self, leaf: OrNode, library: Candidate, input_sets: list[list]) -> None:
        sub = leaf.sub
        contested = self.config.use_triton and sub.kind in FUSABLE_KINDS
        if self.measure and contested:
            library.time_ms, library.time_kind = costing.measure_ms(sub.run_reference, input_sets), "measured"
        else:
            library.time_ms = costing.library_estimate_ms(sub, self.dtype, self.config.target_gpu)
        self.emit(Timing(node_id=leaf.id, candidate_id=library.id, ms=library.time_ms, measured=library.time_kind == "measured"))

    def _time_triton(self, leaf: OrNode, candidate: Candidate, module: ModuleType, input_sets: list[list]) -> None:
        if self.measure:
            candidate.time_ms, candidate.time_kind = costing.measure_ms(lambda xs: module.launch(*xs), input_sets), "measured"
        else:
            candidate.time_ms = costing.fused_estimate_ms(leaf.sub, self.dtype, self.config.target_gpu)
        baseline = leaf.candidates[0].time_ms
        self.emit(Timing(node_id=leaf.id, candidate_id=candidate.id, ms=candidate.time_ms, measured=candidate.time_kind == "measured", baseline_ms=baseline))

    def _reuse(self, leaf: OrNode, earlier: OrNode) -> None:
        """Take over the solution of an equal-signature leaf solved before."""
        self.reused += 1
        leaf.reused_from = earlier.id
        for cand in earlier.candidates:
            copy = dataclasses.replace(cand, id=f"{leaf.id}-{cand.agent}", node_id=leaf.id)
            leaf.candidates.append(copy)
            if earlier.chosen is cand:
                leaf.chosen = copy
        self.emit(TranscriptMessage(node_id=leaf.id, agent="dedupe", role="system", content=f"same signature as {earlier.id}: reusing its result"))


def load_module(path: Path, name: str) -> ModuleType:
    """Import a Python file as a module (Triton's @jit needs a real file)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def perturbed(value: torch.Tensor, seed: int) -> torch.Tensor:
    """A parameter redrawn around its value: ``p * U(0.5, 1.5) + 0.1 * std * N(0, 1)``.

    Freshly initialised weights are often all ones and biases all zeros; a
    kernel that ignores them would pass on those values alone."""
    gen = torch.Generator().manual_seed(seed)
    scale = value.detach().float().std().item() if value.numel() > 1 else 1.0
    factor = 0.5 + torch.rand(value.shape, generator=gen)
    noise = torch.randn(value.shape, generator=gen) * 0.1 * (scale if scale > 0 else 1.0)
    return (value.detach().float().cpu() * factor + noise).to(device=value.device, dtype=value.dtype)


def leaf_input_sets(leaf: OrNode, activations: list[dict], parameters: set[str], seeds: tuple) -> list[list]:
    """The verification inputs of a leaf: its boundary values from each
    seeded run of the model; in every set but the first, parameters read by
    the leaf are perturbed (``perturbed``) so that their use is tested."""
    sets = []
    for k, env in enumerate(activations):
        inputs = []
        for j, node in enumerate(leaf.sub.inputs):
            value = env[node.name]
            if k > 0 and node.name in parameters and isinstance(value, torch.Tensor) and value.is_floating_point():
                value = perturbed(value, seeds[k] * 1000 + j)
            inputs.append(value)
        sets.append(inputs)
    return sets


def run_search(tree: FusionTree, activations: list[dict], solver: LeafSolver, emit: Sink, progress=None, parameters: set[str] | None = None) -> SearchResult:
    """Solve every leaf in schedule order and return the chosen plan.

    ``activations``: one dict per verification seed mapping node names to the
    reference values (``Graph.run``); ``parameters``: names of placeholders
    that hold model parameters (perturbed in all but the first input set).
    ``progress(done, total)`` is called after each leaf.
    """
    start = time.monotonic()
    leaves = tree.leaves()
    for k, leaf in enumerate(leaves):
        input_sets = leaf_input_sets(leaf, activations, parameters or set(), solver.config.verify_seeds)
        solver.solve(leaf, input_sets)
        if progress:
            progress(k + 1, len(leaves))
    cost = sum(leaf.chosen.time_ms for leaf in leaves)
    baseline = sum(leaf.candidates[0].time_ms for leaf in leaves)
    kinds = {leaf.chosen.time_kind for leaf in leaves} | {leaf.candidates[0].time_kind for leaf in leaves}
    cost_kind = "measured" if kinds == {"measured"} else "estimated"
    emit(PlanImproved(cost_ms=cost, baseline_ms=baseline, speedup=baseline / cost if cost else 1.0, measured=cost_kind == "measured"))
    metrics = {
        "agent_calls": solver.agent_calls,
        "reused_nodes": solver.reused,
        "search_time_s": round(time.monotonic() - start, 3),
    }
    return SearchResult(solver.modules, metrics, cost, baseline, cost_kind)
