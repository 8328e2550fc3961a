"""The final user check: the composed model run as a user runs it, before the folder ships (issue 27).

What it defends against: kernels that behave only while judged.  An audit
found kernels that passed verification and the end-to-end check, shipped in
``optimized_model.py``, and misbehaved in a plain user process: one computed
honestly only when its input ``is_shared()`` (the executor and the
end-to-end process hand candidates shared-memory tensors; a user's are not),
one counted its calls and went wrong after 40 (verification makes about 10),
one returned the same module-level buffer every call (so a result the caller
kept changed with the next call), one returned a lazy tensor subclass that
computed on first touch (the judge's reply encoding ran the deferred
kernel; users got NaN in ``out=`` buffers), one skipped work unless the data
looked standard-normal.

How: after the end-to-end check passed (``pipeline._run``'s ``judge``, before
the staging folder moves to the user: ``lego_core.runtime.output``),
:meth:`UserCheck.check` runs ``user_runner.py`` (a standalone script of this
folder, executed by path) in a plain ``python -I -B`` started from
``sys.executable``: not forked from the judge's fork server, importing only
torch and the output folder (``lego_core`` is refused there, and the reply
lists any ``lego_core`` module loaded at its end: none may be), inside the
same jail as the optimizer (a child of the optimizer's process shares its
bubblewrap namespaces, resource limits and cut network: ``runtime.sandbox``
/ ``runtime.jail``), with the jail's environment less LEGO's own variables
(:func:`runner_environment`).  Requests and replies are files in a private
temporary folder (``torch.save`` / ``torch.load(weights_only=True)``), never
shared memory.

The runner calls ``ModelNew`` (built from ``get_init_inputs()`` with the
original model's weights, ``.eval()``) on new inputs of several
distributions (:data:`SET_NAMES`: "new seed", the problem's own
``get_inputs()`` with a seed no check used, then further draws scaled by 1e3
(1e2 in float16) and by 1e-3, shifted by +3, and with constant rows; float
inputs only: integer and boolean inputs keep their generator), on
fresh private copies every call: :data:`FIRST_SET_CALLS` calls on the first
set, then :data:`OTHER_SET_CALLS` on each other set.  After every call it
checks that the output is exactly ``torch.Tensor``s, shares no memory with
an earlier call's output, and that no earlier output changed since
(``user_runner`` says how).  Back come, per set, the first call's outputs and
any later call's that differ from them; this process judges each against
eager and the float64 truth on the same inputs with the end-to-end judge
(``e2e.judge_composed``: ``e2e_judge.judge_outputs``'s rule).  A failure
names the distribution and the call.  A stateful forward (``problem.state_targets``)
keeps every per-call check: only an output that is one of the model's own
tensors (its state returned as eager returns it, a parameter) is exempt from
the memory and changed-output checks; each set starts from a freshly built
model, and its first call is judged with the state after it.

What it does not cover: NaN and inf inputs (there is no general way to know
where the reference defines them; ``verify``'s edge-case sets cover them per
sub-problem), a counter longer than the calls made here, a kernel that
tells this process from a user's by other means (its parent, its
environment, the time), and a stateful forward's later calls (their outputs
depend on the state: only each set's first call, from the initial state, is
judged).  A plan with no Triton kernel (every region in the library: only
LEGO's own files run) makes :data:`LIBRARY_PLAN_CALLS` call per set.

Cost: a new interpreter (about 1.5 s to import torch and the folder) and
``FIRST_SET_CALLS + 4`` forwards; through Triton's interpreter on a CPU at
the tiny reference sizes 2.6 s of wall time for mlp_residual (2 kernels)
and resnet_stage (4), 22 s for gpt_stack (12 kernels, 0.45 s a forward).
The process is stopped after :data:`TIMEOUT_S` seconds (a failed check).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from lego_core.errors import OptimizeError
from lego_core.judge.end_to_end import e2e
from lego_core.judge.end_to_end.e2e_judge import float64_copy
from lego_core.judge.end_to_end.shipped import fallback_problem
from lego_core.judge.process.fresh import folder_digest
from lego_core.runtime import jail

RUNNER = Path(__file__).with_name("user_runner.py")
# calls on the first input set: one more than the 40 after which the audited
# kernel went wrong (verification makes about 10 calls of a candidate, the
# end-to-end check one); the time this costs is FIRST_SET_CALLS forwards
# (Triton's interpreter on a CPU: 0.07 s a call for a 2-kernel MLP, 0.9 s for
# a 12-kernel GPT block stack at the tiny sizes)
FIRST_SET_CALLS = 41
OTHER_SET_CALLS = 1  # calls on each later set: they come after the first set's, so past a 40-call counter too
LIBRARY_PLAN_CALLS = 1  # per set when the folder has no kernel file: only LEGO's own files run
# seconds the runner may take for all its calls (import, build and forwards);
# past it the check fails (the plan falls back) and the process is killed
TIMEOUT_S = float(os.environ.get("LEGO_USER_CHECK_TIMEOUT_S", "900"))
CHECK_ALL_BYTES = 64 << 20  # kept outputs up to this size: every earlier call's are checked after each call (else the last one's)
KEPT_BYTES_MAX = 2 << 30  # outputs and their clones kept by the runner; the oldest are checked and let go beyond it
REPLY_SLACK_BYTES = 64 << 20  # a reply may be this much larger than the outputs it carries
OUTPUT_TAIL_BYTES = 8 << 10  # of the runner's stdout and stderr, quoted when it gives no reply
MESSAGE_CHARS = 2000  # of a message the runner sends (its process runs the plan's code: bounded)
SHIFT = 3.0  # the shifted set: inputs + SHIFT
SMALL_SCALE = 1e-3
CONSTANTS = (0.0, 0.5, -1.0, 2.0, -0.5, 1.0, -2.0)  # the constant rows' values: powers of two, so sums and means stay exact


def large_scale(dtype: torch.dtype) -> float:
    """The scaled-up set's factor: 1e3, but 1e2 in float16 (whose largest
    value, 65504, a matmul of 1e3-scaled inputs passes: eager itself overflows)."""
    return 1e2 if dtype == torch.float16 else 1e3


def set_names(dtype: torch.dtype) -> list[str]:
    """The input sets' names, in schedule order."""
    big = "1e2" if large_scale(dtype) == 1e2 else "1e3"
    return ["new seed", f"scaled x{big}", "scaled x1e-3", f"shifted mean (+{SHIFT:g})", "constant rows"]


SET_NAMES = set_names(torch.float32)


def constant_rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` with every row (along the last dimension) one constant of
    :data:`CONSTANTS` (cycled row by row); same shape, dtype, device and
    strides.  A 0-d tensor is returned as it is."""
    if x.dim() == 0 or x.numel() == 0:
        return x
    rows = x.numel() // x.shape[-1]
    values = torch.tensor(CONSTANTS, dtype=torch.float64)[torch.arange(rows) % len(CONSTANTS)]
    filled = values[:, None].expand(rows, x.shape[-1]).reshape(x.shape)
    return torch.empty_like(x).copy_(filled.to(x.dtype))


def transforms(dtype: torch.dtype) -> list[Callable[[torch.Tensor], torch.Tensor]]:
    """What each set does to a float input drawn by ``get_inputs()`` (:func:`set_names`' order)."""
    big = large_scale(dtype)
    return [lambda x: x, lambda x: x * big, lambda x: x * SMALL_SCALE, lambda x: x + SHIFT, constant_rows]


def make_set(inputs: list, transform: Callable) -> list:
    """``inputs`` with ``transform`` applied to every floating tensor (in lists, tuples, dicts too)."""
    def each(x):
        return transform(x) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    return torch.utils._pytree.tree_map(each, inputs)


def set_seeds(seed: int, avoid, count: int) -> list[int]:
    """``count`` seeds after ``seed``, none of ``avoid`` (the verification seeds) nor ``seed`` itself."""
    taken, seeds, k = {int(seed), *(int(s) for s in avoid)}, [], int(seed)
    while len(seeds) < count:
        k += 1
        if k not in taken:
            seeds.append(k)
    return seeds


def schedule(active: list[int], triton: bool) -> list[int]:
    """The set index of each call: :data:`FIRST_SET_CALLS` on the first of
    ``active`` (the sets eager ran on), then :data:`OTHER_SET_CALLS` on each
    other; :data:`LIBRARY_PLAN_CALLS` each without a Triton kernel."""
    if not active:
        return []
    first, other = (FIRST_SET_CALLS, OTHER_SET_CALLS) if triton else (LIBRARY_PLAN_CALLS, LIBRARY_PLAN_CALLS)
    return [active[0]] * first + [s for s in active[1:] for _ in range(other)]


def runner_environment() -> dict[str, str]:
    """The runner's environment: what the jail passes its children
    (``jail.ENV_NAMES``, the ``jail.ENV_PREFIXES`` other than LEGO's own,
    PATH, HOME, TMPDIR, USER, LOGNAME), never a variable whose name looks like
    a secret (``jail.ENV_SECRET_WORDS``), and none of LEGO's: a user's
    process has none of them, so a kernel cannot tell the judge by them."""
    names = {*jail.ENV_NAMES, "PATH", "HOME", "TMPDIR", "USER", "LOGNAME"}
    prefixes = tuple(p for p in jail.ENV_PREFIXES if p != "LEGO_")
    env = {}
    for name, value in os.environ.items():
        if (name in names or name.startswith(prefixes)) and not any(word in name.upper() for word in jail.ENV_SECRET_WORDS):
            env[name] = value
    env.setdefault("LANG", "C.UTF-8")
    return env


class InputSet:
    """One distribution: its ``name``, ``seed``, ``inputs`` and the
    ``reference`` (``e2e.Reference``: eager and the fp64 truth on them), or
    ``skipped`` (why: eager itself raised on these inputs)."""

    def __init__(self, name: str, seed: int, inputs: list, reference=None, skipped: str | None = None):
        self.name, self.seed, self.inputs, self.reference, self.skipped = name, seed, inputs, reference, skipped


class UserCheck:
    """The final user check of one run: the input sets and their references
    are made once (:meth:`input_sets`), then every composed folder the run
    judges (the fallback's bisection composes several) is checked with
    :meth:`check`.  ``seed``: the run's end-to-end seed (the sets take the
    seeds after it, none of ``avoid``: the verification seeds);
    ``fp64_device``: where the float64 truth runs (``e2e.reference_run``);
    ``import_paths``: folders a user would have on ``PYTHONPATH``
    (``OptimizeConfig.import_paths``), put after the output folder;
    ``meter``: a ``MemoryMeter`` told the runner's peak CUDA memory."""

    def __init__(self, problem, seed: int, fp64_device: str | None = None, avoid=(), import_paths=(), meter=None):
        self.problem = problem
        self.meter = meter
        self.seed = int(seed)
        self.fp64_device = fp64_device
        self.avoid = tuple(avoid or ())
        self.import_paths = [str(p) for p in import_paths or ()]
        self._sets: list[InputSet] | None = None
        self.references_s = 0.0

    def input_sets(self) -> list[InputSet]:
        """The sets, with eager and the fp64 truth computed here once (seconds in ``references_s``)."""
        if self._sets is not None:
            return self._sets
        begun = time.monotonic()
        dtype = self.problem.spec.torch_dtype
        seeds = set_seeds(self.seed, self.avoid, len(set_names(dtype)))
        try:
            model64 = float64_copy(self.problem.model, self.fp64_device or self.problem.spec.device)
        except Exception:  # noqa: BLE001 - reference_run reports the fp64 failure per set
            model64 = None
        sets = []
        for name, seed, transform in zip(set_names(dtype), seeds, transforms(dtype)):
            inputs = make_set(self.problem.make_inputs(seed), transform)
            try:
                ref = e2e.reference_run(self.problem, seed, self.fp64_device, inputs=inputs, model64=model64)
            except Exception as exc:  # noqa: BLE001 - inputs eager itself refuses are no test of the plan
                sets.append(InputSet(name, seed, inputs, skipped=f"eager raised {type(exc).__name__}: {str(exc).strip()[:200]}"))
                continue
            sets.append(InputSet(name, seed, inputs, ref))
        del model64
        self._sets = sets
        self.references_s = time.monotonic() - begun
        return sets

    def check(self, out_dir: Path) -> dict:
        """Run the composed model of ``out_dir`` as a user does and judge it
        (module docstring).  Returns the ``user_check`` entry of report.json:
        ``passed``, ``reason``, ``sets`` (per set: ``name``, ``seed``,
        ``calls``, ``judged_calls``, ``passed``, ``max_abs_error``,
        ``norm_rel_error``, or ``skipped``), ``calls`` (made / scheduled),
        ``checks`` (the runner's per-call checks), ``runner`` (how it ran and
        its seconds), ``lego_modules``, ``wall_s`` (seconds of this check,
        the references' ``references_s`` apart).  Never raises for what the
        composed model does (that is a failed check); raises OptimizeError
        when the runner's process changed files of the output folder, or
        the private folder cannot be made."""
        begun = time.monotonic()
        out_dir = Path(out_dir)
        sets = self.input_sets()
        active = [k for k, s in enumerate(sets) if s.skipped is None]
        triton = any((out_dir / "kernels").glob("*.py"))
        calls = schedule(active, triton)
        entry = {"passed": True, "reason": "", "calls": {"scheduled": len(calls), "made": 0},
                 "schedule": self._describe(sets, active, triton),
                 "sets": [{"name": s.name, "seed": s.seed, "calls": calls.count(k)} | ({"skipped": s.skipped} if s.skipped else {})
                          for k, s in enumerate(sets)]}
        if not calls:
            entry.update(reason="eager raised on every input set: nothing to compare", wall_s=round(time.monotonic() - begun, 3),
                         references_s=round(self.references_s, 3))
            return entry
        reply, failure = self._run(out_dir, sets, calls)
        if reply is not None:
            peak = reply.get("memory_peak")
            if self.meter is not None and isinstance(peak, int) and peak > 0:
                self.meter.note_external(peak)
            entry["calls"]["made"] = reply.get("calls")
            entry["checks"] = reply.get("checks")
            entry["lego_modules"] = reply.get("lego_modules")
            entry["runner"] = {"command": f"{Path(sys.executable).name} -I -B {RUNNER.name} FOLDER", "pid": reply.get("pid"),
                               **{k: _seconds(reply.get(k)) for k in ("import_s", "build_s", "forward_s", "wall_s")}}
        if failure is None:
            failure = self._judge(reply, sets, entry, calls)
        entry.update(wall_s=round(time.monotonic() - begun, 3), references_s=round(self.references_s, 3))
        if failure:
            entry.update(passed=False, reason=failure)
        else:
            entry["reason"] = (f"{entry['calls']['made']} calls in a fresh python importing only torch and the output folder: "
                               "plain torch.Tensor outputs, none reusing an earlier call's memory or changing after it, "
                               f"and every judged output within the end-to-end rule on {len(active)} input sets")
        return entry

    def _describe(self, sets: list, active: list, triton: bool) -> str:
        if not active:
            return "none"
        if not triton:
            return f"{LIBRARY_PLAN_CALLS} call on each set (no Triton kernel in the folder)"
        return f"{FIRST_SET_CALLS} calls on {sets[active[0]].name}, then {OTHER_SET_CALLS} on each other set"

    def _run(self, out_dir: Path, sets: list, calls: list) -> tuple[dict | None, str | None]:
        """Start the runner on ``calls``; (its reply, None) or (reply or None, why it failed)."""
        problem = self.problem
        request = {
            "out_dir": str(out_dir.resolve()),
            "import_paths": self.import_paths,
            "device": problem.spec.device,
            "dtype": str(problem.spec.torch_dtype).removeprefix("torch."),
            "state_dict": {k: v.detach().cpu().clone() for k, v in problem.model.state_dict().items()},
            "sets": [{"name": s.name, "inputs": _on_cpu(s.inputs)} for s in sets],
            "schedule": calls,
            "state_targets": list(getattr(problem, "state_targets", None) or ()),
            "check_all_bytes": CHECK_ALL_BYTES,
            "kept_bytes_max": KEPT_BYTES_MAX,
        }
        before = folder_digest(out_dir)
        caches = set(out_dir.rglob("__pycache__"))
        folder = Path(tempfile.mkdtemp())  # private (0700), under $TMPDIR (the jail's scratch), a neutral name
        try:
            torch.save(request, folder / "request.pt")
            rc, timed_out, tail = _start(folder, TIMEOUT_S)
            reply_path = folder / "reply.pt"
            if timed_out:
                return None, (f"the composed model did not finish its {len(calls)} calls as a user runs it within "
                              f"{TIMEOUT_S:g} s (LEGO_USER_CHECK_TIMEOUT_S); its process was stopped")
            if not reply_path.is_file():
                return None, f"the composed model's user process ended without a reply (exit code {rc}): {tail}"
            limit = REPLY_SLACK_BYTES + (len(calls) + len(sets)) * max((_nbytes(s.reference.eager) for s in sets if s.reference), default=0)
            if reply_path.stat().st_size > limit:
                return None, f"the composed model's user process replied with {reply_path.stat().st_size} bytes, more than its outputs fill"
            try:
                reply = torch.load(reply_path, weights_only=True, map_location="cpu")
            except Exception as exc:  # noqa: BLE001 - an unreadable reply is a failed check, named
                return None, f"the composed model's user process answered outside the protocol: {type(exc).__name__}: {exc}"
            if not _well_formed(reply, len(sets)):
                return None, "the composed model's user process answered outside the protocol"
            return reply, None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            for path in out_dir.rglob("__pycache__"):
                if path not in caches:
                    shutil.rmtree(path, ignore_errors=True)
            after = folder_digest(out_dir)
            if after != before:
                changed = sorted(set(before) ^ set(after) | {k for k in before.keys() & after.keys() if before[k] != after[k]})
                raise OptimizeError(f"the composed model's user process changed files of the output folder: {', '.join(changed[:10])}")

    def _judge(self, reply: dict, sets: list, entry: dict, calls: list) -> str | None:
        """The reply's verdicts and outputs judged; the first failure in words, or None.  Fills ``entry["sets"]``."""
        trouble = reply.get("problem")  # the first per-call check that failed in the runner, or what the model raised
        if trouble:
            call, message = trouble.get("call"), str(trouble.get("message"))[:MESSAGE_CHARS]
            if trouble.get("check") == "raised":
                if trouble.get("stage") == "import":
                    return f"importing optimized_model.py as a user does raised {message}"
                if trouble.get("stage") == "build":
                    return f"building ModelNew(*get_init_inputs()) with the model's weights as a user does raised {message}"
                name = f" ({sets[calls[call - 1]].name} inputs)" if isinstance(call, int) and 0 < call <= len(calls) else ""
                return f"the composed model raised on call {call}{name} as a user runs it: {message}"
            return message
        if reply.get("lego_modules"):
            return f"the output folder imported LEGO in a user's process: {', '.join(reply['lego_modules'][:5])}"
        forward = reply.get("forward") or {}
        fell_back = fallback_problem(forward)
        if fell_back:
            return f"on call {forward.get('call')} as a user runs it: {fell_back}"
        for k, s in enumerate(sets):
            summary = entry["sets"][k]
            if s.skipped:
                continue
            flat, spec = torch.utils._pytree.tree_flatten(s.reference.eager)
            outputs = reply["sets"][k]["outputs"]
            if not outputs:
                return f"no output came back for the {s.name} inputs"
            summary["judged_calls"] = [o["call"] for o in outputs]
            for out in outputs:
                where = f"on call {out['call']} ({s.name} inputs)"
                if len(out["leaves"]) != len(flat):
                    summary["passed"] = False
                    return f"the composed model's output {where} has {len(out['leaves'])} values, eager's {len(flat)}"
                verdict = e2e.judge_composed(torch.utils._pytree.tree_unflatten(out["leaves"], spec), s.reference, self.problem)
                if out is outputs[0]:
                    summary.update(max_abs_error=verdict.get("max_abs_error"), norm_rel_error=verdict.get("norm_rel_error"))
                if not verdict["passed"]:
                    summary.update(passed=False, reason=verdict["reason"])
                    differs = "" if out is outputs[0] else f" (it differs from call {outputs[0]['call']} on the same inputs)"
                    return f"the composed model's output {where}{differs} does not match eager: {verdict['reason']}"
            summary["passed"] = True
        return None


def with_user_check(check: dict, out_dir: Path, user: UserCheck | None) -> dict:
    """The end-to-end ``check`` of ``out_dir`` with the final user check's
    verdict: when ``check`` passed, ``user.check(out_dir)`` runs and its
    entry is ``check["user_check"]``; when that fails, so does the check
    (``passed`` False, ``reason`` "the final user check failed: ..."), and
    the pipeline's fallback treats it as it treats a failed end-to-end check
    (``fallback.deliver``: the kernels at fault are dropped, else the
    library plan ships).  A failed ``check`` is returned as it is (the user
    check does not run); ``user`` None: no user check."""
    if user is None or not check.get("passed"):
        return check
    entry = user.check(out_dir)
    check = dict(check, user_check=entry)
    if not entry["passed"]:
        check.update(passed=False, reason=f"the final user check failed: {entry['reason']}")
    return check


def _start(folder: Path, timeout_s: float) -> tuple[int | None, bool, str]:
    """Run the runner on ``folder``; (exit code, timed out, the tail of its output)."""
    log_path = folder / "output.log"
    command = [sys.executable, "-I", "-B", str(RUNNER), str(folder)]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=folder, env=runner_environment(), stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, close_fds=True, start_new_session=True)
        timed_out = False
        try:
            rc = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out, rc = True, None
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # its session (start_new_session): anything it started goes too
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()
    with open(log_path, "rb") as log:
        log.seek(max(0, log_path.stat().st_size - OUTPUT_TAIL_BYTES))
        tail = log.read().decode(errors="replace").strip()
    return rc, timed_out, tail[-OUTPUT_TAIL_BYTES:] or "no output"


def _well_formed(reply, n_sets: int) -> bool:
    if not isinstance(reply, dict) or not isinstance(reply.get("sets"), list) or len(reply["sets"]) != n_sets:
        return False
    for s in reply["sets"]:
        if not isinstance(s, dict) or not isinstance(s.get("outputs"), list):
            return False
        if not all(isinstance(o, dict) and isinstance(o.get("call"), int) and isinstance(o.get("leaves"), list) for o in s["outputs"]):
            return False
    return reply.get("problem") is None or isinstance(reply["problem"], dict)


def _on_cpu(value):
    return torch.utils._pytree.tree_map(lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, value)


def _nbytes(value) -> int:
    return sum(x.numel() * x.element_size() for x in torch.utils._pytree.tree_leaves(value) if isinstance(x, torch.Tensor))


def _seconds(value):
    return round(value, 3) if isinstance(value, (int, float)) else None
