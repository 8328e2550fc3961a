"""Which devices a run may ask for: ``cuda`` only where the run workers
have a CUDA GPU.

The web process cannot see the workers' machines, so it goes by
``settings.LEGO_WORKER_CUDA``: True or False as the operator says, or None
(the default): the workers run on this machine (``make run``, the Docker
image), so this machine is asked, the way a run decides it
(``torch.cuda.is_available()``), in a fresh interpreter
(``lego_core.runtime.gpu_probe.cuda_available``, once per process: the web process
never imports torch).  A probe that fails refuses nothing; the run then
says what it finds.
"""
from __future__ import annotations

from django.conf import settings


def worker_cuda() -> tuple[bool | None, str]:
    """``(the run workers have CUDA: True / False / None if unknown, how
    that is known)``."""
    configured = getattr(settings, "LEGO_WORKER_CUDA", None)
    if configured is not None:
        return bool(configured), f"LEGO_WORKER_CUDA={int(bool(configured))} says so"
    from lego_core.runtime import gpu_probe

    return gpu_probe.cuda_available(), "torch.cuda.is_available() is False on this machine, where the run workers run"


def cuda_refusal() -> str | None:
    """Why ``device=cuda`` cannot run on this server, or None when it can
    (or when that cannot be told)."""
    available, how = worker_cuda()
    if available is not False:
        return None
    return ("This server's run workers have no CUDA GPU (" + how + "), so a cuda run would only fail when it starts. "
            "Choose device cpu: Triton's interpreter runs the kernels and the cost model estimates the times. "
            "(Where the GPU workers run on another machine, the operator sets LEGO_WORKER_CUDA=1.)")
