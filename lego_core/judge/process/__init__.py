"""The processes candidate code runs in: never the optimizer's own.

Enters: a kernel file path or an output folder, and requests over a pipe
(``wire``: a restricted pickle protocol).  Leaves: outputs, timings in ms,
or a ``JudgeError`` naming why the process failed or was tampered with.
``executor`` spawns and talks to one process (through ``forkserver``, warmed
by ``preload``); ``child`` is that process's side; ``fresh`` starts the
fresh process per use in which ``end_to_end.composed`` runs a composed
``ModelNew``.  See ``lego_core.judge``
for which process runs what.
"""
# Exported lazily (PEP 562): ``lego_core.judge.process.forkserver`` must import
# without torch (the optimizer's process starts the fork server before it
# imports torch), and importing a submodule runs this file first.
_EXPORTS = {
    "CALL_TIMEOUT_S": "executor", "Executor": "executor", "RemoteModule": "executor",
    "BadReply": "wire", "CandidateRaised": "wire", "ExecutorDied": "wire", "ExecutorTampered": "wire",
    "ExecutorTimeout": "wire", "JudgeError": "wire",
}  # fmt: skip


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"lego_core.judge.process.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'lego_core.judge.process' has no attribute {name!r}")


__all__ = [
    "BadReply",
    "CALL_TIMEOUT_S",
    "CandidateRaised",
    "Executor",
    "ExecutorDied",
    "ExecutorTampered",
    "ExecutorTimeout",
    "JudgeError",
    "RemoteModule",
]
