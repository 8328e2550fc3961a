"""Verification inputs of a sub-problem, and importing candidate files.

A sub-problem is checked on its boundary values from each seeded run of the
model (:func:`leaf_input_sets`).  In every set but the first, the model's
parameters it reads are perturbed (:func:`perturbed`), and its activations
(float inputs that come from the model's inputs: not parameters, buffers or
constants, not masks, indices or other integer-valued floats) are redrawn
from another distribution (:data:`DISTRIBUTIONS`, issue 27): the model's
example inputs are ``randn``, so every activation a kernel met while judged
looked like N(0, 1) data passed through the model, and a kernel that sampled
its input (``.item()``) and computed honestly only on such data passed.
Which distribution each set gets is drawn from the run's seeds, so the mix
differs from run to run; the first set keeps the model's own values (the
edge sets and the tuner start from it).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import math
import random
import sys
from pathlib import Path
from collections.abc import Sequence
from types import ModuleType

import torch

from lego_core.runtime.memory import storage_bytes
from lego_core.tree.fusion_tree import OrNode


def load_module(path: Path, name: str, around=None) -> ModuleType:
    """Import a Python file as a module (Triton's @jit needs a real file).
    ``around``: a context manager factory the file's own code runs inside
    (the executor's ``user_view.hidden_judge``).

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
        with import_guard() as seen, (around() if around is not None else contextlib.nullcontext()):
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


# --------------------------------------------------------------------------
# Input distributions (issue 27)
# --------------------------------------------------------------------------

# The distributions an activation is redrawn from in the sets after the first.
# ``z`` is the input divided by its root-mean-square value (its shape and
# signs kept, its magnitude 1):
#   "scaled up": z * 1e3 (fp16: z * 16, whose squares stay under 65504)
#   "scaled down": z * 1e-3 (fp16: z / 16, clear of fp16's subnormals)
#   "shifted": 5 + 0.1 z or -3 + 0.1 z (an offset far larger than the spread)
#   "uniform": U[0, 1), drawn afresh
#   "positive": |z|
# An input that is non-negative everywhere (a variance, a probability, an
# exp) stays non-negative: no "positive" (it would change nothing) and no
# negative shift; it gets "shifted" to 5 + 0.1 z.
DISTRIBUTIONS = ("scaled up", "scaled down", "shifted", "uniform", "positive")
_SCALES = {torch.float16: (16.0, 1.0 / 16.0)}
_SCALES_DEFAULT = (1.0e3, 1.0e-3)
_SHIFTS = (5.0, -3.0)
_SPREAD = 0.1
_SAMPLE = 4096  # elements sampled to tell an activation from a mask or an index
_MIN_DISTINCT = 16


def distributions_for(seeds: Sequence[int]) -> list[str | None]:
    """The distribution of each input set (:data:`DISTRIBUTIONS`): None (the
    model's own values) for the first, then a random order of the others,
    drawn from all the seeds (secret seeds, a secret mix; fixed seeds, a
    reproducible one), as many different ones as there are sets."""
    order = list(DISTRIBUTIONS)
    random.Random(hashlib.sha256(repr([int(x) for x in seeds]).encode()).digest()).shuffle(order)
    return [None] + [order[(k - 1) % len(order)] for k in range(1, len(seeds))]


def activation_inputs(sub, parameters: set[str], model_owned: set[str] | None = None) -> list[bool]:
    """For each input of ``sub``: whether it is an activation, a value that
    depends on the model's inputs (an fx node with a placeholder ancestor that
    is a model input), not a parameter, buffer or constant, nor a value made
    from those alone (a rotary table, a causal mask built in ``forward``).
    ``model_owned``: placeholder names of parameters, buffers and constants
    (``BoundaryStore``, from the graph's sources); None: the placeholders
    not in ``parameters`` whose names are not torch.export's buffer or
    constant names (``b_...``, ``c_...``) count as model inputs."""
    owned = set(parameters) | set(model_owned or ())
    memo: dict = {}

    def is_model_input(name: str) -> bool:
        return name not in owned and (model_owned is not None or not name.startswith(("b_", "c_")))

    def from_inputs(node) -> bool:
        stack, seen = [node], set()
        while stack:
            n = stack.pop()
            if n in seen or memo.get(n) is False:
                continue
            seen.add(n)
            if memo.get(n) or (getattr(n, "op", None) == "placeholder" and is_model_input(n.name)):
                memo[node] = True
                return True
            stack.extend(getattr(n, "all_input_nodes", ()))
        for n in seen:  # none of them reaches a model input
            memo[n] = False
        return False

    return [node.name not in parameters and from_inputs(node) for node in sub.inputs]


class InputSet(list):
    """One input set (a list, in the sub-problem's input order) with what was
    done to it: ``distribution`` (a name of :data:`DISTRIBUTIONS`, or ``""``:
    the model's own values) and ``magnitude`` (the least ratio of an
    activation's new RMS value to its own, at most 1: the verifier judges an
    output's elements relative to it, ``verify.compare``'s ``scale_floor``,
    so that a set drawn at 1e-3 is judged relative to 1e-3)."""

    distribution: str = ""
    magnitude: float = 1.0


def redrawn(value: torch.Tensor, kind: str, seed: int, shift: float = _SHIFTS[0]) -> tuple[torch.Tensor, float] | None:
    """``value`` redrawn from distribution ``kind`` (:data:`DISTRIBUTIONS`),
    and the ratio of its new RMS value to its old one; None when ``value``
    is not an activation to redraw: not floating, fewer than four elements,
    NaN or inf among its sampled elements, integer-valued (positions, counts,
    0/1 masks), fewer than 16 distinct sampled values (a mask such as 0 /
    -1e9), or all zero.  Same dtype, device and strides (dense layouts);
    ``seed`` draws the uniform values; ``shift``: the offset of "shifted"
    (a non-negative input is always shifted up).  The input is not changed."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() < 4:
        return None
    flat = value.detach().reshape(-1)
    step = max(1, flat.numel() // _SAMPLE)
    sample = flat[::step][:_SAMPLE].double().cpu()
    if not bool(torch.isfinite(sample).all()) or bool((sample == sample.round()).all()):
        return None
    if torch.unique(sample).numel() < min(_MIN_DISTINCT, max(4, sample.numel() // 2)):
        return None
    rms = float(sample.square().mean().sqrt())
    if not rms > 0.0 or not math.isfinite(rms):
        return None
    nonneg = bool((sample >= 0).all())
    up, down = _SCALES.get(value.dtype, _SCALES_DEFAULT)
    out = torch.empty_like(value)
    if kind == "uniform":
        gen = torch.Generator(device=value.device).manual_seed(int(seed))
        out.uniform_(0.0, 1.0, generator=gen)
        return out, min(1.0, (1.0 / 3.0) ** 0.5 / rms)
    if kind == "positive" and nonneg:
        kind, shift = "shifted", _SHIFTS[0]
    elif kind == "shifted" and nonneg:
        shift = _SHIFTS[0]
    out.copy_(value)
    if kind == "scaled up":
        out.mul_(up / rms)
        new = up
    elif kind == "scaled down":
        out.mul_(down / rms)
        new = down
    elif kind == "shifted":
        out.mul_(_SPREAD / rms).add_(shift)
        new = abs(shift)
    elif kind == "positive":
        out.abs_().mul_(1.0 / rms)
        new = 1.0
    else:
        raise ValueError(f"unknown distribution {kind!r}: one of {', '.join(DISTRIBUTIONS)}")
    return out, new / rms


def _redraw_set(inputs: list, activation: Sequence[bool], kind: str | None, seed: int) -> InputSet:
    """``inputs`` (one input set) with each activation redrawn from ``kind``
    (one offset for a "shifted" set, drawn from ``seed``); an
    :class:`InputSet` that says so.  ``kind`` None: unchanged."""
    result = InputSet(inputs)
    if kind is None:
        return result
    shift = _SHIFTS[random.Random(int(seed)).randrange(len(_SHIFTS))]
    ratios = []
    for j, x in enumerate(inputs):
        if j < len(activation) and activation[j]:
            drawn = redrawn(x, kind, seed * 1000 + 500 + j, shift)
            if drawn is not None:
                result[j], ratio = drawn
                ratios.append(ratio)
    if ratios:
        result.distribution = kind
        result.magnitude = min(1.0, min(ratios))
    return result


def leaf_input_sets(leaf: OrNode, activations, parameters: set[str], seeds: tuple):
    """The verification inputs of a sub-problem: its boundary values from
    each seeded run of the model; in every set but the first, parameters read
    by it are perturbed (``perturbed``) so that their use is tested, and its
    activations (:func:`activation_inputs`) are redrawn from the set's
    distribution (:func:`distributions_for`, :func:`redrawn`).  Each set is
    an :class:`InputSet` (a list).

    ``activations``: one dict per seed (graph value name -> value): returns a
    list of input sets; or a ``BoundaryStore``: returns :class:`InputSets`,
    which builds each set when it is indexed (one set alive at a time)."""
    from lego_core.judge.boundary import BoundaryStore

    if isinstance(activations, BoundaryStore):
        return InputSets(leaf, activations, parameters, seeds)
    activation = activation_inputs(leaf.sub, parameters)
    return [_input_set(leaf, env, parameters, seeds, k, activation) for k, env in enumerate(activations)]


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


def _input_set(leaf: OrNode, env, parameters: set[str], seeds: tuple, k: int, activation: Sequence[bool] = ()) -> InputSet:
    inputs = []
    for j, node in enumerate(leaf.sub.inputs):
        value = env[node.name]
        if k > 0 and node.name in parameters and isinstance(value, torch.Tensor) and value.is_floating_point():
            value = perturbed(value, seeds[k] * 1000 + j)
        inputs.append(value)
    kind = distributions_for(seeds)[k] if k < len(seeds) else None
    return _redraw_set(inputs, activation, kind, int(seeds[k]) if k < len(seeds) else k)


class InputSets(Sequence):
    """The input sets of one sub-problem, built from a ``BoundaryStore`` when
    indexed: ``sets[k]`` fetches seed ``k``'s boundary values (making room
    for the check's working set, ``boundary.working_bytes``) and perturbs
    parameters as ``leaf_input_sets`` does.  Drop a set before asking for the
    next when memory is tight (``verify.verify`` does).  ``verify.verify``
    keeps one copy of an input set alive across sets (every call gets the
    same tensors, refilled) when ``keep_call_buffers`` says there is room
    for it beside a set and the check's working set.  A set after the first
    holds its activations redrawn (:func:`redrawn`), copies made beside the
    store's values: its fetch makes room for them too, and when the store
    cannot, the store drops its values of those activations once the copies
    are made (they are recomputed when asked for again)."""

    def __init__(self, leaf: OrNode, store, parameters: set[str], seeds: tuple):
        from lego_core.judge.boundary import value_bytes, working_bytes

        self.leaf, self.store, self.parameters, self.seeds = leaf, store, parameters, seeds
        self.names = [n.name for n in leaf.sub.inputs]
        self.held = sum(value_bytes(n) for n in leaf.sub.inputs)  # one input set
        self.working = working_bytes(leaf.sub)
        self.holding = False  # whether the verifier keeps a copy of a set across fetches
        self.activation = activation_inputs(leaf.sub, parameters, getattr(store, "_static", None))
        self.redrawn_bytes = sum(value_bytes(n) for n, a in zip(leaf.sub.inputs, self.activation) if a)

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, k: int) -> list:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if not 0 <= k < len(self):
            raise IndexError(k)
        extra = self.redrawn_bytes if k > 0 else 0
        wanted = self.working + (self.held if self.holding else 0) + extra
        env = self.store.fetch(k, self.names, wanted)
        tight = extra > 0 and self.store.room() < wanted  # the store could not make room for the redrawn copies
        built = _input_set(self.leaf, env, self.parameters, self.seeds, k, self.activation)
        if tight and built.distribution:
            # the copies replace the store's values while this set is checked (recomputed when asked again)
            self.store.release(k, [name for name, a in zip(self.names, self.activation) if a])
        return built

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
