"""The Jinja environment every generated Python file is rendered with.

``code_templates(folder)`` loads the ``*.j2`` files of ``folder``
(a template agent's kernel files, ``compose``'s ``model_new.py.j2``) with
the settings generated source needs: ``trim_blocks`` / ``lstrip_blocks``, so
a ``{% ... %}`` line leaves no blank line or indent behind; the trailing
newline kept; ``StrictUndefined``, so a value the caller forgot raises
``jinja2.UndefinedError`` instead of rendering as an empty string.
"""
from __future__ import annotations

from pathlib import Path

import jinja2


def code_templates(folder: Path) -> jinja2.Environment:
    """A Jinja environment over the templates in ``folder`` (settings above)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
