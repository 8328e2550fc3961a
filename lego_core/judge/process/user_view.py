"""What a candidate sees while it is judged: what it would see in a user's process.

A kernel that can tell judging from use can compute honestly only while
judged (issue 27).  In the executor (``lego_core.judge.process.child``)
every call of candidate code (import, ``launch``, timing) runs inside
:func:`user_view`, which removes the tells the executor itself would give:

* **tensors**: the judge shares its inputs and ``out`` buffers with the
  executor (``torch.multiprocessing``: CPU shared memory, CUDA IPC), so a CPU
  tensor there answers ``is_shared()`` with True, and a user's never does.
  :class:`PrivateTensors` hands the candidate private copies instead, one
  per shared storage (so aliasing between arguments is kept) and the same
  object call after call for the same buffer (so a kernel that memoises by
  tensor identity meets it again, as in a user's process, and is caught
  returning stale values); their contents are copied in before the call and
  back after it (a region that writes an input in place is judged on what it
  wrote).  CUDA tensors answer ``is_shared()`` with True in every process
  (PyTorch documents it), so they are passed as they are.
* **modules**: the executor runs LEGO's judge, so ``sys.modules`` holds
  ``lego_core.*``; a user's process never does.  :func:`hidden_judge` takes
  every ``lego_core`` module out of ``sys.modules`` while candidate code runs
  and puts exactly those back after (a module the candidate put there
  meanwhile under that name is dropped); meanwhile ``import lego_core`` fails
  as it does where LEGO is not installed (``_NotInstalled``).  The executor's own code holds its modules
  directly, so nothing of it needs the names meanwhile.
* **names**: a candidate is imported under the module name and file path that
  ``optimized_model.py`` gives it at a user's (``lego_kernel_<run>_<kernel>``,
  ``.../kernels/<kernel>.py``; ``lego_core.judge.candidate``).

After a call, :func:`returned_problem` refuses what a user's code could not
use as a result: anything but exactly ``torch.Tensor`` (a subclass can defer
its computation to the first touch, which the judge's own encoding would
trigger) and, with :class:`EarlierOutputs`, an output that shares memory with
one an earlier call returned or an earlier output whose values changed (a
module-level buffer returned every call: each call overwrites what the
caller kept).

What it cannot hide is listed in docs/SECURITY.md (the grad mode the plan
runs in, the dispatch mode of the call trace and timing clocks reachable only
through private PyTorch names, which the kernel-file allowlist refuses).
"""
from __future__ import annotations

import collections
import contextlib
import sys
from typing import Any, Iterator

import torch

JUDGE_PACKAGE = "lego_core"
PRIVATE_MAX = 64  # shared storages whose private copies an executor keeps (the verifier reuses a few buffers)
EARLIER_CALLS_KEPT = 4  # calls whose outputs are kept (with copies) to catch a buffer handed out again
EARLIER_CALLS_KEPT_CUDA = 2  # on a GPU: fewer (the copies count against the search's memory bound)


def _judge_module(name: str) -> bool:
    return name == JUDGE_PACKAGE or name.startswith(JUDGE_PACKAGE + ".")


class _NotInstalled:
    """A ``sys.meta_path`` finder for which LEGO is not installed: ``import
    lego_core`` fails as it does in a user's process that has only the output
    folder (which needs no LEGO: it ships ``lego_runtime_<run>.py``)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if _judge_module(name):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@contextlib.contextmanager
def hidden_judge() -> Iterator[None]:
    """``sys.modules`` without LEGO's modules, and LEGO not importable, for
    the duration (module docstring)."""
    hidden = {name: module for name, module in list(sys.modules.items()) if _judge_module(name)}
    for name in hidden:
        sys.modules.pop(name, None)
    finder = _NotInstalled()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        try:
            sys.meta_path.remove(finder)
        except ValueError:
            pass
        for name in [n for n in list(sys.modules) if _judge_module(n)]:
            sys.modules.pop(name, None)  # put there by candidate code meanwhile: not the executor's
        sys.modules.update(hidden)


def _storage_key(t: torch.Tensor) -> tuple:
    storage = t.untyped_storage()
    return (storage.data_ptr(), storage.nbytes(), t.device)


class PrivateTensors:
    """Private copies of the shared CPU tensors a request brings (module
    docstring).  :meth:`private` maps a list of arguments; :meth:`write_back`
    copies every private storage used by the call back into its shared one."""

    def __init__(self) -> None:
        # shared storage key -> (the shared tensor that keeps it alive, its private storage as a uint8 tensor)
        self.storages: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
        # tensor key -> (shared tensor, private tensor): the same private object for the same shared view
        self.tensors: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
        self.used: list[tuple] = []

    def begin(self) -> None:
        """Start a request: no storage is in use yet."""
        self.used = []

    def private(self, args: list | None) -> list | None:
        """``args`` with every shared CPU tensor replaced by its private copy,
        filled with the shared tensor's current contents."""
        if args is None:
            return None
        return [self._one(x) if isinstance(x, torch.Tensor) else x for x in args]

    def _one(self, shared: torch.Tensor) -> torch.Tensor:
        if shared.device.type != "cpu" or not shared.is_shared():
            return shared  # a CUDA tensor is "shared" in every process; a private CPU tensor already is what a user has
        skey = _storage_key(shared)
        entry = self.storages.get(skey)
        nbytes = shared.untyped_storage().nbytes()
        if entry is None:
            entry = self.storages[skey] = (shared, torch.empty(nbytes, dtype=torch.uint8))
            while len(self.storages) > PRIVATE_MAX:
                old, _ = self.storages.popitem(last=False)
                for key in [k for k in self.tensors if k[0] == old]:
                    del self.tensors[key]
        self.storages.move_to_end(skey)
        private_bytes = entry[1]
        if skey not in self.used:
            if nbytes:
                private_bytes.copy_(torch.empty(0, dtype=torch.uint8).set_(shared.untyped_storage()))
            self.used.append(skey)
        tkey = (skey, shared.storage_offset(), tuple(shared.shape), shared.stride(), shared.dtype)
        held = self.tensors.get(tkey)
        if held is None:
            view = torch.empty(0, dtype=shared.dtype).set_(private_bytes.untyped_storage(), shared.storage_offset(), shared.shape, shared.stride())
            held = self.tensors[tkey] = (shared, view)
            while len(self.tensors) > 4 * PRIVATE_MAX:
                self.tensors.popitem(last=False)
        return held[1]

    def write_back(self) -> None:
        """Copy what the call wrote into each private storage it used back to the shared one."""
        for skey in self.used:
            entry = self.storages.get(skey)
            if entry is None:
                continue
            shared, private_bytes = entry
            if private_bytes.numel():
                torch.empty(0, dtype=torch.uint8).set_(shared.untyped_storage()).copy_(private_bytes)
        self.used = []


def _tensors(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)) and depth < 6:
        for v in value:
            yield from _tensors(v, depth + 1)
    elif isinstance(value, dict) and depth < 6:
        for v in dict.values(value):
            yield from _tensors(v, depth + 1)


def returned_problem(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` (what ``launch`` returned) is not a result a user's code
    can use as it is, or None: every tensor in it must be exactly
    ``torch.Tensor`` (checked without touching its data, before anything
    reads it)."""
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor:
            return (f"launch returned a {type(value).__name__}, a subclass of torch.Tensor: a kernel returns plain tensors "
                    "(a subclass can compute on first use, outside the call that was judged)")
        return None
    if type(value) in (list, tuple) and depth < 6:
        for v in value:
            problem = returned_problem(v, depth + 1)
            if problem:
                return problem
    return None


class EarlierOutputs:
    """The outputs of the last :data:`EARLIER_CALLS_KEPT` calls of one kernel
    module, with copies of their values, to catch a kernel that hands out
    the same memory again (module docstring).  Outputs that are the call's own
    ``out`` buffers or inputs (a view of an input, an in-place region) are
    not held: the caller passed those in."""

    def __init__(self, calls_kept: int = EARLIER_CALLS_KEPT) -> None:
        self.calls: "collections.deque[list[tuple[torch.Tensor, torch.Tensor]]]" = collections.deque(maxlen=calls_kept)

    def check(self, returned: Any, passed_in: list) -> str | None:
        """After a call: why its outputs or the earlier ones are wrong (None
        if they are not); then keep this call's outputs."""
        passed = {_storage_key(t) for t in passed_in if isinstance(t, torch.Tensor)}
        fresh = [t for t in _tensors(returned) if _storage_key(t) not in passed]
        earlier_keys = {_storage_key(t): n for n, call in enumerate(self.calls) for t, _ in call}
        for t in fresh:
            if t.untyped_storage().nbytes() and _storage_key(t) in earlier_keys:
                return ("launch returned memory it had already returned from an earlier call (a buffer it reuses): "
                        "what the caller kept from that call is overwritten; allocate each output, or write into out=")
        for call in self.calls:
            for kept, copy in call:
                if not _same(kept, copy):
                    return ("an output launch returned from an earlier call changed when it was called again "
                            "(it keeps writing into memory it handed out); allocate each output, or write into out=")
        self.calls.append([(t, t.detach().clone()) for t in fresh])
        return None


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal (a NaN equals the same NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    bits = _BITS.get(a.element_size())
    if bits is not None and a.dtype != torch.bool and not a.is_complex():
        return bool(torch.equal(a.contiguous().view(bits), b.contiguous().view(bits)))
    return bool(torch.equal(a, b))
