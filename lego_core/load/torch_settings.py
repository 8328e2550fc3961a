"""PyTorch's global settings: the flags a candidate must leave alone, and the ones a model file sets.

A setting such as ``torch.backends.cuda.matmul.allow_tf32``,
``torch.set_float32_matmul_precision("high")`` or
``torch.backends.cudnn.benchmark`` changes what every later PyTorch call in
the process computes.  Two parts of LEGO read them:

* the judge (``verify_trace``): a candidate kernel that changes one, at
  import or while it runs, is rejected, and the change is undone;
* loading a problem (``problem.load_problem``): a model file that sets one
  at import does so for its user (it is part of how the model computes), so
  LEGO records it (``Problem.torch_settings``, ``report.json``
  ``"model_file_torch_settings"``) and applies it in every process that runs
  the model's ops on its behalf (candidate executors, the composed model's
  process: :func:`apply`), as importing ``optimized_model.py`` applies it in
  the user's process (it imports the model file).

Standard library and torch only; importing it imports nothing else of torch.
"""
from __future__ import annotations

import contextlib
import warnings

import torch


def _flag(obj_path: str, attr: str):
    def get():
        obj = _resolve(obj_path)
        return getattr(obj, attr) if obj is not None else None

    def set_(value):
        obj = _resolve(obj_path)
        if obj is not None and value is not None:
            setattr(obj, attr, value)

    return get, set_


def _resolve(path: str):
    obj = torch
    for part in path.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _set_default_dtype(value) -> None:
    torch.set_default_dtype(getattr(torch, str(value).removeprefix("torch.")) if isinstance(value, str) else value)


# (name, getter, setter) of every global setting: each changes what later
# PyTorch code computes (TF32, reduced-precision reductions, determinism,
# default dtype/device, grad mode).  The RNG is the judge's own concern (verify_trace).
FLAGS: dict[str, tuple] = {
    "torch.backends.cuda.matmul.allow_tf32": _flag("torch.backends.cuda.matmul", "allow_tf32"),
    "torch.backends.cuda.matmul.fp32_precision": _flag("torch.backends.cuda.matmul", "fp32_precision"),
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": _flag("torch.backends.cuda.matmul", "allow_fp16_reduced_precision_reduction"),
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": _flag("torch.backends.cuda.matmul", "allow_bf16_reduced_precision_reduction"),
    "torch.backends.cudnn.allow_tf32": _flag("torch.backends.cudnn", "allow_tf32"),
    "torch.backends.cudnn.fp32_precision": _flag("torch.backends.cudnn", "fp32_precision"),
    "torch.backends.cudnn.benchmark": _flag("torch.backends.cudnn", "benchmark"),
    "torch.backends.cudnn.deterministic": _flag("torch.backends.cudnn", "deterministic"),
    "torch.backends.cudnn.enabled": _flag("torch.backends.cudnn", "enabled"),
    "torch.get_float32_matmul_precision()": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    "torch.get_default_dtype()": (torch.get_default_dtype, _set_default_dtype),
    "torch.get_default_device()": (lambda: str(torch.get_default_device()), torch.set_default_device),
    "torch.is_grad_enabled()": (torch.is_grad_enabled, torch.set_grad_enabled),
    "torch.is_anomaly_enabled()": (torch.is_anomaly_enabled, torch.set_anomaly_enabled),
    "torch.are_deterministic_algorithms_enabled()": (
        lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
        lambda v: torch.use_deterministic_algorithms(v[0], warn_only=v[1]),
    ),
}


def read_flags() -> dict:
    """Every setting of :data:`FLAGS` as plain data (name -> bool, str, tuple...);
    a setting this torch build does not have is left out."""
    state = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # some flags warn that a newer API exists
        for name, (get, _) in FLAGS.items():
            try:
                value = get()
            except Exception:  # noqa: BLE001 - a flag this torch build does not have
                continue
            state[name] = value if isinstance(value, (bool, int, float, str, tuple, type(None))) else str(value)
    return state


def changed_flags(before: dict, after: dict) -> dict:
    """``{name: value after}`` for every setting of two :func:`read_flags` that differs."""
    return {name: after[name] for name in sorted(after) if before.get(name) != after[name]}


def apply(settings: dict) -> list[str]:
    """Set each ``name -> value`` of ``settings`` (names of :data:`FLAGS`, as
    :func:`changed_flags` gives them); returns the names this torch build
    could not set (left as they are, never raised)."""
    failed = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, value in settings.items():
            entry = FLAGS.get(name)
            if entry is None:
                failed.append(name)
                continue
            try:
                entry[1](value)
            except Exception:  # noqa: BLE001 - an older torch without this setting
                failed.append(name)
    return failed


@contextlib.contextmanager
def recorded(into: dict):
    """Around importing a model file: on exit ``into`` holds the settings the
    code inside changed (:func:`changed_flags`); the changes stay."""
    before = read_flags()
    try:
        yield into
    finally:
        into.update(changed_flags(before, read_flags()))
