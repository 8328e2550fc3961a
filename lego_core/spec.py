"""What the user asks for, parsed without importing torch.

``ProblemSpec`` (model file, overrides, dtype, device), ``parse_overrides``
and ``ProblemError`` live here so that the web process can validate an upload
form without loading torch; ``lego_core.problem`` does the actual loading.
"""
from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

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


def decode_source(data: bytes, path: str | None = None) -> str:
    """A model file's bytes as text: UTF-8 (a leading UTF-8 byte-order mark
    dropped), with no NUL byte.  Anything else raises ProblemError saying
    that the file is not UTF-8 text, where (the line of the first bad
    byte, when there is one to name) and how to convert it; a UTF-16 or
    UTF-32 file (Windows "Unicode") is named as such.  Pure bytes work, no
    torch: the upload form checks a file with it before a run is made."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise ProblemError(f"the file is not UTF-8 text: it is {name} (it starts with a {name} byte-order mark)",
                               path, 1, hint=UTF8_HINT)
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


def syntax_error_text(exc: SyntaxError) -> str:
    """``line 6: invalid syntax`` for a SyntaxError, or only its message when
    Python gave no line (``source code string cannot contain null bytes``):
    never ``line None``."""
    return f"line {exc.lineno}: {exc.msg}" if exc.lineno else str(exc.msg or exc)


@dataclasses.dataclass(frozen=True)
class ProblemSpec:
    """What the user asked for: a model file, constant overrides, dtype, device.

    ``overrides`` maps module-level constant names to new values (int, float
    or bool).  ``dtype`` is one of ``fp32``/``bf16``/``fp16``; ``device`` is
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


def parse_overrides(items: list[str] | None) -> dict[str, int | float | bool]:
    """Parse ``["batch_size=2", "eps=1e-5"]`` into ``{"batch_size": 2, "eps": 1e-05}``.

    Values are ints (64-bit), finite floats or ``true``/``false``.  Raises
    ProblemError for an item without ``=``, a name that is not an identifier,
    a value that is not a number, an integer outside -2**63..2**63-1, or a
    float that is nan or infinite (``inf``, ``1e400``).
    """
    result: dict[str, int | float | bool] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name.isidentifier():
            raise ProblemError(f"override {item!r} is not of the form name=value.", hint="write it as name=value, e.g. batch_size=2.")
        result[name] = _parse_value(name, text)
    return result


INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # an override must fit a 64-bit integer (a tensor size, a seed)
_WHOLE = re.compile(r"[+-]?[0-9][0-9_]*")


def _parse_value(name: str, text: str) -> int | float | bool:
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
        raise ProblemError(f"override {name}={_short(text)!r} is not a number.", hint=f"give {name} an integer or a float.") from None
    if not math.isfinite(number):
        raise ProblemError(
            f"override {name}={_short(text)!r} is not a finite number.",
            hint=f"give {name} a finite value: nan, inf and numbers beyond ±1.8e308 cannot be used.",
        )
    return number


def _short(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text)} characters)"


def _out_of_range(name: str, text: str) -> ProblemError:
    return ProblemError(
        f"override {name}={_short(text)!r} is out of range.",
        hint=f"give {name} a whole number from -2**63 to 2**63-1 (it must fit in 64 bits).",
    )


def new_run_id() -> str:
    """A fresh run id: 8 hex digits."""
    import uuid

    return uuid.uuid4().hex[:8]
