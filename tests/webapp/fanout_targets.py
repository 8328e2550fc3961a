"""What the fan-out tests run inside lego_core's sandboxed child process
(spawn pickles functions by module name, so they live in a module)."""
from __future__ import annotations


def propose_through_the_pool(model_path: str, overrides: dict, emit) -> list:
    """In the child (no network): build the model's tree, send every leaf the
    template agent attempts through CeleryAgentPool, and return, per leaf,
    ``(local proposal, remote proposal or the error's type and message)``."""
    from lego_core.agents.template.agent import TemplateAgent
    from lego_core.load.capture import capture_graph
    from lego_core.load.problem import ProblemSpec, load_problem
    from lego_core.tree.fusion_tree import build_tree
    from webapp.runs.fanout import CeleryAgentPool

    agent = TemplateAgent()
    tree = build_tree(capture_graph(load_problem(ProblemSpec(model_path, overrides))))
    subs = [leaf.sub for leaf in tree.leaves() if agent.can_attempt(leaf.sub)]
    pool = CeleryAgentPool("template", size=2)
    try:
        futures = [pool.submit(sub, []) for sub in subs]
        results = []
        for sub, future in zip(subs, futures):
            try:
                remote = future.result(timeout=120).to_dict()
            except Exception as exc:  # noqa: BLE001 - reported to the test
                remote = {"error": type(exc).__name__, "message": str(exc)}
            results.append((agent.propose(sub, []).to_dict(), remote))
        return results
    finally:
        pool.close()
