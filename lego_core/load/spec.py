"""What the user asks for, parsed without importing torch.

``ProblemSpec`` (model file, overrides, dtype, device), ``parse_overrides``
and ``ProblemError`` live here so that the web process can validate an upload
form without loading torch; ``lego_core.load.problem`` does the actual loading.
"""
from __future__ import annotations

import ast
import dataclasses
import math
import re
from pathlib import Path

from lego_core.load.overrides import MAX_DEPTH, MAX_ITEMS

DTYPE_NAMES = ("fp32", "bf16", "fp16")
TORCH_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # str(torch dtype) without "torch.", no torch import
DEVICES = ("cpu", "cuda")


class ProblemError(Exception):
    """A problem file or its options cannot be used.

    ``message`` says what is wrong, ``path`` and ``line`` where (line may be
    None), ``hint`` how to fix it.  ``str()`` gives all of it on one line,
    ready to show on a page or a terminal.
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None, hint: str = ""):
        super().__init__(message, path, line, hint)
        self.message, self.path, self.line, self.hint = message, path, line, hint

    def __str__(self) -> str:
        where = ""
        if self.path:
            where = f"{Path(self.path).name}:{self.line}: " if self.line else f"{Path(self.path).name}: "
        message = self.message if self.message.rstrip().endswith((".", "!", "?")) else self.message.rstrip() + "."
        return f"{where}{message}" + (f" Fix: {self.hint}" if self.hint else "")


UTF8_HINT = (
    "save the file as UTF-8 (in most editors: Save As, encoding UTF-8), or convert it, e.g. "
    "`iconv -f LATIN1 -t UTF-8 model.py > model_utf8.py` (-f names the encoding it has now)."
)

_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"),
)


def read_source(path: str) -> str:
    """The model file at ``path`` as text (:func:`decode_source`).  Raises
    ProblemError when it does not exist, cannot be read (a folder, no
    permission) or is not UTF-8 text.  No torch: the CLI checks the file
    with it before it starts the optimizer's process."""
    from pathlib import Path

    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ProblemError("no such file.", path, hint="check the path of the model file.") from None
    except OSError as exc:
        raise ProblemError(f"cannot read the file ({exc.strerror or exc}).", path, hint="check that it is a readable file.") from None
    return decode_source(data, path)


NOT_SOURCE_HINT = (
    "upload the model's Python source file (text: `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`); "
    "renaming another file to .py does not make it one."
)

# the first bytes of common binary formats: (signature, what it is).  A signature of printable
# characters only (%PDF-, GIF89a) counts only where the bytes are binary too (GIF89a alone is a Python name)
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"), (b"%PDF-", "a PDF document"), (b"PK\x03\x04", "a zip archive (or a file in a zip "
    "format: a torch.save checkpoint, a .docx, a wheel)"), (b"PK\x05\x06", "an empty zip archive"),
    (b"\x7fELF", "an ELF executable or library"), (b"\x1f\x8b", "a gzip archive"), (b"BZh", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"), (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"), (b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (b"SQLite format 3\x00", "an SQLite database"), (b"\x93NUMPY", "a NumPy array file"), (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"MZ", "a Windows executable"), (b"\xcf\xfa\xed\xfe", "a Mach-O executable"), (b"\xca\xfe\xba\xbe", "a Java class or Mach-O file"),
    (b"\x00asm", "a WebAssembly module"), (b"RIFF", "a RIFF file (a WAV, AVI or WebP)"), (b"\x80\x02", "a Python pickle"),
    (b"\x80\x04\x95", "a Python pickle"), (b"\x80\x05\x95", "a Python pickle"), (b"OggS", "an Ogg media file"),
    (b"fLaC", "a FLAC audio file"), (b"ID3", "an MP3 audio file"), (b"II*\x00", "a TIFF image"), (b"MM\x00*", "a TIFF image"),
)
_PYC = "a compiled Python file (.pyc)"
_SAMPLE = 8192  # bytes looked at to tell binary data from text
_TEXT_CONTROLS = frozenset(b"\t\n\r\f\v\x1b")  # control bytes that text holds


def _printable(signature: bytes) -> bool:
    return all(0x20 <= byte < 0x7F for byte in signature)


def binary_kind(data: bytes) -> str | None:
    """What ``data`` is when it is binary data, not text (``"a PNG image"``,
    or ``"binary data"`` when no known signature says more), else None.

    Told by the first bytes' signature (images, archives, executables,
    pickles, a compiled Python file) or by the first 8 KB: NUL bytes that
    are not a UTF-16 text's (one beside every letter) in bytes that are not
    UTF-8 (or many of them), or more than one byte in ten a control
    character no text holds.  Text in another encoding (Latin-1,
    Windows-1252, UTF-16 without a byte-order mark) and UTF-8 text with a
    stray NUL are not binary: they are said to be text in the wrong
    encoding (:func:`decode_source`)."""
    sample = data[:_SAMPLE]
    generic = _looks_binary(sample)
    for magic, kind in _MAGIC:
        if data.startswith(magic) and (generic or not _printable(magic)):
            return kind
    if len(data) >= 16 and data[2:4] == b"\r\n" and data[4:8] in (b"\x00\x00\x00\x00", b"\x01\x00\x00\x00", b"\x03\x00\x00\x00"):
        return _PYC  # the magic number of one Python version, then its flags
    return "binary data" if generic else None


def _looks_binary(sample: bytes) -> bool:
    """Whether the first bytes of a file are binary data (:func:`binary_kind`)."""
    if not sample:
        return False
    nuls = sample.count(0)
    if nuls:
        half = len(sample) / 2
        even, odd = sample[0::2].count(0), sample[1::2].count(0)
        wide = max(even, odd) >= 0.3 * half and min(even, odd) <= 0.05 * half  # UTF-16 text without its mark
        if not wide and (_not_utf8(sample) or (nuls >= 64 and nuls >= 0.01 * len(sample))):
            return True
    controls = sum(1 for byte in sample if (byte < 0x20 or byte == 0x7F) and byte not in _TEXT_CONTROLS and byte != 0)
    return controls > 0.1 * len(sample)


def _not_utf8(sample: bytes) -> bool:
    """Whether ``sample`` (maybe cut inside a character) is not UTF-8."""
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(sample) - 3  # a character cut at the end of the sample is not an error
    return False


def decode_source(data: bytes, path: str | None = None) -> str:
    """A model file's bytes as text: UTF-8 (a leading UTF-8 byte-order mark
    dropped), with no NUL byte.  Anything else raises ProblemError: for
    binary data (an image, an archive, an executable renamed ``.py``:
    :func:`binary_kind`) that the file is not a Python source file; for
    text, that the file is not UTF-8 text, where (the line of the first bad
    byte, when there is one to name) and how to convert it; a UTF-16 or
    UTF-32 file (Windows "Unicode") is named as such.  Pure bytes work, no
    torch: the upload form checks a file with it before a run is made."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise ProblemError(f"the file is not UTF-8 text: it is {name} (it starts with a {name} byte-order mark)",
                               path, 1, hint=UTF8_HINT)
    kind = binary_kind(data)
    if kind is not None:
        said = f"it is {kind}, by its first bytes" if kind != "binary data" else "it holds binary data, bytes no text file holds"
        raise ProblemError(f"the file is not a Python source file: {said}", path, hint=NOT_SOURCE_HINT)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ProblemError(f"the file is not UTF-8 text: byte 0x{data[exc.start]:02x} is not UTF-8 "
                           "(the file was saved in another encoding, such as Latin-1 or Windows-1252)",
                           path, line, hint=UTF8_HINT) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ProblemError("the file is not UTF-8 text: it holds null bytes, which Python source cannot "
                           "(a file saved as UTF-16 has one beside every letter)",
                           path, line, hint=UTF8_HINT)
    return text


def syntax_problem(source: str, path: str | None = None) -> ProblemError | None:
    """The ProblemError for a model file whose text does not compile
    (``syntax error: <Python's message>.`` at its line, with the fix), or
    None when it compiles.  Compiled only, never run (no torch): the upload
    form, the JSON API, the command line and the load itself say the same."""
    try:
        compile(source, path or "<model>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = exc.lineno or None
        return ProblemError(f"syntax error: {exc.msg}.", path, line,
                            hint="correct the Python syntax on that line." if line else "correct the Python syntax.")
    except (ValueError, MemoryError, RecursionError) as exc:  # nested too deep for the compiler
        return ProblemError(f"the file cannot be compiled: {type(exc).__name__}"
                            + (f": {exc}" if str(exc) else " (expressions nested too deeply)") + ".",
                            path, hint="write the deeply nested expressions in several statements.")
    return None


def syntax_error_text(exc: SyntaxError) -> str:
    """``line 6: invalid syntax`` for a SyntaxError, or only its message when
    Python gave no line (``source code string cannot contain null bytes``):
    never ``line None``."""
    return f"line {exc.lineno}: {exc.msg}" if exc.lineno else str(exc.msg or exc)


@dataclasses.dataclass(frozen=True)
class ProblemSpec:
    """What the user asked for: a model file, constant overrides, dtype, device.

    ``overrides`` maps module-level constant names to new values (int, float
    or bool, or a list or tuple of them: :func:`parse_overrides`).  ``dtype`` is one of ``fp32``/``bf16``/``fp16``; ``device`` is
    ``cpu`` or ``cuda``.  Plain data, so it pickles into a child process.
    Raises ProblemError for an unknown dtype or device.
    """

    path: str
    overrides: dict = dataclasses.field(default_factory=dict)
    dtype: str = "fp32"
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPE_NAMES:
            raise ProblemError(f"unknown dtype {self.dtype!r}.", hint=f"use one of {', '.join(DTYPE_NAMES)}.")
        if self.device not in DEVICES:
            raise ProblemError(f"unknown device {self.device!r}.", hint=f"use one of {', '.join(DEVICES)}.")

    @property
    def torch_dtype(self):
        """The torch dtype (imports torch)."""
        from lego_core.dtypes import as_dtype

        return as_dtype(self.dtype)

    @property
    def name(self) -> str:
        return Path(self.path).stem


def parse_overrides(items: list[str] | None) -> dict:
    """Parse ``["batch_size=2", "eps=1e-5", "sizes=[64,32]"]`` into
    ``{"batch_size": 2, "eps": 1e-05, "sizes": [64, 32]}``.

    Values are ints (64-bit), finite floats, ``true``/``false``, or a list
    (``[64,32]``) or tuple (``(3,3)``, ``(3,)``) of them written as Python
    writes it, nested at most ``MAX_DEPTH`` deep with at most ``MAX_ITEMS``
    numbers.  A list is always written in its brackets: ``sizes=64,32`` is
    refused, since the upload form separates overrides with commas.
    Raises ProblemError for an item without ``=``, a name that is not an
    identifier, a value that is not a number (nor such a list or tuple), an
    integer outside -2**63..2**63-1, or a float that is nan or infinite
    (``inf``, ``1e400``); an element's error names it (``sizes[1]``).
    """
    result: dict = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name.isidentifier():
            raise ProblemError(f"override {item!r} is not of the form name=value.", hint="write it as name=value, e.g. batch_size=2.")
        result[name] = _parse_value(name, text)
    return result


INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # an override must fit a 64-bit integer (a tensor size, a seed)
_WHOLE = re.compile(r"[+-]?[0-9][0-9_]*")
MAX_SEQUENCE_TEXT = 40 * MAX_ITEMS  # characters of one list or tuple override, at most (parsed only below it)


def _parse_value(name: str, text: str):
    """A list or tuple when ``text`` starts with ``[`` or ``(``, else a
    number or true/false (:func:`_parse_number`)."""
    if text.startswith(("[", "(")):
        return _parse_sequence(name, text)
    return _parse_number(name, text)


def _parse_number(name: str, text: str) -> int | float | bool:
    """``true``/``false``, a 64-bit integer or a finite float; ProblemError
    for anything else (not a number, out of range, nan or infinite)."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        value = int(text)
    except ValueError:
        if _WHOLE.fullmatch(text):  # too many digits for int() itself
            raise _out_of_range(name, text) from None
    else:
        if not INT_MIN <= value <= INT_MAX:
            raise _out_of_range(name, text)
        return value
    try:
        number = float(text)
    except ValueError:
        hint = f"give {name} an integer or a float."
        if "," in text:  # sizes=64,32: a list without its brackets
            hint = (f"give {name} an integer or a float; a list is written in square brackets, {name}=[{text}], "
                    f"a tuple in parentheses, {name}=({text}) (on a shell, quoted: --set '{name}=[{text}]').")
        raise ProblemError(f"override {name}={shorten(text)!r} is not a number.", hint=hint) from None
    if not math.isfinite(number):
        raise ProblemError(
            f"override {name}={shorten(text)!r} is not a finite number.",
            hint=f"give {name} a finite value: nan, inf and numbers beyond ±1.8e308 cannot be used.",
        )
    return number


SEQUENCE_HINT = "write it as Python does: {name}=[64,32] for a list, {name}=(3,3) for a tuple, {name}=(3,) for a one-element tuple."


def _parse_sequence(name: str, text: str) -> list | tuple:
    """``[64, 32]`` / ``(3, 3)`` / ``[(1, 2), (3, 4)]``: Python's list and
    tuple syntax, each element read as one override value (so ``true``,
    ``1_000`` and ``-1`` work as they do alone, and ``nan`` is refused with
    the element named: ``sizes[1]``).  ProblemError for text that does not
    parse, is not a list or tuple (``(3)`` is the number 3), is nested deeper
    than ``MAX_DEPTH`` or holds more than ``MAX_ITEMS`` numbers."""
    if len(text) > MAX_SEQUENCE_TEXT:
        raise ProblemError(f"override {name}={shorten(text)!r} is too long ({len(text)} characters).",
                           hint=f"give {name} at most {MAX_ITEMS} numbers.")
    if _bracket_depth(text) > 8 * MAX_DEPTH:  # Python's parser gives up on ~200 levels with "does not parse"
        raise _too_deep(name, text)
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise ProblemError(f"override {name}={shorten(text)!r} is not a list or tuple of numbers: it does not parse.",
                           hint=SEQUENCE_HINT.format(name=name)) from None
    if not isinstance(tree, (ast.List, ast.Tuple)):
        raise ProblemError(f"override {name}={shorten(text)!r} is not a list or tuple of numbers.", hint=SEQUENCE_HINT.format(name=name))
    numbers = 0

    def build(node: ast.expr, where: str, depth: int):
        nonlocal numbers
        if isinstance(node, (ast.List, ast.Tuple)):
            if depth >= MAX_DEPTH:
                raise _too_deep(name, text)
            items = [build(element, f"{where}[{k}]", depth + 1) for k, element in enumerate(node.elts)]
            return items if isinstance(node, ast.List) else tuple(items)
        numbers += 1
        if numbers > MAX_ITEMS:
            raise ProblemError(f"override {name}={shorten(text)!r} holds more than {MAX_ITEMS} numbers.",
                               hint=f"give {name} at most {MAX_ITEMS} numbers.")
        return _parse_number(where, ast.get_source_segment(text, node) or "")

    return build(tree, name, 0)


def _bracket_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``(`` in ``text``."""
    depth = deepest = 0
    for char in text:
        if char in "[(":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]":
            depth -= 1
    return deepest


def _too_deep(name: str, text: str) -> ProblemError:
    return ProblemError(f"override {name}={shorten(text)!r} is nested more than {MAX_DEPTH} deep.",
                        hint=f"give {name} lists or tuples nested at most {MAX_DEPTH} deep.")


def format_override(value) -> str:
    """An override value written as it is typed (``parse_overrides`` reads it
    back to the same value and type): ``true``, ``2``, ``1e-05``,
    ``[64, 32]``, ``(3, 3)``, ``(3,)``.  A string (a value stored as text,
    :func:`overrides_to_json`) is returned as it is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(format_override(item) for item in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(format_override(item) for item in value) + ("," if len(value) == 1 else "") + ")"
    return value if isinstance(value, str) else repr(value)


def _holds_tuple(value) -> bool:
    return isinstance(value, tuple) or (isinstance(value, list) and any(_holds_tuple(item) for item in value))


def overrides_to_json(overrides: dict) -> dict:
    """``overrides`` as JSON can hold them without changing their type: a
    value that is or holds a tuple becomes its text (``"(3, 3)"``, JSON
    has no tuple and would make it a list, which the file's tuple constant
    refuses); numbers, booleans and lists of them stay as they are.  What
    the report, the run's events and the web app's database store;
    :func:`overrides_from_json` reads it back."""
    return {name: format_override(value) if _holds_tuple(value) else value for name, value in overrides.items()}


def overrides_from_json(stored: dict | None) -> dict:
    """The overrides :func:`overrides_to_json` stored: text values parsed back
    (``"(3, 3)"`` -> ``(3, 3)``), the others as they are.  ProblemError for
    a text that is not an override value."""
    return {name: _parse_value(name, value) if isinstance(value, str) else value for name, value in (stored or {}).items()}


def shorten(text: str) -> str:
    """``text`` itself, or its start and end when it is longer than 40 characters."""
    return text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text)} characters)"


def _out_of_range(name: str, text: str) -> ProblemError:
    return ProblemError(
        f"override {name}={shorten(text)!r} is out of range.",
        hint=f"give {name} a whole number from -2**63 to 2**63-1 (it must fit in 64 bits).",
    )


def new_run_id() -> str:
    """A fresh run id: 8 hex digits."""
    import uuid

    return uuid.uuid4().hex[:8]
