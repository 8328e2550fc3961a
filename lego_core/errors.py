"""Errors the optimizer raises besides ``ProblemError`` (a broken input)."""


class OptimizeError(RuntimeError):
    """The search or the final verification failed for a reason that is not
    the problem file's fault; the message names the stage and the cause."""
