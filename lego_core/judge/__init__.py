"""Stage 4, the judge: does a candidate compute what the reference computes, honestly?

Enters: a sub-problem (``tree.subproblem.SubProblem``), its reference
(ATen) implementation and a candidate kernel file; later a whole composed
output folder.  Leaves: a verdict (accepted, or the reason it was refused)
with the candidate's time in ms, and for a whole model the end-to-end check
(``end_to_end``) and the launch plan chosen by measurement.

Files: ``candidate`` (``CandidateJudge.judge(node, candidate) -> Verdict``,
the search's one call: verification, guarded timing, per-shape tuning,
the memory bound, the executor's restarts), ``tuning`` (a kernel file's
launch configuration per shape), ``verify`` (numerical comparison over seeded and edge-case input
sets), ``verify_policy`` / ``verify_trace`` (what a candidate may run while
judged), ``static_check`` (what its file must not do: PyTorch's compute,
the roads to the interpreter's insides) / ``host_allowlist`` (what every
kernel file may hold, node type by node type, and no state kept between
calls; a narrower profile for the kernel cache),
``timing_guard`` (a time that can be believed), ``inputs`` / ``boundary`` /
``edge_inputs`` (the values a sub-problem is checked on), ``process/`` (the
executor processes candidate code runs in) and ``end_to_end/`` (the composed
model against eager).

The judge stands apart: candidate code runs in executor processes, never here.

Which process runs what (issue 10, section 1):

* **the optimizer process** (the sandboxed child of ``lego_core.runtime.sandbox``)
  owns the user's model, computes the boundary values and every reference
  output, runs ``verify.verify``'s comparisons, times library (ATen)
  candidates, compares the composed model with eager and writes the output.
  It never imports a candidate kernel file nor ``optimized_model.py``.
* **the candidate executor** (:class:`Executor`, one per search run, started
  on first need by forking multiprocessing's fork server: a fresh
  interpreter that imported only torch, triton and lego, never CUDA) imports candidate kernel files and runs ``launch`` on
  inputs and poisoned ``out`` buffers the judge allocated and shared with it
  (CPU shared memory; CUDA IPC on a GPU), times candidates
  (``costing.measure_ms``) and runs the launches of per-shape tuning; the
  tuner's choice and its output comparison stay in the optimizer.
* **a fresh process per use** (``judge.process.fresh``, asked by ``judge.end_to_end.composed``) runs the composed
  ``ModelNew``: the end-to-end check's forward, the launch-plan measurements
  (``launch.measure_launch``) and the final timings (``end_to_end.composed.time_models``).

Failures: an exception a candidate raises comes back as one the verifier
reports as "candidate raised <Type>: ...".  An executor that dies
(``os._exit``, a signal, a crash in native code), runs past the per-call
limit (``executor.CALL_TIMEOUT_S``, ``$LEGO_JUDGE_CALL_TIMEOUT_S``) or
answers outside the protocol fails that candidate with the reason, and a
fresh executor is started; the optimizer goes on.

Judged as a user runs it (issue 27; ``process.user_view``).  Candidate code
sees private (not shared-memory) CPU tensors, no ``lego_core`` module in
``sys.modules`` (nor an importable one), and its module name and file path
are the ones ``optimized_model.py`` gives it at a user's; what it returns
must be plain ``torch.Tensor`` objects in memory no earlier call handed out.

Taint policy.  Every candidate gets a fresh executor: the process is
replaced after every candidate whose code ran, passed or failed (the next
one is started at once, ``Executor.prestart``), so no candidate can change
what a later one sees.  Within one candidate's requests, after every
request that ran candidate code the executor compares the functions of torch, torch.nn.functional, triton,
triton.language, builtins, math, the lego modules it loaded, the
attributes of ``torch.Tensor`` and of the op classes and the
``torch.ops.aten`` overloads with a snapshot taken at its start
(``child.Snapshot``): a changed one rejects the candidate with "the
candidate changed <name> in the executor" and restarts the executor.

What this protects against: a candidate that patches the verifier, torch or
the reference (they do not run where it runs: the judge's copies are
untouched), one that crashes, exits or hangs, and plain monkey-patching
that would leak into later candidates.  What it does not: code that means to
hide (it can undo its change before the check, patch the check itself, or
change state the snapshot does not cover: module data, dispatcher
registrations through ``torch.library``, C-level state); such a change
lives only as long as that candidate's executor, and the composed model is
checked end to end in a fresh process.  Nor does it stop
native-level attacks on the optimizer from a process of the same user
(signals, /proc/<pid>/mem, ptrace); the executors run inside the
optimizer's bubblewrap jail (``lego_core.runtime.jail``), so such an attack reaches
no further than the model file itself could (docs/SECURITY.md).  Timings come from the process that runs
the candidate and are only as honest as its code.
"""
