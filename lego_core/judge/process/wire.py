"""What crosses between the judge (the optimizer process) and an executor.

Requests go from the judge to the executor as ordinary pickles
(``multiprocessing.reduction.ForkingPickler``, so that tensors travel by
``torch.multiprocessing`` sharing: CPU shared memory, CUDA IPC).  Replies
come back from a process that runs candidate code, so the judge never
unpickles them freely (a pickle can call any importable function): it reads
them with :class:`ReplyUnpickler`, which knows only plain data (tuples,
lists, dicts, strings, numbers), tensors rebuilt by ``torch.multiprocessing``
and the few ``torch`` types they need.

Values a candidate returns are encoded by :func:`encode` in the executor
(a tensor that *is* one of the ``out`` buffers it was given becomes a marker,
so the judge hands back its own buffer object) and decoded by :func:`decode`
in the judge, which copies every tensor it receives into memory the executor
cannot reach (:func:`owned`).
"""
from __future__ import annotations

import collections
import io
import math
import pickle
import re
from typing import Any

import torch
import torch.multiprocessing  # noqa: F401 - registers the tensor reductions with ForkingPickler
from multiprocessing.reduction import ForkingPickler

MAX_REPLY_BYTES = 256 << 20  # a reply carries handles, not tensor data: anything bigger is abuse
MAX_DEPTH = 6
MAX_ITEMS = 100_000


class JudgeError(Exception):
    """The executor gave no answer for a candidate: it died, ran past the
    per-call limit, changed the executor's shared state, or sent a reply the
    judge does not accept.  The candidate fails; the executor is restarted."""


class ExecutorDied(JudgeError):
    """The executor process ended during a request (os._exit, a signal, a crash in native code)."""


class ExecutorTimeout(JudgeError):
    """A request ran past the per-call limit; the executor was killed."""


class ExecutorTampered(JudgeError):
    """Candidate code changed functions the executor shares with later candidates."""


class BadReply(JudgeError):
    """The executor's reply was not what the protocol allows."""


class CandidateRaised(Exception):
    """Base of the exceptions a candidate raised in the executor; each is
    re-created in the judge as a subclass named like the original type
    (``ValueError``), so the verifier reports "candidate raised ValueError: ...".
    ``remote_traceback``: the executor's traceback text."""

    remote_traceback = ""


_RAISED: dict[str, type] = {}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,79}$")


def raised(type_name: str, message: str, traceback_text: str = "") -> CandidateRaised:
    """A :class:`CandidateRaised` whose class is named ``type_name`` (a safe identifier, else ``Exception``)."""
    name = type_name if isinstance(type_name, str) and _NAME.match(type_name) else "Exception"
    cls = _RAISED.get(name)
    if cls is None:
        cls = _RAISED[name] = type(name, (CandidateRaised,), {"__module__": "lego_core.judge.remote"})
    exc = cls(str(message)[:2000])
    exc.remote_traceback = str(traceback_text)[:20000]
    return exc


# ---------------------------------------------------------------- reading replies

_TORCH_NAMES = frozenset({"Size", "device", "Tensor", "UntypedStorage", "TypedStorage"})
_ALLOWED = {
    ("torch.storage", "UntypedStorage"),
    ("torch.storage", "TypedStorage"),
    ("torch.nn.parameter", "Parameter"),
    ("torch._tensor", "Tensor"),
    ("multiprocessing.resource_sharer", "DupFd"),
    ("builtins", "complex"),
    ("builtins", "slice"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("collections", "OrderedDict"),
}


class ReplyUnpickler(pickle.Unpickler):
    """Unpickles a reply, allowing only plain data and shared tensors.

    Globals allowed: ``torch.multiprocessing.reductions.rebuild_*`` (tensors
    and storages shared by file descriptor or CUDA IPC), ``torch`` dtypes,
    ``torch.Size``, ``torch.device``, ``torch.Tensor`` and the storage
    classes, ``multiprocessing.resource_sharer.DupFd`` (how a file
    descriptor travels); anything else is a :class:`BadReply`."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch.multiprocessing.reductions" and name.startswith("rebuild_") and name != "rebuild_event":
            return super().find_class(module, name)
        if module == "torch" and (name in _TORCH_NAMES or isinstance(getattr(torch, name, None), torch.dtype)):
            return getattr(torch, name)
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise BadReply(f"the executor's reply refers to {module}.{name}, which the judge does not accept")


def loads(data: bytes) -> Any:
    """A reply's bytes to objects (:class:`ReplyUnpickler`)."""
    try:
        return ReplyUnpickler(io.BytesIO(data)).load()
    except JudgeError:
        raise
    except Exception as exc:  # noqa: BLE001 - a malformed reply is the executor's failure
        raise BadReply(f"the executor's reply could not be read: {type(exc).__name__}: {exc}") from None


def dumps(obj: Any) -> bytes:
    """Objects to bytes, tensors shared (``torch.multiprocessing``)."""
    return bytes(ForkingPickler.dumps(obj))


# ---------------------------------------------------------------- values a candidate returns


class Unsendable:
    """Stands in the judge for a returned object that could not cross (its type's name only)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} returned by the candidate>"


def encode(value: Any, out: list | None, depth: int = 0) -> tuple:
    """In the executor: ``value`` (what ``launch`` returned) as a tree of tagged tuples."""
    if isinstance(value, torch.Tensor):
        if out is not None:
            for k, buf in enumerate(out):
                if isinstance(buf, torch.Tensor) and value.data_ptr() == buf.data_ptr() and value.shape == buf.shape and value.dtype == buf.dtype and value.device == buf.device:
                    return ("out", k)
        return ("tensor", value.detach())
    if value is None or isinstance(value, (bool, int, float, str)):
        return ("value", value)
    if isinstance(value, (list, tuple)) and depth < MAX_DEPTH and len(value) <= MAX_ITEMS:
        return ("list" if isinstance(value, list) else "tuple", [encode(v, out, depth + 1) for v in value])
    if isinstance(value, dict) and depth < MAX_DEPTH and len(value) <= MAX_ITEMS and all(type(k) in (str, int) for k in value):
        # a model's named outputs: a dict, or a dict subclass such as a Hugging Face ModelOutput (its fields
        # that are set, in order: what torch.utils._pytree flattens), sent as a plain dict
        return ("dict", [(k, encode(v, out, depth + 1)) for k, v in dict.items(value)])
    return ("other", type(value).__name__)


def decode(tree: Any, out: list | None, depth: int = 0) -> Any:
    """In the judge: the value :func:`encode` described; ``out`` markers become
    the judge's own buffers, received tensors become :func:`owned` copies."""
    if not isinstance(tree, tuple) or len(tree) != 2 or depth > MAX_DEPTH:
        raise BadReply("the executor's reply has an unexpected shape")
    tag, item = tree
    if tag == "out" and out is not None and isinstance(item, int) and 0 <= item < len(out):
        return out[item]
    if tag == "tensor" and isinstance(item, torch.Tensor):
        return owned(item)
    if tag == "value" and (item is None or isinstance(item, (bool, int, float, str))):
        return item
    if tag in ("list", "tuple") and isinstance(item, list) and len(item) <= MAX_ITEMS:
        items = [decode(v, out, depth + 1) for v in item]
        return items if tag == "list" else tuple(items)
    if tag == "dict" and isinstance(item, list) and len(item) <= MAX_ITEMS:
        pairs = {}
        for pair in item:
            if not (isinstance(pair, tuple) and len(pair) == 2 and type(pair[0]) in (str, int)):
                raise BadReply("the executor's reply has a malformed dict entry")
            pairs[pair[0]] = decode(pair[1], out, depth + 1)
        return pairs
    if tag == "other" and isinstance(item, str):
        return Unsendable(item[:100])
    raise BadReply(f"the executor's reply has an unexpected item {tag!r}")


def owned(t: torch.Tensor) -> torch.Tensor:
    """A copy of a received tensor in the judge's own memory, with the same
    shape, strides and storage offset (the executor keeps a mapping of what it
    sent and could write to it later; a copy is out of its reach)."""
    t = t.detach()
    if type(t) is not torch.Tensor:
        t = t.as_subclass(torch.Tensor)
    storage = t.untyped_storage()
    copy = torch.empty(storage.nbytes(), dtype=torch.uint8, device=t.device)
    if storage.nbytes():
        copy.copy_(torch.tensor([], dtype=torch.uint8, device=t.device).set_(storage))
        if t.is_cuda:  # done before the executor may free what it sent (at its next request)
            torch.cuda.current_stream(t.device).synchronize()
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(copy.untyped_storage(), t.storage_offset(), t.shape, t.stride())


def plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is plain data (what a module attribute may be to cross: CONFIG, TUNE_CONFIGS)."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return True
    if depth >= MAX_DEPTH:
        return False
    if isinstance(value, (list, tuple)):
        return len(value) <= MAX_ITEMS and all(plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return len(value) <= MAX_ITEMS and all(isinstance(k, (str, int)) and plain(v, depth + 1) for k, v in value.items())
    return False


def finite_ms(value: Any) -> float:
    """A timing reply as a float (BadReply if it is not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise BadReply(f"the executor answered a timing with {type(value).__name__}")
    return float(value)
