"""Agents: turn a sub-problem into candidate kernels plus a transcript.

``base.Agent`` is the interface; ``template`` is the offline template agent
(our own Triton generator).  LLM agents (a later issue) implement the same
interface.
"""

AGENTS = ("template",)


def make_agent(name: str):
    """The agent called ``name``; raises ValueError for an unknown name."""
    if name == "template":
        from lego_core.agents.template.agent import TemplateAgent

        return TemplateAgent()
    raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(AGENTS)}")
