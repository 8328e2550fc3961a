"""Boundary values of sub-problems per verification seed, within a memory limit.

Every sub-problem is checked on the values that flow into it when the whole
model runs on each seeded input set.  Keeping every intermediate of the graph
for every seed costs many times the model's own activation memory (a long
sequence's 16384 x 16384 score matrix per head, three times, plus each of its
elementwise successors).  :class:`BoundaryStore` keeps instead a cache of the
boundary values that sub-problems read (``needed``), per seed, on the
problem's device, under ``limit`` bytes of total device memory:

* a value not in the cache is *recomputed*: the captured graph runs again on
  that seed's inputs (``Graph.values``: other intermediates freed after their
  last use), recording the requested values and, while there is room, other
  needed values of that seed for later sub-problems;
* before a sub-problem is checked, least-recently-used values are dropped
  until the check's working set (:func:`working_bytes`: its inputs, clones,
  reference and candidate outputs, the reference's intermediates) fits under
  ``limit`` next to what is alive.

With room for everything (small models) each seed's graph runs once, as
before; a model near the limit recomputes instead of running out of memory.
``limit=None`` keeps every needed value (no accounting).
"""
from __future__ import annotations

import collections
import collections.abc
import threading
from typing import Callable

import torch

from lego_core.load.capture import Graph
from lego_core.runtime.memory import MemoryMeter, storage_bytes


def value_bytes(node) -> int:
    """Bytes of a graph value (an fx node's ``meta["val"]``: a tensor, or the
    tensors of a list / tuple); 0 for anything else."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return val.numel() * val.element_size()
    if isinstance(val, (list, tuple)):
        return sum(v.numel() * v.element_size() for v in val if isinstance(v, torch.Tensor))
    return 0


def working_bytes(sub) -> int:
    """Bytes a check of ``sub`` allocates beyond its boundary inputs (an
    estimate, upper-ish): a clone of the inputs, the reference's outputs, the
    candidate's poisoned outputs and the largest intermediate of the
    reference (freed values of a GraphModule are released as it runs), plus
    :func:`executor_bytes` (what the candidate allocates in its executor,
    which counts toward the run's peak but not toward this process's)."""
    inputs = sum(value_bytes(n) for n in sub.inputs)
    outputs = sum(value_bytes(n) for n in sub.outputs)
    inner = max((value_bytes(n) for n in sub.nodes), default=0)
    return inputs + 2 * outputs + 2 * inner + executor_bytes(sub)


def executor_bytes(sub) -> int:
    """Bytes a candidate for ``sub`` may allocate in its executor during one
    call (an estimate): its outputs, on an allocating call, and one copy of
    its inputs (a ``.contiguous()`` of a permuted input, an fp32 staging
    buffer of a 16-bit one)."""
    return sum(value_bytes(n) for n in sub.inputs) + sum(value_bytes(n) for n in sub.outputs)


class BoundaryStore:
    """Boundary values of sub-problems for each seed in ``seeds``.

    ``store[k]`` is a read-only mapping from graph value names to the values
    of seed ``k`` (computed on demand); :meth:`fetch` gets several at once
    and makes room for a check first.  ``needed``: names any sub-problem may
    read (others can still be asked for; they are recomputed).  ``limit``:
    bytes of device memory the run may use (``None``: no limit);
    ``meter``: where current usage is read (``MemoryMeter.allocated``);
    ``run_bytes``: the transient memory of one graph run (the eager forward's
    activations), kept free when a recompute is needed.  Thread-safe.
    """

    def __init__(
        self,
        graph: Graph,
        model: torch.nn.Module,
        make_inputs: Callable[[int], list],
        seeds: tuple,
        needed: set[str],
        limit: int | None = None,
        meter: MemoryMeter | None = None,
        run_bytes: int = 0,
    ):
        self.graph, self.model, self.seeds = graph, model, tuple(seeds)
        self.needed, self.limit, self.meter, self.run_bytes = set(needed), limit, meter, run_bytes
        self.inputs = [make_inputs(seed) for seed in self.seeds]  # the graph's own inputs, kept
        model_owned = {n for n, src in graph.sources.items() if src.kind in ("parameter", "buffer", "constant")}
        self._static = model_owned
        self._cache: collections.OrderedDict[tuple[int, str], object] = collections.OrderedDict()
        self._lock = threading.RLock()
        self.recomputes = 0  # graph runs after the first one per seed
        self._runs = [0] * len(self.seeds)

    def __len__(self) -> int:
        return len(self.seeds)

    def __getitem__(self, k: int) -> "_SeedView":
        if not 0 <= k < len(self.seeds):
            raise IndexError(k)
        return _SeedView(self, k)

    # ------------------------------------------------------------------ public

    def fetch(self, k: int, names: list[str], working: int = 0) -> dict[str, object]:
        """Values of ``names`` for seed ``k``; first makes room for a check that
        allocates ``working`` bytes beyond them (drops least-recently-used
        values of other names or seeds), recomputing what is not cached."""
        with self._lock:
            static = self.graph.placeholder_values(self.model, self.inputs[k])  # weights and this seed's inputs
            found = {n: static[n] for n in names if n in static}
            wanted = {(k, n) for n in names if n not in found}
            missing = [n for (_k, n) in wanted if (_k, n) not in self._cache]
            # a recompute's transient memory is freed before the check allocates its working set
            self._make_room(wanted, max(working, self.run_bytes if missing else 0))
            if missing:
                self._recompute(k, set(missing), working)
                self._make_room(wanted, working)  # optional values kept while the run was under the limit must not eat the check's room
            for key in wanted:
                self._cache.move_to_end(key)
                found[key[1]] = self._cache[key]
            return found

    def check_bytes(self, sub) -> int:
        """Bytes a check of ``sub`` needs at its peak (an upper-ish estimate):
        its boundary inputs, the check's working set (:func:`working_bytes`)
        and what the store can never drop (the model's tensors and every
        seed's inputs)."""
        static = storage_bytes([*self.model.parameters(), *self.model.buffers(), *(x for xs in self.inputs for x in xs if isinstance(x, torch.Tensor))])
        return static + sum(value_bytes(n) for n in sub.inputs) + working_bytes(sub)

    def over_limit(self, sub) -> str:
        """Why ``sub`` cannot be checked within ``limit`` (a reason naming both
        figures in MiB), or "" when it fits or there is no limit.  A long
        sequence's softmax over a 16384 x 16384 score matrix per head needs
        about eight score matrices (its input, the reference's outputs and
        intermediate, poisoned and allocated candidate outputs, an edge
        set's copy): 39 GB against an 18.6 GB bound in bf16."""
        if self.limit is None:
            return ""
        need = self.check_bytes(sub)
        if need <= self.limit:
            return ""
        return (
            f"not attempted: checking this sub-problem needs about {need / 2**20:,.0f} MiB of device memory (its boundary inputs, "
            f"the reference's outputs and largest intermediate, the candidate's outputs), more than the run's memory limit of "
            f"{self.limit / 2**20:,.0f} MiB (issue 9's bound, max(2x eager's peak, eager's peak + 4 GiB), less a margin); "
            "the library call stays here, and a larger region around it that needs less memory (a fused attention) can still win"
        )

    def room(self) -> float:
        """Bytes still free under the limit (``inf`` with no limit)."""
        return float("inf") if self.limit is None else self.limit - self._allocated()

    def cached_bytes(self) -> int:
        """Bytes of the unique storages the cache holds."""
        with self._lock:
            return storage_bytes(self._cache.values())

    def release(self, k: int, names: list[str]) -> None:
        """Drop seed ``k``'s cached values of ``names`` (the caller made what it
        needs from them; they are recomputed if asked for again)."""
        with self._lock:
            for name in names:
                self._cache.pop((k, name), None)

    def drop(self) -> None:
        """Release every cached value (the search is over)."""
        with self._lock:
            self._cache.clear()

    # ------------------------------------------------------------- internals

    def _allocated(self) -> int:
        return self.meter.allocated() if self.meter is not None else self.cached_bytes()

    def _make_room(self, protected: set, room: int) -> None:
        if self.limit is None:
            return
        for key in [key for key in self._cache if key not in protected]:
            if self._allocated() + room <= self.limit:
                return
            del self._cache[key]

    def _recompute(self, k: int, names: set[str], working: int) -> None:
        """Run seed ``k``'s graph keeping ``names`` and, while under the limit,
        other needed values of that seed not cached yet."""
        optional = {n for n in self.needed if n not in names and (k, n) not in self._cache and n not in self._static}
        limit = self.limit

        def accept(name: str, value: object) -> bool:
            if limit is None:
                return True
            return self._allocated() + max(working, self.run_bytes) <= limit

        values = self.graph.values(self.model, self.inputs[k], names, optional=optional, accept=accept)
        if self._runs[k]:
            self.recomputes += 1
        self._runs[k] += 1
        for name, value in values.items():
            if name not in self._static:
                self._cache[(k, name)] = value


class _SeedView(collections.abc.Mapping):
    """``store[k]``: the values of seed ``k`` by name (computed on demand)."""

    def __init__(self, store: BoundaryStore, k: int):
        self.store, self.k = store, k

    def __getitem__(self, name: str):
        return self.store.fetch(self.k, [name])[name]

    def __iter__(self):
        return iter(sorted(self.store.needed))

    def __len__(self) -> int:
        return len(self.store.needed)
