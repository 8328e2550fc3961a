"""LLM agents: a language model behind any OpenAI-compatible endpoint writes the kernels.

``settings.LLMSettings``: where the endpoint is and how to call it (from the
environment or Django settings; the API key never leaves the process that
holds it).  ``prompt``: the prompt files (``templates/*.j2``) rendered for a
sub-problem.  ``extract``: the kernel file out of a reply.  ``client``: one
chat call on the official ``openai`` client (streamed or not, retries with
backoff, the server's usage).  ``agent.LLMAgent``: the Agent, with a repair
loop across calls and a per-run token budget.

The ``openai`` package is imported only when a call is made: the optimizer
child never imports it (the agent runs where the network is: the CLI's
parent process through ``lego_core.agents.relay``, or the web app's agents
worker).
"""
