"""The template agent's dispatcher: a fusion group's kind picks the code generator that writes its kernel file.

One generator per template, each in its own module, none importing this one:

- ``pointwise`` and ``row_reduction``: ``pointwise_codegen`` (Triton tutorials
  01-vector-add and 02-fused-softmax);
- ``gemm_epilogue``: ``gemm_codegen`` (03-matrix-multiplication);
- ``conv_bn``: ``conv_codegen`` (library convolution with folded weights);
- ``attention``: ``attention_codegen`` (06-fused-attention, FlashAttention-2);
- ``depthwise_conv1d`` and ``scan``: ``sequence_codegen``.

What they share (the Jinja environment, names, the pointwise emitter) is in
``kernel_source``.  ``generate(sp)`` returns the kernel file's source or
raises Unsupported; ``launch_config(group)`` one line for transcripts.
"""
from __future__ import annotations

from lego_core.agents.template import attention_codegen, conv_codegen, gemm_codegen, pointwise_codegen, sequence_codegen
from lego_core.agents.template.expressions import Unsupported
from lego_core.agents.template.rounding import with_helper
from lego_core.tree.subproblem import SubProblem

# fusion group kind -> the module generating its kernel files
GENERATORS = {
    "pointwise": pointwise_codegen,
    "row_reduction": pointwise_codegen,
    "gemm_epilogue": gemm_codegen,
    "conv_bn": conv_codegen,
    "attention": attention_codegen,
    "depthwise_conv1d": sequence_codegen,
    "scan": sequence_codegen,
}
_ATTEMPTED_UNFUSABLE = ("attention", "depthwise_conv1d", "scan")  # their generators check the group themselves


def generate(sp: SubProblem) -> str:
    """Triton source (one importable file with ``launch``) for a fusable leaf.

    bf16 outputs are rounded to nearest even before their store under the
    interpreter (``rounding``).  Raises Unsupported when the group is not
    fusable, an output or input is not a single tensor, or an op uses an
    option the templates lack."""
    group = sp.group
    if group is not None and group.kind in GENERATORS and (group.fusable or group.kind in _ATTEMPTED_UNFUSABLE):
        return with_helper(GENERATORS[group.kind].generate(sp))
    raise Unsupported(group.reason if group is not None and group.reason else f"{sp.kind} region")


def launch_config(group) -> str:
    """One line saying how the kernel for ``group`` is launched (for transcripts)."""
    return GENERATORS.get(group.kind, pointwise_codegen).launch_config(group)
