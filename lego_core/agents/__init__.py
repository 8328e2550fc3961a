"""Agents: turn a sub-problem into candidate kernels plus a transcript.

``base.Agent`` is the interface; ``template`` is the offline template agent
(our own Triton generator); ``llm`` is a language model behind any
OpenAI-compatible endpoint; ``both`` is a ``base.Team`` of the two (every
member that can attempt a node gets it; the best verified candidate wins).
"""
from __future__ import annotations

AGENTS = ("template", "llm", "both")


def agent_name(choice: str) -> str:
    """The name of the agent ``make_agent(choice)`` makes (the kernel cache key's agent part)."""
    return {"both": "template+llm"}.get(choice, choice)


def member_names(choice: str) -> tuple[str, ...]:
    """The names of the agents that answer calls for ``choice`` (a Team's members for ``both``)."""
    return {"both": ("template", "llm")}.get(choice, (choice,))


def make_agent(name: str, config=None, emit=None, settings=None, budget=None):
    """The agent called ``name`` (one of AGENTS).

    ``config`` (an OptimizeConfig) gives an LLM agent the run's token budget
    (``max_tokens``) and target GPU; ``emit`` (an event sink) gets its
    streamed reply pieces (``TranscriptChunk``) and usage (``AgentUsage``);
    ``settings`` (``llm.settings.LLMSettings``) default to the environment;
    ``budget``: the run's ``budget.TokenBudget``, shared with the search
    (default: a new one of ``config.max_tokens``).
    Raises ValueError for an unknown name."""
    if name == "template":
        from lego_core.agents.template.agent import TemplateAgent

        return TemplateAgent()
    if name == "llm":
        return make_llm_agent(config, emit, settings, budget)
    if name == "both":
        from lego_core.agents.base import Team

        return Team([make_agent("template"), make_llm_agent(config, emit, settings, budget)])
    raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(AGENTS)}")


def make_llm_agent(config=None, emit=None, settings=None, budget=None):
    """An ``llm.agent.LLMAgent`` whose stream and usage go to ``emit`` as
    events, spending from ``budget`` (a ``TokenBudget``; default: a new one of
    ``config.max_tokens``)."""
    from lego_core.agents.budget import TokenBudget
    from lego_core.agents.llm.agent import LLMAgent
    from lego_core.agents.llm.settings import LLMSettings

    if budget is None:
        budget = TokenBudget(getattr(config, "max_tokens", None))
    on_chunk = on_usage = None
    if emit is not None:
        from lego_core.events import AgentUsage, TranscriptChunk
        from lego_core.tree.fusion_tree import node_id_for

        def on_chunk(sub, call, seq, text):
            emit(TranscriptChunk(node_id=node_id_for(sub.id), agent="llm", call=call, seq=seq, text=text))

        def on_usage(sub, reply, cost, total):
            emit(AgentUsage(node_id=node_id_for(sub.id), agent="llm", prompt_tokens=reply.prompt_tokens,
                            completion_tokens=reply.completion_tokens, cost_usd=cost, run_tokens=total))

    return LLMAgent(settings or LLMSettings.from_env(), target_gpu=getattr(config, "target_gpu", "H200"), budget=budget,
                    on_chunk=on_chunk, on_usage=on_usage)
