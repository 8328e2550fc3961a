"""What the fan-out tests run inside lego_core's sandboxed child process
(spawn pickles functions by module name, so they live in a module)."""
from __future__ import annotations


def propose_through_the_relay(model_path: str, overrides: dict, emit) -> dict:
    """In the child (no network): build the model's tree, send every leaf the
    template agent attempts through lego_core's agent relay (the pool
    ``make_pool`` gives a relayed agent), and return, per leaf,
    ``(local proposal, remote proposal or the error's type and message)``,
    with the web app's modules the child imported meanwhile (none)."""
    import sys

    from lego_core.agents.pool import make_pool
    from lego_core.agents.template.agent import TemplateAgent
    from lego_core.load.capture import capture_graph
    from lego_core.load.problem import ProblemSpec, load_problem
    from lego_core.tree.fusion_tree import build_tree

    agent = TemplateAgent()
    tree = build_tree(capture_graph(load_problem(ProblemSpec(model_path, overrides))))
    subs = [leaf.sub for leaf in tree.leaves() if agent.can_attempt(leaf.sub)]
    pool = make_pool(agent, 2, relayed=("template",))
    try:
        futures = [pool.submit(sub, []) for sub in subs]
        results = []
        for sub, future in zip(subs, futures):
            try:
                remote = future.result(timeout=120).to_dict()
            except Exception as exc:  # noqa: BLE001 - reported to the test
                remote = {"error": type(exc).__name__, "message": str(exc)}
            results.append((agent.propose(sub, []).to_dict(), remote))
        return {"results": results, "pool": type(pool).__name__,
                "webapp_modules": sorted(m for m in sys.modules if m == "webapp" or m.startswith("webapp."))}
    finally:
        pool.close()
