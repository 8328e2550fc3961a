"""LEGO: an LLM-enabled hierarchical optimizer for tensor computation graphs.

Public API: ``optimize``, ``ProblemSpec``, ``ProblemError``,
``parse_overrides``, ``OptimizeConfig`` (with ``SandboxLimits``), ``OptimizeError`` and the events in
``lego_core.events``.  This package never imports Django.
"""
from lego_core.api import optimize
from lego_core.errors import OptimizeError
from lego_core.config import OptimizeConfig, SandboxLimits
from lego_core.load.spec import ProblemError, ProblemSpec, parse_overrides
from lego_core.runtime.sandbox import ChildCrashed

__all__ = [
    "ChildCrashed",
    "OptimizeConfig",
    "OptimizeError",
    "ProblemError",
    "ProblemSpec",
    "SandboxLimits",
    "optimize",
    "parse_overrides",
]
