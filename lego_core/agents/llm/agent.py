"""The LLM agent: a language model behind an OpenAI-compatible endpoint writes each kernel file.

``LLMAgent.propose(sub, feedback)`` renders the prompt (``prompt``), makes
one chat call (``client.chat``, streamed into ``on_chunk``), extracts the
kernel file (``extract``) and returns it as a Proposal with the call's
tokens and cost.  With ``feedback`` (the verifier's reasons for earlier
candidates of the same sub-problem, newest last) it is a repair turn: the
prompt holds the file this agent wrote last for that signature and the
reason it was rejected.

A run's token budget (``agents.budget.TokenBudget``) is shared by every agent of the run:
each call's completion is capped at what is left, and no call starts once
it is spent.  An endpoint that fails ``settings.failures_to_give_up`` calls
in a row (each after its retries) makes the agent *unavailable*: it answers
every later call at once with ``Proposal.unavailable`` set, and the search
stops asking it.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from lego_core.agents.base import Proposal, split_time_to_beat
from lego_core.agents.budget import TokenBudget
from lego_core.agents.llm import client, prompt
from lego_core.agents.llm.extract import extract_code
from lego_core.agents.llm.settings import LLMSettings
from lego_core.tree.subproblem import SubProblem

CHUNK_CHARS = 64  # stream pieces are passed on in batches of about this many characters
CHUNK_S = 0.2  # or after this many seconds


ChunkSink = Callable[[SubProblem, str, int, str], None]  # (sub, call id, seq, text)
UsageSink = Callable[[SubProblem, "client.Reply", float, int], None]  # (sub, reply, cost, run total)


class LLMAgent:
    """Writes kernels with a language model; see the module docstring.

    ``chat``: the call (``client.chat``; tests may pass another);
    ``on_chunk(sub, call, seq, text)`` gets the streamed reply in pieces;
    ``on_usage(sub, reply, cost_usd, run_tokens)`` each call's usage.
    Thread-safe: several threads may call ``propose`` at once.
    """

    name = "llm"

    def __init__(self, settings: LLMSettings | None = None, *, target_gpu: str = "H200", budget: TokenBudget | None = None,
                 on_chunk: ChunkSink | None = None, on_usage: UsageSink | None = None, chat=client.chat):
        self.settings = settings or LLMSettings.from_env()
        self.target_gpu, self.budget = target_gpu, budget or TokenBudget(None)
        self.on_chunk, self.on_usage, self._chat = on_chunk, on_usage, chat
        self._lock = threading.Lock()
        self._last: dict[str, str] = {}  # signature -> the last file this agent wrote for it
        self._calls: dict[str, int] = {}
        self._failures = 0  # calls in a row that failed after their retries
        self.down = ""  # why the endpoint is given up on ("" while it is used)

    def can_attempt(self, sub: SubProblem) -> bool:
        """Fusable groups of any kind (a language model is not bound to templates), not pure layout."""
        group = sub.group
        return group is not None and group.fusable and group.kind != "layout"

    def propose(self, sub: SubProblem, feedback: list[str]) -> Proposal:
        """One call for ``sub``; a repair turn when ``feedback`` is not empty.
        Never raises for the endpoint's failures: they come back in the
        transcript (and as ``unavailable`` once the endpoint is given up)."""
        if self.down:
            return Proposal(None, transcript=[("system", f"not asked: {self.down}")], unavailable=self.down)
        if not self.budget.allows_call():
            return Proposal(None, transcript=[("system", f"not asked: the run's token budget ({self.budget.limit}) is spent")])
        messages, shown = self._messages(sub, feedback)
        call = self._call_id(sub)
        transcript: list[tuple[str, str]] = [("user", shown)]
        streamer = _Batcher(lambda seq, text: self.on_chunk(sub, call, seq, text)) if self.on_chunk else None
        try:
            reply = self._chat(self.settings, messages, on_chunk=streamer, max_tokens=self.budget.remaining())
        except client.EndpointError as exc:
            return self._failed(exc, transcript)
        finally:
            if streamer is not None:
                streamer.flush()
        with self._lock:
            self._failures = 0
        total = self.budget.spend(reply.tokens)
        cost = self.settings.cost_usd(reply.prompt_tokens, reply.completion_tokens)
        if self.on_usage is not None:
            self.on_usage(sub, reply, cost, total)
        transcript += [("system", note) for note in reply.notes]
        transcript.append(("agent", reply.text))
        source = extract_code(reply.text)
        usage = f"{reply.prompt_tokens} prompt + {reply.completion_tokens} completion tokens" + (f", ${cost:.4f}" if cost else "")
        if source is None:
            transcript.append(("system", f"{usage}; the reply holds no kernel file (no Python code defining launch and a @triton.jit kernel)"))
        else:
            transcript.append(("system", f"{usage}; extracted a kernel file of {len(source.splitlines())} lines"))
            with self._lock:
                self._last[sub.signature] = source
        return Proposal(source, kernel_name=f"{sub.id}_llm", transcript=transcript, tokens=reply.tokens,
                        prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens, cost_usd=cost,
                        counted_in=self.budget)

    def _messages(self, sub: SubProblem, feedback: list[str]) -> tuple[list[dict], str]:
        """The chat messages, and the part shown in the transcript (the user's turn)."""
        first = prompt.kernel_prompt(sub, self.target_gpu)
        messages = [{"role": "system", "content": prompt.system_prompt()}, {"role": "user", "content": first}]
        if not feedback:
            return messages, first
        with self._lock:
            previous = self._last.get(sub.signature)
        reason, library_ms, best_ms = split_time_to_beat(feedback[-1])  # on a GPU: the times to beat
        repair = prompt.repair_prompt(len(feedback), reason, previous, best_ms=best_ms, library_ms=library_ms)
        messages.append({"role": "user", "content": repair})
        return messages, repair

    def _call_id(self, sub: SubProblem) -> str:
        with self._lock:
            n = self._calls[sub.id] = self._calls.get(sub.id, 0) + 1
        return f"{self.name}-{sub.id}-{n}"

    def _failed(self, exc: client.EndpointError, transcript: list) -> Proposal:
        with self._lock:
            self._failures += 1
            if not exc.retryable or self._failures >= self.settings.failures_to_give_up:
                self.down = self.down or f"the LLM agent stopped: {exc}"
            down = self.down
        transcript.append(("system", f"the call failed: {exc}"))
        if down:
            transcript.append(("system", f"{down}; the run goes on with the other agents"))
        return Proposal(None, transcript=transcript, unavailable=down)


class _Batcher:
    """Collects streamed pieces and passes them on about every CHUNK_CHARS
    characters or CHUNK_S seconds, numbered from 0."""

    def __init__(self, send: Callable[[int, str], None]):
        self.send, self.parts, self.size, self.seq, self.since = send, [], 0, 0, time.monotonic()

    def __call__(self, piece: str) -> None:
        self.parts.append(piece)
        self.size += len(piece)
        if self.size >= CHUNK_CHARS or time.monotonic() - self.since >= CHUNK_S:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.send(self.seq, "".join(self.parts))
            self.seq += 1
        self.parts, self.size, self.since = [], 0, time.monotonic()
