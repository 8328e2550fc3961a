"""Judging one candidate kernel of one sub-problem: ``CandidateJudge.judge(node, cand) -> Verdict``.

The search (``lego_core.search.engine``) decides what to try; this module
decides whether a try counts, and what it costs.  A verdict is reached in
one *lane* at a time (``CandidateJudge.lane``), so GPU timings never overlap
and Triton's interpreter, which patches ``triton.language`` while it runs,
is never entered twice:

1. a file that merely calls back into the reference ops, or that holds
   anything outside the allow-list every kernel file passes (node types,
   imports, names, no state kept between calls:
   ``judge.host_allowlist``), is refused unread
   (``verify.calls_back_into_reference``, which runs both);
2. on a GPU, a file that offers ``TUNE_CONFIGS`` is tuned per shape
   (``lego_core.judge.tuning``; the launches run in the executor);
3. the file is imported in the candidate executor (``lego_core.judge.process``)
   and verified here (``verify.verify``: seeded and edge-case input sets;
   the tuned configuration, and the default one when that fails);
4. on a GPU, a verified candidate is timed, guarded
   (``timing_guard.guarded_remote_time``), within the memory bound; without
   one, the cost model estimates it (``cost.costing``).

A candidate that fails for any reason (a mismatch, an exception, a crash, a
timeout, a change to the executor's shared functions) restarts the executor,
so nothing it did there reaches the next candidate.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import threading
from pathlib import Path
from typing import Callable

from lego_core.config import OptimizeConfig
from lego_core.cost import costing
from lego_core.events import Sink, Timing, TranscriptMessage, VerificationResult
from lego_core.judge import timing_guard, tuning
from lego_core.judge.boundary import executor_bytes, value_bytes
from lego_core.judge.inputs import leaf_edge_sets, leaf_input_sets
from lego_core.judge.process import CandidateRaised, Executor, ExecutorTampered, JudgeError, RemoteModule
from lego_core.judge.verify import VerifyReport, calls_back_into_reference, verify
from lego_core.phases import PhaseClock, phase_or_nothing
from lego_core.runtime import gpu_lock
from lego_core.tree.fusion_tree import Candidate, OrNode

# False: candidates are verified on the seeded sets only, without the NaN/inf edge sets (an ablation)
EDGE_SETS = True


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What judging one candidate gave.

    ``accepted``: verified (and, on a GPU, timed believably); ``reason``: why
    not ("" when accepted); ``time_ms``: its time in ms (None when refused)
    with ``time_kind`` ``"measured"`` or ``"estimated"``; ``max_abs_error``:
    the verifier's largest elementwise error (None when nothing was compared)."""

    accepted: bool
    reason: str = ""
    time_ms: float | None = None
    time_kind: str = ""
    max_abs_error: float | None = None


def timing_sets(input_sets) -> list:
    """The input sets a timer rotates through, all alive at once: every one
    of a list; as many as fit in memory of a store-backed ``InputSets``."""
    return input_sets.timing_sets() if hasattr(input_sets, "timing_sets") else list(input_sets)


def only_config_changed(tuned: str, original: str) -> bool:
    """Whether ``tuned`` is ``original`` with another ``CONFIG = ...`` line (what tuning may change)."""
    return tuning.CONFIG_LINE.sub("", tuned) == tuning.CONFIG_LINE.sub("", original)


class CandidateJudge:
    """Verifies and times candidates of one search's sub-problems.

    ``activations``: one dict per verification seed mapping graph value names
    to reference values, or a ``judge.boundary.BoundaryStore`` that computes
    them on demand within the memory bound; ``parameters``: placeholder names
    holding model parameters (perturbed in all but the first input set);
    ``dtype``: the run's ``torch.dtype``; ``device``: ``"cpu"`` or ``"cuda"``;
    ``work_dir``: where candidate files are written; ``emit``: a thread-safe
    event sink; ``meter``: a ``runtime.memory.MemoryMeter`` when the run's
    memory is measured; ``call_timeout_s``: the executor's per-call limit in
    seconds (None: ``judge.process.executor.CALL_TIMEOUT_S``); ``executor``:
    an executor to use instead of a fresh one; ``tune``: per-shape tuning on
    or off (None: only when compiled kernels are measured on a GPU);
    ``phases``: the run's ``phases.PhaseClock`` (verification, candidate
    timing and baseline timing seconds are added to it), or None;
    ``run_id``: the run's id, which names kernel modules as
    ``optimized_model.py`` will (None: the work folder's name).

    Every candidate whose code ran gets a fresh executor afterwards (issue
    27): one candidate cannot weaken the checks for the next.
    """

    def __init__(self, activations, parameters: set[str], config: OptimizeConfig, dtype, device: str, work_dir: Path, emit: Sink, *,
                 meter=None, call_timeout_s: float | None = None, executor: Executor | None = None, tune: bool | None = None,
                 phases: PhaseClock | None = None, run_id: str | None = None):
        self.activations, self.parameters, self.config = activations, parameters, config
        self.dtype, self.device, self.work_dir, self.emit = dtype, device, Path(work_dir), emit
        self.meter, self.call_timeout_s, self.executor = meter, call_timeout_s, executor
        self.lane = threading.Lock()
        self.phases = phases
        self.run_tag = run_id or self.work_dir.name  # optimized_model.py imports kernel <k> as lego_kernel_<run id>_<k>
        self.library_by_signature: dict[str, float] = {}  # signature -> measured library ms (library_times)
        self.library_batches = 0  # lock holds library_times took
        self.library_measured = 0  # distinct signatures it measured
        self.measure = device == "cuda" and config.timing == "auto"
        # per-shape tuning of kernel files that offer TUNE_CONFIGS: only when measuring compiled kernels
        self.tune = (self.measure and os.environ.get("TRITON_INTERPRET") != "1") if tune is None else tune

    # ------------------------------------------------------------ the one call

    def judge(self, node: OrNode, cand: Candidate, skip: Callable[[], str] | None = None) -> Verdict:
        """Verify and time ``cand`` (a Triton candidate of ``node``) in the lane.

        ``skip``: asked once the lane is held; a non-empty answer refuses the
        candidate unjudged with that reason (the search's wall-time budget ran
        out while it waited for the lane).

        Sets ``cand.verified``, ``cand.time_ms`` / ``cand.time_kind``,
        ``cand.rejected_reason`` and, when tuning chose another configuration,
        ``cand.source``; emits ``VerificationResult`` and, when accepted,
        ``Timing``.  Never raises for the candidate's failures: they are the
        verdict's ``reason``."""
        self._check(node, cand, skip)
        report = cand.verified
        return Verdict(report.passed, report.reason, cand.time_ms if report.passed else None, cand.time_kind if report.passed else "",
                       report.to_dict()["max_abs_error"])

    def _check(self, node: OrNode, cand: Candidate, skip: Callable[[], str] | None = None) -> None:
        """:meth:`judge`'s work, in the lane: the call-back check, import and
        verification in the executor (``_verify``), then a guarded GPU time
        or the cost model's estimate; restarts the executor after a candidate
        that ran and failed; emits ``VerificationResult`` and ``Timing``."""
        sub = node.sub
        module: RemoteModule | None = None
        ran = False  # whether candidate code ran in the executor
        with self.lane, self._gpu_shared(), self.tracking():
            late = skip() if skip is not None else ""
            if late:
                cand.verified = VerifyReport(False, math.inf, math.inf, late, list(self.config.verify_seeds))
                cand.rejected_reason = late
                self.emit(VerificationResult(node_id=node.id, candidate_id=cand.id, passed=False, max_abs_error=None, reason=late))
                return
            input_sets = leaf_input_sets(node, self.activations, self.parameters, self.config.verify_seeds)
            callback = calls_back_into_reference(cand.source, sub.ops, getattr(sub.group, "library_ops", ()))
            try:
                if callback:
                    cand.verified = VerifyReport(False, math.inf, math.inf, callback, list(self.config.verify_seeds))
                else:
                    ran = True
                    with phase_or_nothing(self.phases, "candidate_timing"):
                        default_source = self._tune(node, cand, input_sets)
                    with phase_or_nothing(self.phases, "verification"):
                        module = self._verify(sub, cand, input_sets)
                    if default_source is not None and not cand.verified.passed:
                        self.emit(TranscriptMessage(node_id=node.id, agent="tuner", role="system", content=f"the tuned configuration failed verification ({cand.verified.reason}); verifying the default configuration instead"))
                        cand.source = default_source
                        self.restart()
                        with phase_or_nothing(self.phases, "verification"):
                            module = self._verify(sub, cand, input_sets)
                if cand.verified.passed and self.measure:
                    with phase_or_nothing(self.phases, "candidate_timing"):
                        self._time(node, cand, module, input_sets)
                elif cand.verified.passed:
                    cand.time_ms, cand.time_kind = costing.fused_estimate_ms(sub, self.dtype, self.config.target_gpu), "estimated"
            finally:
                if ran:  # a fresh executor for every candidate: nothing one left there reaches the next
                    self.restart()
            report = cand.verified
            if not report.passed:
                cand.rejected_reason = report.reason
            self.emit(VerificationResult(node_id=node.id, candidate_id=cand.id, passed=report.passed, max_abs_error=report.to_dict()["max_abs_error"], reason=report.reason))
            if not report.passed:
                return
        library = next((c for c in node.candidates if c.implementation == "library"), None)
        self.emit(Timing(node_id=node.id, candidate_id=cand.id, ms=cand.time_ms, measured=cand.time_kind == "measured", baseline_ms=library.time_ms if library else None))

    def _time(self, node: OrNode, cand: Candidate, module: RemoteModule, input_sets) -> None:
        """Time a verified candidate on the GPU (sets its time, or fails it
        when the time is not believed).  In the same exclusive hold of the
        GPU and on the same inputs, a leaf's library ops are timed too when
        their signature has no measured time yet: the choice between the two
        depends on it (``search.pricing``), and one hold serves both."""
        sub = node.sub
        try:
            with self._gpu_alone():  # its executor times it; no other process's kernels beside it
                guarded = self._guarded_time(sub, module, input_sets)
                if guarded is not None and guarded.believed and node.is_leaf and sub.signature not in self.library_by_signature:
                    self._time_library(node, input_sets)
            if guarded is None:  # too large to time beside what the search holds
                cand.time_ms, cand.time_kind = costing.fused_estimate_ms(sub, self.dtype, self.config.target_gpu), "estimated"
            elif guarded.believed:
                cand.time_ms, cand.time_kind = guarded.ms, "measured"
            else:
                cand.verified = dataclasses.replace(cand.verified, passed=False, reason=f"timing the candidate: {guarded.reason}")
        except (JudgeError, CandidateRaised) as exc:
            cand.verified = dataclasses.replace(cand.verified, passed=False, reason=f"timing the candidate failed: {type(exc).__name__}: {exc}")

    def _verify(self, sub, cand: Candidate, input_sets) -> RemoteModule | None:
        """Import the candidate's file in the executor and verify it here; sets
        ``cand.verified``; the module (None if it does not import)."""
        seeds = list(self.config.verify_seeds)
        try:
            module = self._load(cand)
        except ExecutorTampered as exc:
            cand.verified = VerifyReport(False, math.inf, math.inf, f"importing the kernel file: {exc}", seeds)
            return None
        except (CandidateRaised, JudgeError) as exc:  # a kernel file that does not import fails verification
            cand.verified = VerifyReport(False, math.inf, math.inf, f"the kernel file does not import: {type(exc).__name__}: {exc}", seeds)
            return None
        edge = leaf_edge_sets(sub, input_sets, self.parameters, seeds[0]) if EDGE_SETS else []
        cand.verified = verify(module.candidate, sub.run_reference, input_sets, self.dtype, seeds, edge_sets=edge,
                               precise_limit_bytes=self.precise_limit())
        return module

    def _guarded_time(self, sub, module: RemoteModule, input_sets) -> "timing_guard.GuardedTiming | None":
        """The verified candidate's time, guarded (``timing_guard.guarded_remote_time``):
        timed in its executor on fresh inputs into preallocated outputs, then
        called there twice per set under the call trace on the same tensors,
        the outputs compared here, and a time below the roofline floor not
        believed.

        Within the memory bound: each timed set costs a fresh copy of its
        inputs, the expected outputs, the output buffers and a poisoned copy
        (here) and the candidate's own allocations (``executor_bytes``,
        there).  As many sets as fit (at least one); when not even one fresh
        copy fits, the verification set itself is timed (the calls after
        timing still catch a memo); when not even the outputs fit, None: the
        caller keeps the cost model's estimate (a region too large to time
        beside what the search holds)."""
        sets = timing_sets(input_sets)
        room = self.precise_limit()
        fresh = True
        if room is not None:
            outputs = sum(value_bytes(n) for n in sub.outputs)
            inputs = sum(value_bytes(n) for n in sub.inputs)
            room -= executor_bytes(sub)
            per_set = inputs + 3 * outputs
            if room >= per_set:
                sets = sets[: max(1, min(len(sets), room // max(1, per_set)))]
            elif room >= 3 * outputs:
                sets, fresh = sets[:1], False
            else:
                return None
        return timing_guard.guarded_remote_time(module, sets, sub.run_reference, dtype=self.dtype, target=self.config.target_gpu, fresh=fresh,
                                                precise_limit_bytes=self.precise_limit())

    def _tune(self, node: OrNode, cand: Candidate, input_sets) -> str | None:
        """Per-shape tuning (``judge.tuning``) of a kernel file that offers
        ``TUNE_CONFIGS``, only when ``tune`` is on: the fastest configuration
        is baked into ``cand.source`` and the times go to the transcript.
        Returns the source as proposed when it changed it, else None.  Any
        failure keeps the proposed configuration (noted in the transcript);
        it never fails the run.

        The tuner's logic and its output comparison run here; the kernel is
        imported, launched and timed in the executor (``RemoteModule``)."""
        if not self.tune or not tuning.tunable(cand.source):
            return None
        original = cand.source
        loaded: list[RemoteModule] = []

        def load(source: str) -> RemoteModule:
            loaded.append(self._load(cand, source, "_tuning"))
            return loaded[-1]

        def timer(fn, sets) -> float:
            with self._gpu_alone():
                return loaded[-1].time(sets, warmup_ms=tuning.WARMUP_MS, rep=tuning.REP)

        try:
            result = tuning.tune_source(original, [input_sets[0]], load=load, timer=timer, device_name=self.gpu_name() or self.device)
            if not only_config_changed(result.source, original):
                raise ValueError("the tuned source differs from the proposed one beyond its CONFIG line")
        except Exception as exc:  # noqa: BLE001 - tuning is an optimisation: keep the default configuration
            self.restart()  # whatever the tuning runs left in the executor goes
            self.emit(TranscriptMessage(node_id=node.id, agent="tuner", role="system", content=f"tuning failed ({type(exc).__name__}: {str(exc)[:300]}); keeping the default configuration"))
            return None
        finally:
            for module in loaded:
                module.forget()
        self.emit(TranscriptMessage(node_id=node.id, agent="tuner", role="system", content=result.summary()))
        cand.source = result.source
        return original if cand.source != original else None

    # ------------------------------------------------------------ library candidates

    def _time_library(self, leaf: OrNode, input_sets=None) -> None:
        """Time ``leaf``'s library (ATen) ops (``costing.measure_ms``) on
        ``input_sets`` (default: its verification inputs), the lane and the GPU
        already held; remember the ms by signature.  A library region that
        cannot be timed keeps the cost model's price (noted in the
        transcript); it never fails the run."""
        with phase_or_nothing(self.phases, "baseline_timing"):
            try:
                sets = timing_sets(input_sets if input_sets is not None else leaf_input_sets(leaf, self.activations, self.parameters, self.config.verify_seeds))
                self.library_by_signature[leaf.sub.signature] = costing.measure_ms(leaf.sub.run_reference, sets)
                self.library_measured += 1
            except Exception as exc:  # noqa: BLE001 - a price, not a verdict: the estimate stays
                self.emit(TranscriptMessage(node_id=leaf.id, agent="judge", role="system",
                                            content=f"timing the library ops failed ({type(exc).__name__}: {str(exc)[:200]}); the cost model's estimate stays"))

    def library_times(self, leaves: list[OrNode]) -> dict[str, float]:
        """Measured ms of the library (ATen) ops of each of ``leaves``, keyed by
        signature (equal signatures time alike: each is measured once per
        search and remembered in ``library_by_signature``; one that cannot
        be timed is left out and keeps its estimate).

        A batch: one hold of the lane and one exclusive hold of the GPU
        (``runtime.gpu_lock``) for all of them, so other runs' verifications
        wait once, not once per leaf, and no other process's kernels run
        beside the timings.  Each leaf is timed as ``costing.measure_ms``
        times it (CUDA-graph replay, L2 flushed, inputs rotated, median) on
        its verification inputs.  Adds the seconds to the ``baseline_timing``
        phase.  Only on a GPU run (``measure``); RuntimeError otherwise."""
        if not self.measure:
            raise RuntimeError("library times are only measured on a GPU run (timing='auto', device='cuda')")
        with self.lane:
            todo: dict[str, OrNode] = {}  # one leaf per signature not measured yet
            for leaf in leaves:
                if leaf.sub.signature not in self.library_by_signature:
                    todo.setdefault(leaf.sub.signature, leaf)
            if todo:
                with self._gpu_alone(), self.tracking():
                    for leaf in todo.values():
                        self._time_library(leaf)
                self.library_batches += 1
            return {leaf.sub.signature: self.library_by_signature[leaf.sub.signature] for leaf in leaves if leaf.sub.signature in self.library_by_signature}

    # ------------------------------------------------------------ memory

    def over_memory_limit(self, sub) -> str:
        """Why no candidate for ``sub`` is asked for: its check would not fit
        under the memory bound (``BoundaryStore.over_limit``); "" otherwise
        (and when the activations are a plain list, as in tests)."""
        over_limit = getattr(self.activations, "over_limit", None)
        return over_limit(sub) if over_limit is not None else ""

    def precise_limit(self) -> int | None:
        """Bytes a float64 reference run may take (``verify``'s
        ``precise_limit_bytes``): what the boundary store leaves free under
        the memory bound; None without a bound."""
        room = getattr(self.activations, "room", None)
        if room is None:
            return None
        free = room()
        return None if free == float("inf") else max(0, int(free))

    def tracking(self):
        """The memory meter's per-thread context (counts CPU allocations of checks)."""
        return self.meter.tracking() if self.meter is not None else contextlib.nullcontext()

    # ------------------------------------------------------------ the executor and the GPU

    def gpu_name(self) -> str | None:
        """The CUDA device's name on a GPU run (measured times belong to one GPU model); None on the CPU."""
        if self.device == "cuda":
            import torch

            return torch.cuda.get_device_name()
        return None

    def start(self) -> None:
        """Start the candidate executor in the background (it imports torch while the search begins)."""
        self._executor().start()

    def restart(self) -> None:
        """A fresh executor: nothing a candidate did there reaches the next one.
        The next process is started at once (``Executor.prestart``: on a GPU
        it creates its CUDA context meanwhile)."""
        if self.executor is not None:
            self.executor.restart()
            self.executor.prestart()

    def close(self) -> None:
        """Stop the candidate executor (the search does at its end)."""
        if self.executor is not None:
            self.executor.close()
            self.executor = None

    def _executor(self) -> Executor:
        """The candidate executor (created on first need)."""
        if self.executor is None:
            self.executor = Executor(call_timeout_s=self.call_timeout_s, meter=self.meter, warm_cuda=self.device == "cuda")
        return self.executor

    def _load(self, cand: Candidate, source: str | None = None, suffix: str = "") -> RemoteModule:
        """Write ``source`` (default: the candidate's) to the work folder and
        import it in the executor, under the module name and file name
        ``optimized_model.py`` gives it at a user's (``lego_kernel_<run>_<kernel>``,
        ``kernels/<kernel>.py``; ``judge.process.user_view``).  Bytecode is never written (the executor
        sets ``sys.dont_write_bytecode``), so a file rewritten within the same
        second at the same size (a tuned CONFIG line) cannot load old code."""
        folder = self.work_dir / f"kernels{suffix}"  # as optimized_model.py finds it at a user's: kernels/<name>.py
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{cand.kernel_name}.py"
        path.write_text(cand.source if source is None else source)
        return self._executor().load(path, f"lego_kernel_{self.run_tag}_{cand.kernel_name}")

    def _gpu_shared(self):
        """The GPU held beside other processes' verifications (``lego_core.runtime.gpu_lock``); nothing without a GPU."""
        return gpu_lock.shared() if self.device == "cuda" else contextlib.nullcontext()

    def _gpu_alone(self):
        """The GPU held alone while the executor times for this process (``lego_core.runtime.gpu_lock``)."""
        return gpu_lock.exclusive() if self.device == "cuda" else contextlib.nullcontext()
