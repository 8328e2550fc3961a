"""Verification inputs of a sub-problem, and importing candidate files."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch

from lego_core.tree import OrNode


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
    """The verification inputs of a sub-problem: its boundary values from
    each seeded run of the model; in every set but the first, parameters read
    by it are perturbed (``perturbed``) so that their use is tested."""
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
