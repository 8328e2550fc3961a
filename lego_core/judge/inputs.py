"""Verification inputs of a sub-problem, and importing candidate files."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from collections.abc import Sequence
from types import ModuleType

import torch

from lego_core.runtime.memory import storage_bytes
from lego_core.tree.fusion_tree import OrNode


def load_module(path: Path, name: str) -> ModuleType:
    """Import a Python file as a module (Triton's @jit needs a real file).

    The import runs under ``verify_trace.import_guard``: a file that, while
    it is imported, changes global torch state (TF32 flags, default dtype,
    the RNG), rebinds a torch or lego_core function (``torch.softmax``,
    ``verify.compare``), writes files or starts processes raises
    ``ImportError`` with the reason (``verify_policy.import_problem``), and
    what it changed is put back first."""
    from lego_core.judge.verify_policy import import_problem
    from lego_core.judge.verify_trace import import_guard

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with import_guard() as seen:
            spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    problem = import_problem(seen)
    if problem:
        sys.modules.pop(name, None)
        raise ImportError(f"{Path(path).name}: {problem}")
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


def leaf_input_sets(leaf: OrNode, activations, parameters: set[str], seeds: tuple):
    """The verification inputs of a sub-problem: its boundary values from
    each seeded run of the model; in every set but the first, parameters read
    by it are perturbed (``perturbed``) so that their use is tested.

    ``activations``: one dict per seed (graph value name -> value): returns a
    list of input sets; or a ``BoundaryStore``: returns :class:`InputSets`,
    which builds each set when it is indexed (one set alive at a time)."""
    from lego_core.judge.boundary import BoundaryStore

    if isinstance(activations, BoundaryStore):
        return InputSets(leaf, activations, parameters, seeds)
    return [_input_set(leaf, env, parameters, seeds, k) for k, env in enumerate(activations)]


def leaf_edge_sets(sub, input_sets, parameters: set[str], seed: int):
    """Edge-case sets (``lego_core.judge.edge_inputs``: NaN, +-inf, large values,
    constant and zero rows) derived from the first of ``input_sets`` (the
    sub-problem ``sub``'s seeded sets: a list, or a store-backed
    :class:`InputSets`, whose set 0 is fetched when an edge set is built and
    released from the store's cache once copied, so a check holds one copy
    of a large input, not two), editing its activations, not the parameters
    it reads; ``seed`` (record it: the first verification seed) picks the
    positions.  At most two sets, each built when indexed (one alive at a time)."""
    from lego_core.judge.edge_inputs import edge_input_sets

    editable = [node.name not in parameters for node in sub.inputs]
    if hasattr(input_sets, "release_set"):
        sets = input_sets
        return edge_input_sets(lambda: sets[0], editable, seed, release=lambda: sets.release_set(0))
    return edge_input_sets(input_sets[0], editable, seed)


def _input_set(leaf: OrNode, env, parameters: set[str], seeds: tuple, k: int) -> list:
    inputs = []
    for j, node in enumerate(leaf.sub.inputs):
        value = env[node.name]
        if k > 0 and node.name in parameters and isinstance(value, torch.Tensor) and value.is_floating_point():
            value = perturbed(value, seeds[k] * 1000 + j)
        inputs.append(value)
    return inputs


class InputSets(Sequence):
    """The input sets of one sub-problem, built from a ``BoundaryStore`` when
    indexed: ``sets[k]`` fetches seed ``k``'s boundary values (making room
    for the check's working set, ``boundary.working_bytes``) and perturbs
    parameters as ``leaf_input_sets`` does.  Drop a set before asking for the
    next when memory is tight (``verify.verify`` does).  ``verify.verify``
    keeps one copy of an input set alive across sets (every call gets the
    same tensors, refilled) when ``keep_call_buffers`` says there is room
    for it beside a set and the check's working set."""

    def __init__(self, leaf: OrNode, store, parameters: set[str], seeds: tuple):
        from lego_core.judge.boundary import value_bytes, working_bytes

        self.leaf, self.store, self.parameters, self.seeds = leaf, store, parameters, seeds
        self.names = [n.name for n in leaf.sub.inputs]
        self.held = sum(value_bytes(n) for n in leaf.sub.inputs)  # one input set
        self.working = working_bytes(leaf.sub)
        self.holding = False  # whether the verifier keeps a copy of a set across fetches

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, k: int) -> list:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if not 0 <= k < len(self):
            raise IndexError(k)
        env = self.store.fetch(k, self.names, self.working + (self.held if self.holding else 0))
        return _input_set(self.leaf, env, self.parameters, self.seeds, k)

    @property
    def keep_call_buffers(self) -> bool:
        """Whether one more copy of an input set fits under the store's limit
        beside a set and the check's working set (``verify._InputBuffers``);
        when it does, later fetches keep room for that copy."""
        self.holding = self.store.room() >= 2 * self.held + self.working
        return self.holding

    def release_set(self, k: int) -> None:
        """Let the store drop seed ``k``'s boundary values of this sub-problem."""
        self.store.release(k, self.names)

    def timing_sets(self) -> list[list]:
        """Input sets to time on, all alive at once: every seed's while they fit
        under the store's limit next to the check's working set, at least
        the first.  (Rotating sets avoids timing warm caches; a set too large
        to share memory with the others is far larger than the cache anyway.)"""
        sets = [self[0]]
        size = storage_bytes(sets[0])
        for k in range(1, len(self)):
            if self.store.room() < size + self.working:
                break
            sets.append(self[k])
        return sets
