"""What the trusted parent knows of the GPU, learned without starting CUDA in it.

The process that starts the jailed child (a web worker, the CLI) must not
take what the child says about the machine: it keys the child's kernel
cache entries itself (``search.cache.run_key``: the GPU's name is part of the key)
and makes the GPU lock files the jail shows read-only (``jail.for_run``).
It learns both from :func:`probe`, which runs ``python -m
lego_core.runtime.gpu_probe`` once per process (and ``CUDA_VISIBLE_DEVICES`` and
lock folder): a fresh interpreter of LEGO's own, no uploaded code, so the
parent's own process never holds a CUDA context (a worker that forks must
not, and a context costs device memory beside every run).

Usage: ``python -m lego_core.runtime.gpu_probe`` prints ``{"name": ..., "locks":
[...]}`` after creating the lock files of every visible GPU;
``python -m lego_core.runtime.gpu_probe --cuda`` prints ``{"cuda": <bool>, "name":
...}`` and makes nothing (:func:`cuda_available`: the web process asks
whether a run here could use ``device=cuda``).
"""
from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from lego_core.runtime import gpu_lock

log = logging.getLogger(__name__)
TIMEOUT_S = 120  # importing torch and starting CUDA, on a busy machine


def probe() -> dict:
    """``{"name": <the current CUDA device's name, or None>, "locks": [lock
    file paths, one per visible GPU and its turnstile]}``, the lock files
    created (``lego_core.runtime.gpu_lock``).  Memoized per ``CUDA_VISIBLE_DEVICES``
    and lock folder.  Never raises: a probe that fails logs a warning and
    returns no name and no locks."""
    return dict(_probe(os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get(gpu_lock.LOCK_DIR_ENV) or gpu_lock.DEFAULT_LOCK_DIR))


def _ask(*flags: str) -> dict:
    """``python -m lego_core.runtime.gpu_probe FLAGS`` in a fresh interpreter: the JSON
    of its last line.  Raises OSError, SubprocessError, RuntimeError (it
    failed) or ValueError/IndexError (no JSON)."""
    package_parent = str(Path(__file__).resolve().parents[2])  # the folder lego_core/ is in
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_parent, *filter(None, [os.environ.get("PYTHONPATH")])]))
    done = subprocess.run([sys.executable, "-m", "lego_core.runtime.gpu_probe", *flags], capture_output=True, text=True,
                          timeout=TIMEOUT_S, stdin=subprocess.DEVNULL, env=env)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-300:] or f"exit code {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@functools.lru_cache(maxsize=8)
def _probe(visible: str | None, lock_dir: str) -> dict:
    try:
        found = _ask()
        return {"name": found.get("name"), "locks": [str(p) for p in found.get("locks", [])]}
    except (OSError, subprocess.SubprocessError, RuntimeError, ValueError, IndexError) as exc:
        log.warning("the GPU could not be probed (%s): kernels are not cached and GPU locks not made for this run", exc)
        return {"name": None, "locks": []}


def cuda_available() -> bool | None:
    """Whether this machine has a usable CUDA GPU, as a run's loading of the
    model decides it (``torch.cuda.is_available()``, ``problem.load_problem``),
    asked in a fresh interpreter (the caller never imports torch nor holds a
    CUDA context), once per ``CUDA_VISIBLE_DEVICES``.  Makes no lock files.
    None when the probe itself failed (logged): it cannot tell."""
    return _cuda_available(os.environ.get("CUDA_VISIBLE_DEVICES"))


@functools.lru_cache(maxsize=8)
def _cuda_available(visible: str | None) -> bool | None:
    try:
        return bool(_ask("--cuda")["cuda"])
    except (OSError, subprocess.SubprocessError, RuntimeError, ValueError, IndexError, KeyError) as exc:
        log.warning("could not find out whether this machine has CUDA (%s)", exc)
        return None


def _main(argv: list[str] | None = None) -> int:
    import torch  # here, not at the top: probe() runs this in a fresh interpreter, and importers of this module need no torch

    if "--cuda" in (sys.argv[1:] if argv is None else argv):
        available = bool(torch.cuda.is_available())
        print(json.dumps({"cuda": available, "name": torch.cuda.get_device_name() if available else None}))
        return 0

    if not torch.cuda.is_available():
        print(json.dumps({"name": None, "locks": []}))
        return 0
    locks = []
    for index in range(torch.cuda.device_count()):
        path = gpu_lock.lock_path(index)
        for file in (str(path), f"{path}.turnstile"):
            gpu_lock.create_lock_file(file)
            locks.append(file)
    print(json.dumps({"name": torch.cuda.get_device_name(), "locks": locks}))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
