"""No server paths in what users see.

``lego_core`` reports absolute paths (``run_finished.out_dir``,
``run_failed.path``, file names in an error's message or traceback).  A
viewer, a share-link holder or a report.html reader has no business knowing
where the server keeps its files, so every string of a run's events, its
report and its error message goes through ``scrub`` before it is stored and
again before it is shown (runs stored before this existed):

- the run's own folders (``MEDIA_ROOT/runs/<id>/``, its ``output/`` and
  ``upload/``) become relative: ``kernels/sp1.py``, ``model.py``; the
  output folder itself is ``.``;
- ``MEDIA_ROOT``, ``LEGO_VAR_DIR``, the kernel cache (``LEGO_CACHE_DIR``,
  which may live outside ``var/``), the examples (``LEGO_EXAMPLES_DIR``), the
  repository, the Python installation (site-packages, the standard library),
  the temporary folder and the home folder become short names (``media/``,
  ``var/``, ``kernel-cache/``, ``examples/``, ``lego_core/x.py``,
  ``torch/nn/...``, ``tmp/``, ``~/``).

Only these known prefixes are replaced, so kernel source and transcripts
that merely contain slashes are left as they were.
"""
from __future__ import annotations

import functools
import os
import re
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings


def _forms(path: str | Path) -> list[str]:
    """``path`` as written and as resolved (without a trailing slash), longest first."""
    text = os.path.abspath(str(path)).rstrip("/")
    real = os.path.realpath(text).rstrip("/")
    return sorted({text, real} - {""}, key=len, reverse=True)


@functools.lru_cache(maxsize=8)
def _server_prefixes(media: str, var: str, base: str, cache: str = "", examples: str = "") -> tuple[tuple[str, str, str], ...]:
    """``(prefix, replacement of prefix/, replacement of the bare prefix)`` for the server's own folders."""
    table: list[tuple[str, str, str]] = []
    for path, as_dir, as_name in (
        (media, "media/", "media"),
        (var, "var/", "var"),
        (cache, "kernel-cache/", "kernel-cache"),
        (examples, "examples/", "examples"),
        (base, "", "."),
        (sysconfig.get_paths().get("purelib", ""), "", "site-packages"),
        (sysconfig.get_paths().get("platlib", ""), "", "site-packages"),
        (sysconfig.get_paths().get("stdlib", ""), "", "python"),
        (sys.prefix, "python/", "python"),
        (tempfile.gettempdir(), "tmp/", "tmp"),
        (os.path.expanduser("~"), "~/", "~"),
    ):
        if path and path != "/":
            table += [(form, as_dir, as_name) for form in _forms(path) if form not in ("", "/")]
    return tuple(table)


def prefixes(run_id) -> list[tuple[str, str, str]]:
    """Every prefix ``scrub`` replaces for run ``run_id``, longest first."""
    var = str(getattr(settings, "VAR_DIR", "") or "")
    cache, examples = (str(getattr(settings, name, "") or "") for name in ("LEGO_CACHE_DIR", "LEGO_EXAMPLES_DIR"))
    return _prefixes(str(settings.MEDIA_ROOT), var, str(getattr(settings, "BASE_DIR", "") or ""), str(run_id), cache, examples)


@functools.lru_cache(maxsize=256)
def _prefixes(media: str, var: str, base: str, run_id: str, cache: str = "", examples: str = "") -> list[tuple[str, str, str]]:
    run_dir = Path(media) / "runs" / run_id
    own = []
    for path, as_dir, as_name in ((run_dir / "output", "", "."), (run_dir / "upload", "", "."), (run_dir, "", ".")):
        own += [(form, as_dir, as_name) for form in _forms(path)]
    return sorted(own + list(_server_prefixes(media, var, base, cache, examples)), key=lambda item: len(item[0]), reverse=True)


def scrub_text(text: str, table: list[tuple[str, str, str]]) -> str:
    """``text`` with each prefix of ``table`` replaced (``prefix/`` by its
    folder replacement, the bare prefix by its name)."""
    if "/" not in text:
        return text
    for prefix, as_dir, as_name in table:
        if prefix in text:
            text = text.replace(prefix + "/", as_dir)
            text = re.sub(re.escape(prefix) + r"(?![\w.+-])", as_name, text)
    return text


def scrub(value: Any, run_id) -> Any:
    """A copy of ``value`` (JSON-like: dicts, lists, strings) with server
    paths made relative or replaced by short names in every string."""
    table = prefixes(run_id)

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return scrub_text(item, table)
        if isinstance(item, dict):
            return {key: walk(val) for key, val in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(val) for val in item]
        return item

    return walk(value)
