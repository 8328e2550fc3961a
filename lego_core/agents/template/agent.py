"""The template agent: matches a sub-problem to a kernel template and fills it in.

Offline and deterministic; it needs no network.  It handles fusion groups of
kind ``pointwise``, ``row_reduction`` (see ``pointwise_codegen``), ``gemm_epilogue``
(see ``gemm_codegen``; the groups come from ``fusion.gemm``) and ``attention``
(see ``attention_codegen``; the groups come from ``fusion.attention``),
``depthwise_conv1d`` and ``scan`` (see ``sequence_codegen``; the groups come
from ``fusion.sequence``) and declines
everything else, which then stays a library (ATen) call.  Its transcript is a
short log of what it matched and which configuration it chose.
"""
from __future__ import annotations

from lego_core.agents.base import Proposal, split_time_to_beat
from lego_core.agents.template.codegen import generate, launch_config
from lego_core.agents.template.expressions import Unsupported
from lego_core.agents.template.kernel_source import kernel_name
from lego_core.tree.subproblem import SubProblem

TEMPLATE_KINDS = ("pointwise", "row_reduction", "gemm_epilogue", "conv_bn", "attention", "depthwise_conv1d", "scan")
TEMPLATE_TITLES = {"pointwise": "pointwise", "row_reduction": "row reduction", "gemm_epilogue": "GEMM + epilogue", "conv_bn": "conv + BatchNorm fold", "attention": "flash attention"}
TEMPLATE_TITLES |= {"depthwise_conv1d": "depthwise conv1d + epilogue", "scan": "scan (cumsum) + prologue/epilogue"}


class TemplateAgent:
    """Generates Triton for pointwise chains, row reductions and GEMMs with a pointwise epilogue (no LLM)."""

    name = "template"

    def can_attempt(self, sub: SubProblem) -> bool:
        """Only single fusion groups of a kind the templates cover."""
        group = sub.group
        return group is not None and group.kind in TEMPLATE_KINDS and group.fusable

    def propose(self, sub: SubProblem, feedback: list[str]) -> Proposal:
        transcript = [("user", f"sub-problem {sub.id}: {sub.label}; ops {', '.join(sub.ops)}")]
        if feedback:
            transcript.append(("agent", f"earlier candidate rejected: {split_time_to_beat(feedback[-1])[0]}; the template has no other variant, declining"))
            return Proposal(None, transcript=transcript)
        try:
            source = generate(sub)
        except Unsupported as exc:
            transcript.append(("agent", f"no template matches ({exc}); leaving it to the library"))
            return Proposal(None, transcript=transcript)
        group = sub.group
        shape = list(group.shape)
        transcript.append(
            (
                "agent",
                f"matched the {TEMPLATE_TITLES[group.kind]} template over iteration shape {shape}; "
                f"{len(sub.inputs)} inputs, {len(sub.outputs)} outputs, {len(sub.ops)} ops fused; {launch_config(group)}",
            )
        )
        return Proposal(source, kernel_name=kernel_name(sub), transcript=transcript)

