"""The LLM agent's prompts, rendered from ``templates/*.j2`` (Jinja2).

``system.j2``: the rules of a kernel file (the ``launch(*inputs, out=None)``
entry point the verifier calls, what host code may do, the allow-list every
kernel file passes, ``lego_core.judge.host_allowlist``: imports, node types,
no state kept between calls) and a short example file that passes it.  ``kernel.j2``: one sub-problem: its reference ATen source, the
exact shape, stride and dtype of every input and output, the target device
and GPU.  ``repair.j2``: a retry: the previous file and the verifier's
one-line reason (where and by how much it missed, or why it was refused),
and the time to beat when one is known.  The verifier's messages name input
sets by one-way labels and never hold seeds or expected values, so nothing
here lets a model learn what it is checked on.

Usage: python -m lego_core.agents.llm.prompt MODEL.py [k=v ...]  (prints the first leaf's prompt)
"""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import jinja2

from lego_core.tree.subproblem import SubProblem


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    loader = jinja2.FileSystemLoader(Path(__file__).parent / "templates")
    return jinja2.Environment(loader=loader, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)


def describe(spec) -> str:
    """One line for a boundary value: ``tensor shape [2, 3], stride [3, 1], float32`` or a scalar."""
    if spec is None:
        return "not a tensor (a Python scalar or None, passed as the reference receives it)"
    dtype = str(spec.dtype).removeprefix("torch.")
    return f"tensor shape {list(spec.shape)}, stride {list(spec.stride)}, {dtype}"


def _device(sub: SubProblem) -> str:
    for node in sub.inputs:
        val = node.meta.get("val")
        if hasattr(val, "device"):
            return val.device.type
    return "cpu"


def _dtype(sub: SubProblem) -> str:
    specs = [s for s in sub.input_specs + sub.output_specs if s is not None and s.dtype.is_floating_point]
    return str(specs[0].dtype).removeprefix("torch.") if specs else "float32"


def system_prompt() -> str:
    """The rules every kernel file follows (``templates/system.j2``)."""
    return _env().get_template("system.j2").render().strip()


def kernel_prompt(sub: SubProblem, target_gpu: str = "H200") -> str:
    """The first prompt for ``sub`` (``templates/kernel.j2``)."""
    inputs = [{"name": n.name, "describe": describe(s)} for n, s in zip(sub.inputs, sub.input_specs)]
    outputs = [{"describe": describe(s)} for s in sub.output_specs]
    return _env().get_template("kernel.j2").render(
        sub_id=sub.id, label=sub.label, module_path=sub.module_path, kind=sub.kind, ops=sub.ops,
        reference=sub.reference_source("reference"), inputs=inputs, outputs=outputs,
        device=_device(sub), target_gpu=target_gpu, dtype=_dtype(sub),
        interpret=os.environ.get("TRITON_INTERPRET") == "1",
    ).strip()


def repair_prompt(attempt: int, reason: str, previous: str | None, best_ms: float | None = None, library_ms: float | None = None) -> str:
    """A retry after attempt ``attempt`` failed with the verifier's ``reason`` (``templates/repair.j2``)."""
    return _env().get_template("repair.j2").render(
        attempt=attempt, reason=reason, previous=previous, best_ms=best_ms, library_ms=library_ms
    ).strip()


def main(argv: list[str]) -> int:
    from lego_core.load.capture import capture_graph
    from lego_core.load.problem import ProblemSpec, load_problem, parse_overrides
    from lego_core.tree.fusion_tree import build_tree

    if not argv:
        print(__doc__.strip().splitlines()[-1])
        return 2
    tree = build_tree(capture_graph(load_problem(ProblemSpec(argv[0], parse_overrides(argv[1:])))))
    leaf = tree.leaves()[0]
    print(system_prompt(), kernel_prompt(leaf.sub), sep="\n\n---\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
