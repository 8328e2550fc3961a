"""The persistent kernel cache: a sub-problem signature solved once per machine.

The search solves each canonical signature once per run (structure-aware
dedupe); this cache makes that hold across runs and across the web app's
workers.  A second run of the same model makes no agent calls for the
signatures already solved, including, when the run was not sandboxed, the
ones no agent could solve (negative entries: ``source`` is None; a
sandboxed child's are not stored, see below).

Layout: one JSON file per key, ``<root>/<key[:2]>/<key>.json``, each holding
``{"format": FORMAT_VERSION, "key": ..., "source_sha256": ..., "entry": {...}}``.
``source_sha256`` is the hash of the entry's kernel source, recorded by the
writer; an entry whose source does not match it (edited after it was
written) is ignored, and a cached kernel is verified again before reuse
anyway (``search.cached``).

Who writes: only the trusted process.  The optimizer child, which runs the
user's model file, sees the cache folder read-only (``lego_core.runtime.jail``); its
:class:`KernelCache` is made with ``forward=`` and sends each entry to the
parent as data (``sandbox_child.forwarder``), and the parent stores it with
:func:`store_forwarded` after checking it: under a key the parent computes
itself from the entry's signature and what it knows of the run, only
kernels (no negative entries), and only a kernel file within the
allow-list of host code (``lego_core.judge.host_allowlist``: the imports, names
and attributes the template agent's files use).  Writes go to a
temporary file in the same folder and are renamed over the target
(``os.replace``), so a reader in another thread or process sees either the
old file, the new one or none, never half of one.  Two writers of the same
key both succeed; the last rename wins, and both wrote the same answer.

Nothing in here fails a run: a corrupt, truncated or other-version file is
a miss (logged), and a folder that cannot be written turns writing off
with one warning (reads still work when the folder is readable).

The key (:func:`cache_key`) holds everything that changes the answer: the
signature, device, dtype, agent, the output-changing config
(``OptimizeConfig.key()``), the torch and Triton versions and a hash of the
code generator's own sources, so an edited template never serves a stale
kernel.

Usage (inspecting a cache by hand)::

    python -m lego_core.search.cache [ROOT]    # counts entries and negative entries
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # 2: source_sha256 recorded by the writer
MAX_SOURCE_CHARS = 1_000_000  # a forwarded kernel source longer than this is not stored
MAX_ENTRY_CHARS = 8_000_000  # nor an entry (transcript included) larger than this

_PACKAGE = Path(__file__).resolve().parent.parent  # lego_core/
# The code generator's sources: every *.py and *.j2 under these folders is
# part of every key.  Tests point this at a temporary copy.
CODEGEN_ROOTS: tuple[Path, ...] = (_PACKAGE / "agents", _PACKAGE / "tree" / "fusion")
CODEGEN_SUFFIXES = (".py", ".j2")
# the verifier's sources: what decides whether a kernel passes (``judge_hash``)
JUDGE_FILES = tuple(f"judge/{name}" for name in ("verify.py", "verify_policy.py", "verify_trace.py", "static_check.py", "edge_inputs.py", "timing_guard.py"))

_KEY_RE = re.compile(r"[0-9a-f]{8,128}")
_SIGNATURE_RE = re.compile(r"[0-9a-f]{8,64}")  # SubProblem.signature: 16 hex digits
_NAME_RE = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]{0,127})?")  # a kernel's Python name (it names files), or none
_AGENT_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def default_cache_dir() -> Path:
    """``$LEGO_CACHE_DIR`` when set, else ``~/.cache/lego/kernels``."""
    env = os.environ.get("LEGO_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "lego" / "kernels"


# ---------------------------------------------------------------------------
# The key


def codegen_sources(roots: tuple[Path, ...] | None = None) -> list[Path]:
    """Every ``*.py`` and ``*.j2`` file under ``roots`` (default
    :data:`CODEGEN_ROOTS`), sorted; ``__pycache__`` is skipped."""
    roots = CODEGEN_ROOTS if roots is None else roots
    found = []
    for root in roots:
        for path in Path(root).rglob("*"):
            if path.suffix in CODEGEN_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                found.append(path)
    return sorted(found)


_codegen_memo: dict[tuple, str] = {}
_codegen_lock = threading.Lock()


def codegen_hash(roots: tuple[Path, ...] | None = None) -> str:
    """sha256 hex of the code generator's sources (names relative to their
    root, and contents).  Memoized on each file's (size, mtime_ns), so it
    reads the files again only after one changed."""
    roots = CODEGEN_ROOTS if roots is None else roots
    return _sources_hash(codegen_sources(roots), roots)


def judge_hash() -> str:
    """sha256 hex of the judge's sources (:data:`JUDGE_FILES`): a cached
    "no kernel passed" is an answer of the judge that gave it, so a changed
    verifier asks the agent again (a cached kernel is verified again anyway)."""
    return _sources_hash([_PACKAGE / name for name in JUDGE_FILES], (_PACKAGE,))


def _sources_hash(files: list[Path], roots: tuple[Path, ...]) -> str:
    stamp = tuple((str(p), st.st_size, st.st_mtime_ns) for p in files for st in [p.stat()])
    with _codegen_lock:
        cached = _codegen_memo.get(stamp)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    for path in files:
        root = next(Path(r) for r in roots if path.is_relative_to(r))
        digest.update(f"{root.name}/{path.relative_to(root).as_posix()}\0".encode())
        digest.update(path.read_bytes())
        digest.update(b"\0")
    value = digest.hexdigest()
    with _codegen_lock:
        _codegen_memo[stamp] = value
    return value


def _library_versions() -> dict:
    """torch and Triton versions, read at call time (tests patch them)."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "none"
    return {"torch": str(torch.__version__), "triton": str(triton_version)}


def _dtype_name(dtype) -> str:
    """``"float32"`` for ``torch.float32`` or ``"float32"``; other names as given."""
    return str(dtype).removeprefix("torch.")


def cache_key(signature: str, device: str, dtype, agent: str, config_key: dict) -> str:
    """The cache key (64 hex characters) of one sub-problem's answer.

    ``signature``: ``SubProblem.signature``; ``device``: where candidates
    were verified and timed (entries hold timings, so a GPU device should
    include its name); ``dtype``: a ``torch.dtype`` or its name; ``agent``:
    the agent's name; ``config_key``: ``OptimizeConfig.key()`` (JSON-ready,
    hashed with sorted keys).  Also hashed: the format version, torch and
    Triton versions, :func:`codegen_hash` and :func:`judge_hash`.  Raises TypeError when
    ``config_key`` is not JSON-serialisable.
    """
    parts = {
        "format": FORMAT_VERSION,
        "signature": signature,
        "device": str(device),
        "dtype": _dtype_name(dtype),
        "agent": agent,
        "config": config_key,
        **_library_versions(),
        "codegen": codegen_hash(),
        "judge": judge_hash(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def run_key(device: str, gpu_name: str | None, dtype, agent: str, config) -> Callable[[str], str]:
    """``signature -> cache key`` (:func:`cache_key`) for one run's sub-problems.

    The one place a run's key is assembled: the optimizer child reads and
    writes entries with it (``search.cached``) and the trusted parent keys
    the entries the child forwards with it (``api``), each from what it knows
    itself.  ``device``: ``"cpu"`` or ``"cuda"``; ``gpu_name``: the CUDA
    device's name (a GPU run's times belong to one GPU model; ignored on the
    CPU); ``dtype``: a ``torch.dtype`` or its name (``"float32"``);
    ``agent``: the agent's name (``agents.agent_name``); ``config``: the
    ``OptimizeConfig`` (its ``key()`` is hashed)."""
    where = f"cuda:{gpu_name}" if device == "cuda" else device
    config_key = config.key()
    return lambda signature: cache_key(signature, where, dtype, agent, config_key)


# ---------------------------------------------------------------------------
# Entries


@dataclasses.dataclass
class CacheEntry:
    """One sub-problem's answer, as the search recorded it.

    ``source``: the verified Triton file, or None when the agent declined or
    every attempt failed verification (a negative entry: the search does not
    ask again).  ``transcript``: ``(role, content)`` messages; ``tokens``:
    spent by the agent; ``passed`` / ``reason`` / ``max_abs_error``: the
    verification result; ``time_ms`` (milliseconds) with ``time_kind``
    ``"measured"`` or ``"estimated"``; ``created``: Unix time in seconds;
    ``origin``: who solved it (e.g. ``"run <id> <model name>"``).
    """

    signature: str
    agent: str
    source: str | None
    kernel_name: str
    transcript: list
    tokens: int
    passed: bool
    reason: str
    max_abs_error: float | None
    time_ms: float | None
    time_kind: str
    created: float = dataclasses.field(default_factory=time.time)
    origin: str = ""

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["transcript"] = [list(m) for m in self.transcript]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "CacheEntry":
        """Raises KeyError / TypeError / ValueError on a malformed entry."""
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in names if n not in data]
        if missing:
            raise KeyError(f"missing fields {missing}")
        entry = cls(**{n: data[n] for n in names})
        if entry.source is not None and not isinstance(entry.source, str):
            raise TypeError("source is neither text nor null")
        if not isinstance(entry.transcript, list):
            raise TypeError("transcript is not a list")
        entry.transcript = [(str(role), str(content)) for role, content in entry.transcript]
        return entry


# ---------------------------------------------------------------------------
# The cache


class KernelCache:
    """Cache entries on disk, shared by threads and processes of one machine.

    ``root``: the folder (None: :func:`default_cache_dir`), created on the
    first write.  ``enabled=False`` (``--no-cache``): :meth:`get` always
    misses and :meth:`put` does nothing.  Counters for the report: ``hits``,
    ``misses`` (every lookup that returned None, disabled ones included)
    and ``writes`` (entries written).  ``forward``: a function that takes
    ``{"key": ..., "entry": {...}}``; when given, :meth:`put` hands each
    entry to it instead of writing (the sandboxed child: its parent writes,
    :func:`store_forwarded`).  Thread-safe.
    """

    def __init__(self, root: Path | str | None = None, enabled: bool = True, forward=None):
        self.root = default_cache_dir() if root is None else Path(root).expanduser()
        self.enabled = enabled
        self.forward = forward  # in the sandboxed child: put() sends the entry to the parent instead of writing
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self.writable = True  # False after a failed write: reads only from then on
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"KernelCache({str(self.root)!r}, enabled={self.enabled})"

    def path(self, key: str) -> Path:
        """The file of ``key``; raises ValueError for a key that is not lowercase hex."""
        if not _KEY_RE.fullmatch(key):
            raise ValueError(f"cache keys are 8 to 128 lowercase hex characters, got {key!r}")
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> CacheEntry | None:
        """The entry stored under ``key``, or None (absent, unreadable,
        corrupt, another format version, or the cache is disabled)."""
        entry = self._read(key) if self.enabled else None
        with self._lock:
            if entry is None:
                self.misses += 1
            else:
                self.hits += 1
        return entry

    def put(self, key: str, entry: CacheEntry) -> None:
        """Store ``entry`` under ``key`` atomically, replacing any earlier one.

        Never raises for the file system: the first failure to write logs a
        warning and turns writing off for this object.  Numpy and torch
        scalars are stored as numbers; an entry holding anything else that
        JSON cannot hold is logged and not stored.  Raises ValueError for a
        malformed key (a caller's bug).
        """
        path = self.path(key)
        if not self.enabled or not self.writable:
            return
        if self.forward is not None:
            self._forward(key, entry)
            return
        try:
            text = json.dumps({"format": FORMAT_VERSION, "key": key, "source_sha256": source_hash(entry.source), "entry": entry.to_dict()}, indent=1, default=_scalar)
        except (TypeError, ValueError) as exc:
            log.error("kernel cache: entry for %s is not JSON-ready (%s); not stored", entry.signature, exc)
            return
        try:
            _write_atomically(path, text)
        except OSError as exc:
            self._stop_writing(exc)
            return
        with self._lock:
            self.writes += 1

    def _forward(self, key: str, entry: CacheEntry) -> None:
        try:
            data = json.loads(json.dumps(entry.to_dict(), default=_scalar))
        except (TypeError, ValueError) as exc:
            log.error("kernel cache: entry for %s is not JSON-ready (%s); not stored", entry.signature, exc)
            return
        try:
            self.forward({"key": key, "entry": data})
        except OSError as exc:
            self._stop_writing(exc)
            return
        with self._lock:
            self.writes += 1

    def stats(self) -> dict:
        """Counters and settings, JSON-ready (for the report)."""
        with self._lock:
            return {"root": str(self.root), "enabled": self.enabled, "writable": self.writable, "hits": self.hits, "misses": self.misses, "writes": self.writes}

    def _read(self, key: str) -> CacheEntry | None:
        path = self.path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("kernel cache: cannot read %s (%s); treated as a miss", path, exc)
            return None
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            if data.get("format") != FORMAT_VERSION:
                raise ValueError(f"format version {data.get('format')!r}, this library reads {FORMAT_VERSION}")
            if data.get("key") != key:
                raise ValueError(f"file holds key {data.get('key')!r}")
            entry = CacheEntry.from_dict(data["entry"])
            if data.get("source_sha256") != source_hash(entry.source):
                raise ValueError("its kernel source does not match the hash recorded when it was written (edited since)")
            return entry
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("kernel cache: ignoring %s (%s); treated as a miss", path, exc)
            return None

    def _stop_writing(self, exc: OSError) -> None:
        with self._lock:
            if not self.writable:
                return
            self.writable = False
        log.warning("kernel cache: cannot write to %s (%s); continuing without storing kernels", self.root, exc)


def source_hash(source: str | None) -> str | None:
    """sha256 hex of a kernel source (None for a negative entry's)."""
    return None if source is None else hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def store_forwarded(cache: KernelCache, message: dict, key_for: Callable[[str], str], origin: str = "") -> bool:
    """Store a kernel the sandboxed child sent (``{"key", "entry"}``) in
    ``cache``, under a key this process computes itself.

    ``key_for(signature)``: the key of a signature for this run, computed by
    the caller from what it knows (device, dtype, agent, config, versions
    and generator hash: :func:`cache_key`); only the signature is taken
    from the entry, and the child's own ``key`` must equal the one computed
    (else the entry is refused: a child that keys entries otherwise is
    wrong or lying).  The entry is stored only when it parses, is within
    :data:`MAX_ENTRY_CHARS`, holds a kernel (a negative entry, "no kernel
    passed", is never taken from the child: it would make later runs skip
    the signature) of at most :data:`MAX_SOURCE_CHARS` that passes the
    static check and allow-list of host code
    (``static_check.unsafe_host_code``).  ``origin`` and ``created`` are
    this process's (``origin``: e.g. ``"run <id> of <model>"``), not the
    child's.  A refused entry is logged and dropped.  Returns whether it
    was stored.  Runs in the trusted parent; never raises for a bad message."""
    from lego_core.judge.static_check import unsafe_host_code

    try:
        if len(json.dumps(message.get("entry"))) > MAX_ENTRY_CHARS:
            raise ValueError(f"entry larger than {MAX_ENTRY_CHARS} characters")
        entry = CacheEntry.from_dict(message.get("entry"))
        if not isinstance(entry.signature, str) or not _SIGNATURE_RE.fullmatch(entry.signature):
            raise ValueError("malformed signature")
        key = key_for(entry.signature)
        if message.get("key") != key:
            raise ValueError("its key is not the one this process computes for its signature")
        if entry.source is None:
            log.info("kernel cache: the optimizer process's negative entry for %s is not stored (only kernels are taken from it)", entry.signature)
            return False
        if not isinstance(entry.source, str) or len(entry.source) > MAX_SOURCE_CHARS:
            raise ValueError(f"kernel source longer than {MAX_SOURCE_CHARS} characters")
        if entry.passed is not True:
            raise ValueError("passed does not agree with source")
        problem = unsafe_host_code(entry.source)
        if problem:
            raise ValueError(f"kernel source refused: {problem}")
        if not isinstance(entry.kernel_name, str) or not _NAME_RE.fullmatch(entry.kernel_name):
            raise ValueError("malformed kernel name")
        if not isinstance(entry.agent, str) or not _AGENT_RE.fullmatch(entry.agent):
            raise ValueError("malformed agent name")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("kernel cache: the optimizer process sent an entry that is not stored (%s)", exc)
        return False
    entry.origin, entry.created = origin, time.time()
    cache.put(key, entry)
    return True


def _scalar(value):
    """``json.dumps`` fallback: numpy / torch scalars become Python numbers."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON-ready")


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it over
    ``path`` (atomic on POSIX and Windows).  Raises OSError; the temporary
    file is removed on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem[:16]}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; other workers of the machine read these
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else default_cache_dir()
    files = sorted(p for p in root.glob("??/*.json") if _KEY_RE.fullmatch(p.stem)) if root.is_dir() else []
    cache = KernelCache(root)
    entries = [cache.get(p.stem) for p in files]
    good = [e for e in entries if e is not None]
    print(f"{root}: {len(files)} files, {len(good)} readable, {sum(e.source is None for e in good)} negative")
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    raise SystemExit(_main(sys.argv[1:]))
