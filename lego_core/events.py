"""Typed progress events: the only way lego_core reports what it is doing.

A caller hands ``lego_core.optimize`` a *sink*, any callable that takes one
:class:`Event`.  The command line renders events as a progress bar; the web
app stores each one with a per-run sequence number and then notifies viewers.
Events cross process boundaries (the optimizer runs in a child process), so
every field is plain data: str, int, float, bool, None, lists and dicts.

``Event.to_dict()`` gives the JSON form ``{"type": "node_created", ...}`` and
``event_from_dict`` turns it back into the dataclass.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, ClassVar


@dataclasses.dataclass
class Event:
    """Base class. ``ts`` is the wall-clock time (seconds since the epoch)."""

    type: ClassVar[str] = "event"
    ts: float = dataclasses.field(default_factory=time.time, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with a ``type`` key naming the event kind."""
        data = dataclasses.asdict(self)
        data["type"] = self.type
        return data


@dataclasses.dataclass
class RunStarted(Event):
    """The optimizer accepted the problem spec and started."""

    type: ClassVar[str] = "run_started"
    model: str
    overrides: dict
    dtype: str
    device: str


@dataclasses.dataclass
class StageStarted(Event):
    """One pass of the pipeline began (``load``, ``capture``, ``construct``,
    ``search``, ``compose``, ``verify``, ``launch``); ``total`` counts its work items
    (0 when not known up front: the search's ``Progress`` events carry the
    number of nodes it has queued so far)."""

    type: ClassVar[str] = "stage_started"
    stage: str
    total: int = 0


@dataclasses.dataclass
class NodeCreated(Event):
    """A FusionTree node. ``kind`` is ``or`` or ``and``; ``parent`` is the
    parent's id (None for the root); ``ops`` lists the ATen ops it covers.
    OR nodes (sub-problems) also carry ``input_shapes`` and ``shapes`` (the
    outputs'; None for a non-tensor value) and ``reference``: the region as
    readable PyTorch source, ``def reference(...)`` returning a tuple;
    ``module_path`` the module the region belongs to (``layers.0.attn_norm``,
    "" for the model's own ops) and ``region_kind`` its sub-problem kind
    (``pointwise``, ``row_reduction``, ``layout``, ...: the report counts
    every kind but ``layout`` as a compute sub-problem); ``estimate_ms`` the
    cost model's estimate of running the region op by op in the library (ms
    on the target GPU; None for AND nodes): what the run page shows for a
    sub-problem before anything is measured."""

    type: ClassVar[str] = "node_created"
    node_id: str
    kind: str
    parent: str | None
    label: str
    signature: str = ""
    ops: list = dataclasses.field(default_factory=list)
    shapes: list = dataclasses.field(default_factory=list)
    reused: bool = False
    shared: list = dataclasses.field(default_factory=list)
    input_shapes: list = dataclasses.field(default_factory=list)
    reference: str = ""
    module_path: str = ""
    region_kind: str = ""
    estimate_ms: float | None = None


@dataclasses.dataclass
class NodeReused(Event):
    """A node took its result from elsewhere instead of an agent call:
    ``via`` ``dedupe`` (an equal-signature node of this run, ``reused_from``
    its id) or ``cache`` (the persistent kernel cache, ``reused_from`` is
    ``"cache"``); ``usable``: whether that result includes a verified kernel."""

    type: ClassVar[str] = "node_reused"
    node_id: str
    reused_from: str
    via: str
    usable: bool = True


@dataclasses.dataclass
class NodeStarted(Event):
    """Work on an OR node began: the kernel cache is looked up and, failing
    that, ``agent`` is asked (``attempt`` counts from 1; a retry after failed
    verification is attempt 2, with the failure as feedback)."""

    type: ClassVar[str] = "node_started"
    node_id: str
    agent: str
    attempt: int = 1


NODE_OUTCOMES = ("verified", "failed", "library")  # NodeFinished.outcome


@dataclasses.dataclass
class NodeFinished(Event):
    """Work on an OR node is over: no retry follows (a finer split may still
    add smaller nodes under it).  ``outcome`` (one of ``NODE_OUTCOMES``):
    ``verified``, a kernel candidate of the node passed verification;
    ``failed``, it has kernel candidates and every one failed verification;
    ``library``, it has no kernel candidate at all (the agent answered
    without one, the kernel cache holds "no kernel" for it, the sub-problem
    is over the memory limit, or a budget ran out while the agent worked),
    so the node keeps the library (ATen) implementation.  Sent by the search
    (``lego_core.search.engine``) once per node's finished work, before the
    ``progress`` event that counts it; a node reusing an equal node's work
    (``NodeReused`` via ``dedupe``) gets none: it follows that node."""

    type: ClassVar[str] = "node_finished"
    node_id: str
    outcome: str


@dataclasses.dataclass
class CandidateProposed(Event):
    """An agent proposed an implementation for a sub-problem."""

    type: ClassVar[str] = "candidate_proposed"
    node_id: str
    candidate_id: str
    agent: str
    implementation: str  # "triton" or "library"
    source: str = ""


@dataclasses.dataclass
class TranscriptMessage(Event):
    """One message of an agent's transcript for a node."""

    type: ClassVar[str] = "transcript"
    node_id: str
    agent: str
    role: str
    content: str
    tokens: int = 0


@dataclasses.dataclass
class TranscriptChunk(Event):
    """A piece of a language model's reply while it streams (LLM agents).
    ``call``: the agent call it belongs to (``<agent>-<sub id>-<n>``), so a
    viewer appends pieces of one call in ``seq`` order; the whole reply
    follows as a TranscriptMessage when the call ends (the stored
    transcript is whole; chunks are for watching it grow)."""

    type: ClassVar[str] = "transcript_chunk"
    node_id: str
    agent: str
    call: str
    seq: int
    text: str


@dataclasses.dataclass
class AgentUsage(Event):
    """One language-model call's usage as the server reported it: tokens of
    the prompt and of the completion, their cost in USD at the configured
    prices (0 when none are set), and the run's totals so far."""

    type: ClassVar[str] = "agent_usage"
    node_id: str
    agent: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float = 0.0
    run_tokens: int = 0


@dataclasses.dataclass
class VerificationResult(Event):
    """Outcome of checking a candidate against its reference."""

    type: ClassVar[str] = "verification"
    node_id: str
    candidate_id: str
    passed: bool
    max_abs_error: float | None
    reason: str = ""


@dataclasses.dataclass
class Timing(Event):
    """Time of one implementation of a node, in milliseconds; ``measured`` is
    False when the number comes from the cost model."""

    type: ClassVar[str] = "timing"
    node_id: str
    candidate_id: str
    ms: float
    measured: bool
    baseline_ms: float | None = None


@dataclasses.dataclass
class PlanImproved(Event):
    """A cheaper complete plan was found (whole-model cost in ms).  The
    first one (``initial``) is the library plan the search starts from;
    ``items``: how many sub-problems the plan implements directly;
    ``chosen``: their OR-node ids, in schedule order; ``elapsed_s``: seconds
    since the search started, the clock of the report's
    ``time_to_first_plan_s`` / ``time_to_final_plan_s``."""

    type: ClassVar[str] = "plan_improved"
    cost_ms: float
    baseline_ms: float
    speedup: float
    measured: bool
    items: int = 0
    initial: bool = False
    chosen: list = dataclasses.field(default_factory=list)
    elapsed_s: float | None = None


@dataclasses.dataclass
class Progress(Event):
    """``done`` of ``total`` work items of ``stage`` are finished."""

    type: ClassVar[str] = "progress"
    stage: str
    done: int
    total: int
    message: str = ""


@dataclasses.dataclass
class RunFinished(Event):
    """The run ended with a verified composed model in ``out_dir``."""

    type: ClassVar[str] = "run_finished"
    out_dir: str
    summary: dict


@dataclasses.dataclass
class RunFailed(Event):
    """The run ended without a result. ``message`` is meant for the user."""

    type: ClassVar[str] = "run_failed"
    error_type: str
    message: str
    path: str | None = None
    line: int | None = None
    hint: str = ""


Sink = Callable[[Event], None]

EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        RunStarted,
        StageStarted,
        NodeCreated,
        NodeReused,
        NodeStarted,
        NodeFinished,
        CandidateProposed,
        TranscriptMessage,
        TranscriptChunk,
        AgentUsage,
        VerificationResult,
        Timing,
        PlanImproved,
        Progress,
        RunFinished,
        RunFailed,
    )
}


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event from ``Event.to_dict()`` output.

    Raises ``KeyError`` for an unknown ``type``.
    """
    fields = dict(data)
    cls = EVENT_TYPES[fields.pop("type")]
    return cls(**fields)


def thread_safe(sink: Sink) -> Sink:
    """``sink`` behind a lock of its own: for events sent from several threads
    (agents, the judge's lane, the relay's call threads)."""
    import threading

    lock = threading.Lock()

    def locked(event: Event) -> None:
        with lock:
            sink(event)

    return locked


def null_sink(event: Event) -> None:
    """A sink that drops every event."""
