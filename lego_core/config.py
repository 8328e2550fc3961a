"""Every setting that changes what the optimizer produces, in one place.

The kernel cache key (``lego_core.search.cache``) is built from
``OptimizeConfig.key()`` plus library versions, so a knob that changes
generated code or its acceptance belongs in ``key()``.
"""
from __future__ import annotations

import dataclasses
import os
import secrets

STRATEGIES = ("lego", "monolithic")
AGENT_CHOICES = ("template", "llm", "both")  # lego_core.agents.make_agent


def draw_seeds(count: int = 3) -> tuple[int, ...]:
    """``count`` fresh, distinct secret seeds (below 2**31: ``torch.Generator``
    and the parameter perturbation ``seed * 1000 + j`` take them)."""
    seeds: list[int] = []
    while len(seeds) < count:
        seed = secrets.randbelow(2**31 - 1) + 1
        if seed not in seeds:
            seeds.append(seed)
    return tuple(seeds)


def _three_quarters_of_memory_mb() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 / 4) >> 20
    except (ValueError, OSError, AttributeError):
        return None


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of the optimizer child and every process it starts
    (``lego_core.runtime.sandbox_child.limit_resources``); each applies per process
    (the candidate executors get their own), None leaves it unset.

    ``memory_mb``: data segment (RLIMIT_DATA: heap and private writable
    mappings, not CUDA's address-space reservations), default three quarters
    of the machine's memory.  ``cpu_s``: CPU seconds (RLIMIT_CPU), default 6 h.
    ``processes``: processes and threads of the user (RLIMIT_NPROC), default
    4096 (not enforced for root).  ``file_mb``: largest file written
    (RLIMIT_FSIZE), default 16 GiB.  Exceeding one kills or fails the child:
    the run fails with ChildCrashed or the error it raised.
    """

    memory_mb: int | None = dataclasses.field(default_factory=_three_quarters_of_memory_mb)
    cpu_s: int | None = 6 * 3600
    processes: int | None = 4096
    file_mb: int | None = 16 * 1024

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"sandbox limit {field.name} must be a positive whole number or None, got {value!r}")

    def as_dict(self) -> dict:
        """JSON-ready: ``{"memory_mb": ..., "cpu_s": ..., "processes": ..., "file_mb": ...}``."""
        return dataclasses.asdict(self)


# The pipeline's stages, in the order the child announces them (StageStarted);
# with what each does, for the message of one that ran past its limit.
STAGES = ("load", "capture", "construct", "search", "compose", "verify", "launch")
STAGE_WORK = {
    "load": "importing the model file, calling get_inputs() and get_init_inputs(), building Model and running forward once",
    "capture": "torch.export of the model's forward (a forward that waits or loops only while torch.compiler.is_exporting() "
               "is true stops here)",
    "construct": "building the fusion tree of sub-problems and their boundary values",
    "search": "agents writing kernels and the judge checking them, past the search budget and its grace",
    "compose": "writing the optimized model and its kernels",
    "verify": "the end-to-end check: eager, the float64 reference and the optimized model run as a user runs it",
    "launch": "choosing how the optimized model launches and timing it",
}
SEARCH_GRACE_S = 300.0  # StageLimits: the search stage's limit past the run's own search budget


@dataclasses.dataclass(frozen=True)
class StageLimits:
    """Wall-clock limit of each stage of a run, in seconds (None: none).

    Enforced from outside the jailed child (``lego_core.runtime.sandbox.run_in_child``):
    the parent notes when each ``stage_started`` event arrives and, once the
    current stage has run past its limit, kills the child's whole process
    group and fails the run naming the stage, its limit and how to raise it
    (``StageTimeLimit``; the load stage's is a ``ProblemError`` of the file,
    as before).  The load stage counts from the child's start.  Stages only
    move forward: a repeated or earlier ``stage_started`` does not restart a
    clock, so a child that lies about its stage gets at most the sum of the
    limits.  The whole run's ``OptimizeConfig.timeout_s`` still applies.

    Defaults, sized so that a stage that hangs frees the worker long before
    the web run's one-hour timeout while no honest run comes near them (on an
    H200 the reference models took 57-114 s in all, the largest CNNs 246-295 s
    in all with 150 s of search: every stage but the search together took
    under 150 s there; a CPU run of a large model on a busy host is slower):

    - ``load_s`` 300: as ``LEGO_LOAD_TIMEOUT_S`` always was (a large model's
      weights and one forward on a CPU).
    - ``capture_s`` 300: torch.export and the decomposition to core ATen of
      a transformer of a few thousand ops take tens of seconds on a CPU.
    - ``construct_s`` 180: the tree and the boundary values of every
      verification seed are linear in the graph's size; seconds on the
      reference models, a large graph on a busy CPU several times that.
    - ``search_s`` None: the run's own search budget (``max_search_s``)
      plus ``search_grace_s`` (300: agent calls in flight when the budget
      ends are waited for, and an agent call may take the web app's
      ``LEGO_AGENT_TIMEOUT_S``, 300 s by default); with no search budget,
      no search limit.  A number sets the search's limit itself.
    - ``compose_s`` 120: writing files from templates; seconds.
    - ``verify_s`` 600: eager, the float64 reference and torch.compile once
      on a GPU, then the optimized model in fresh processes on several input
      sets, again for each step of the fallback's bisection when a kernel fails.
    - ``launch_s`` 600: launch variants measured in fresh processes and
      checked again, then (on a GPU) eager, torch.compile and the shipped
      model timed (torch.compile of a large model takes minutes).
    """

    load_s: float | None = 300.0
    capture_s: float | None = 300.0
    construct_s: float | None = 180.0
    search_s: float | None = None
    search_grace_s: float = SEARCH_GRACE_S
    compose_s: float | None = 120.0
    verify_s: float | None = 600.0
    launch_s: float | None = 600.0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None and field.name != "search_grace_s":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ValueError(f"stage limit {field.name} must be a number of seconds above 0"
                                 f"{'' if field.name == 'search_grace_s' else ' or None'}, got {value!r}")
            object.__setattr__(self, field.name, float(value))

    def for_run(self, max_search_s: float | None) -> dict[str, float | None]:
        """``{stage: seconds or None}`` for every stage of :data:`STAGES`, the
        search's from ``max_search_s`` (the run's search budget) when not set."""
        limits = {stage: getattr(self, f"{stage}_s") for stage in STAGES}
        if limits["search"] is None and max_search_s is not None:
            limits["search"] = float(max_search_s) + self.search_grace_s
        return limits

    def with_limits(self, **seconds: float | None) -> "StageLimits":
        """A copy with the named stages' limits replaced (``capture=5``); ValueError for an unknown stage."""
        unknown = sorted(set(seconds) - set(STAGES))
        if unknown:
            raise ValueError(f"unknown stage {unknown[0]!r}: the stages are {', '.join(STAGES)}")
        return dataclasses.replace(self, **{f"{stage}_s": value for stage, value in seconds.items()})


MAX_AGENTS = 64  # agents working on one run at once

# The product's default search budget (the command line and the web app use
# it; OptimizeConfig itself has none, so a library caller decides): the
# search stops after DEFAULT_MAX_SEARCH_S seconds, or earlier once no better
# plan came for DEFAULT_PATIENCE_S seconds after every signature worth 1% of
# the model's library time had its attempt (search.pricing).  Sized on an
# H200 with 4 runs at once (bf16, 2026-12-04): the reference models ended
# by themselves in 8-62 s of search and 57-114 s in all; the ResNet-101-,
# EfficientNet-B0- and DenseNet-121-sized CNNs (311, 222, 430 sub-problems)
# took 246, 265 and 295 s in all, every signature worth 1% attempted.
DEFAULT_MAX_SEARCH_S = 150.0
DEFAULT_PATIENCE_S = 20.0


@dataclasses.dataclass(frozen=True)
class OptimizeConfig:
    """Knobs of one optimization run.

    Verification and output: ``verify_seeds``: seeds of the fresh random
    input sets every candidate is checked on (at least three).  None (the
    default) draws three secret seeds (:func:`draw_seeds`) when
    the config is made, so every run checks on inputs no candidate can know
    in advance; verification messages name sets by one-way labels, and
    ``report.json`` records the seeds after the run (``verification``).
    ``seeds_drawn`` says which it was (set by the config itself).
    Fixed seeds reproduce a run (tests fix them).  ``e2e_seed``: seed of the
    inputs of the final end-to-end check; None draws one the same way.  ``use_triton``: False
    makes every sub-problem a library call (a baseline).  ``timing``:
    ``auto`` measures on a GPU and estimates without one; ``estimate`` always
    uses the cost model.  ``target_gpu``: the GPU the cost model describes.
    ``timeout_s``: wall-clock limit of the whole run in seconds (None: no
    limit).  ``stage_limits``: the limit of each stage (:class:`StageLimits`;
    loading the user's file is the ``load`` stage's).  ``compare_compile``:
    on a GPU, also time torch.compile of the original model for the report.
    ``force_triton``: choose every verified Triton candidate whatever its cost
    (tests use it to exercise every generated kernel in the composed model).
    ``channels_last``: capture 4-D activations in channels-last (NHWC) memory
    order (``lego_core.load.capture.capture_graph``), which cuDNN's convolutions
    and the pointwise kernels after them run faster in; the composed model
    converts 4-D inputs at entry and returns eager's output layout.
    ``"auto"``: on CUDA for models with a 2-D convolution; True / False force it.
    Off by default: measured on an H200 (bf16, 2026-11-30), the NHWC plans
    ran 2-2.5x slower than the NCHW ones (the convolutions get the user's
    NCHW weights and cuDNN converts them per call), while the NCHW plan with
    BatchNorm + activation + residual fused beat eager by 1.3x.

    Search (``lego_core.search``): ``strategy``: ``lego`` (the AND-OR tree
    search) or ``monolithic`` (one agent handed the whole model as one
    sub-problem, the same budget; a baseline).  ``dedupe``: solve each
    canonical signature once (False: every node is solved on its own, an
    ablation; a measured library time is shared by signature either way:
    equal regions time alike).  ``mutation``: bottom-up speculative fusion of verified
    neighbours (False: an ablation).  ``agents``: how many agents work on
    different open nodes at once.  ``cache``: read and write the persistent
    kernel cache; ``cache_dir``: where it lives (None: ``$LEGO_CACHE_DIR`` or
    ``~/.cache/lego/kernels``).  Budgets, None meaning no limit:
    ``max_agent_calls``, ``max_tokens``, ``max_search_s`` (wall seconds of the
    search) and ``patience_s`` (stop after this many seconds with no better
    plan, once every signature worth 1% of the library time was attempted);
    the command line and the web app default to :data:`DEFAULT_MAX_SEARCH_S`
    and :data:`DEFAULT_PATIENCE_S`.  ``max_attempts``: agent calls per sub-problem (later ones get the
    verifier's feedback).  ``agent_pool``: an object of the caller's that
    makes agent pools (``lego_core.agents.pool.AgentPoolFactory``; the web
    app's Celery fan-out): every agent call of the run goes to its pools,
    in the caller's process, through the agent relay
    (``lego_core.agents.relay``); never sent to the optimizer's child, not
    compared, not in :meth:`key`; None runs agents in local threads (the
    LLM agent in the calling process).  ``agent_relay``: the names of the
    agents whose calls the optimizer's child sends through the relay to
    the calling process; ``lego_core.api.optimize`` sets it.  ``agent``: who writes kernels: ``template`` (offline), ``llm``
    (a language model, ``lego_core.agents.llm``; endpoint settings from the
    environment of the process that runs it, never from this config) or
    ``both`` (every node goes to each that can attempt it; the best verified
    candidate wins).  ``max_tokens`` is then a hard budget: the LLM agent
    caps each completion at what is left and starts no call once it is spent.
    ``llm_model``: the language model's name, for the kernel cache key (a
    kernel one model wrote is not another's answer); ``optimize`` fills it
    from ``LEGO_LLM_MODEL`` when an LLM agent runs and it is empty.

    Sandbox: ``limits``: the optimizer child's resource limits
    (:class:`SandboxLimits`).  ``model_folder``: show the model file's folder
    read-only in the jail, so that the model imports its sibling modules
    (``lego_core.load.local_modules``; the web app turns it off for an upload
    whose folder is not its run's own).  ``import_paths``: more folders shown
    read-only and put on the child's import path (the command line passes
    its ``PYTHONPATH``; a web run none).  Neither changes generated code:
    they are not in :meth:`key`.
    """

    verify_seeds: tuple | None = None
    e2e_seed: int | None = None
    use_triton: bool = True
    timing: str = "auto"
    target_gpu: str = "H200"
    timeout_s: float | None = None
    stage_limits: StageLimits = dataclasses.field(default_factory=StageLimits)
    compare_compile: bool = True
    force_triton: bool = False
    channels_last: bool | str = False
    strategy: str = "lego"
    dedupe: bool = True
    mutation: bool = True
    agents: int = 4
    cache: bool = True
    cache_dir: str | None = None
    max_agent_calls: int | None = None
    max_tokens: int | None = None
    max_search_s: float | None = None
    patience_s: float | None = None
    max_attempts: int = 2
    agent_pool: object = dataclasses.field(default=None, compare=False, repr=False)
    agent_relay: tuple = ()
    agent: str = "template"
    llm_model: str = ""
    seeds_drawn: bool = False
    limits: SandboxLimits = dataclasses.field(default_factory=SandboxLimits)
    model_folder: bool = True
    import_paths: tuple = ()

    def __post_init__(self) -> None:
        if self.verify_seeds is None:
            object.__setattr__(self, "verify_seeds", draw_seeds(3))
            object.__setattr__(self, "seeds_drawn", True)
        else:
            object.__setattr__(self, "verify_seeds", tuple(int(s) for s in self.verify_seeds))
        if self.e2e_seed is None:  # a seed no sub-problem is checked on
            object.__setattr__(self, "e2e_seed", next(s for s in draw_seeds(4) if s not in self.verify_seeds))
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.agent not in AGENT_CHOICES:
            raise ValueError(f"agent must be one of {', '.join(AGENT_CHOICES)}, got {self.agent!r}")
        if not 1 <= self.agents <= MAX_AGENTS:
            raise ValueError(f"agents must be from 1 to {MAX_AGENTS}, got {self.agents}")
        if self.channels_last not in (True, False, "auto"):
            raise ValueError(f"channels_last must be 'auto', True or False, got {self.channels_last!r}")
        if not isinstance(self.stage_limits, StageLimits):
            raise ValueError(f"stage_limits must be a StageLimits, got {self.stage_limits!r}")
        if isinstance(self.import_paths, str) or not all(isinstance(p, str) for p in self.import_paths):
            raise ValueError(f"import_paths must be a tuple of folder paths (str), got {self.import_paths!r}")
        object.__setattr__(self, "import_paths", tuple(self.import_paths))
        if self.agent_pool is not None and (isinstance(self.agent_pool, str) or not callable(self.agent_pool)):
            raise ValueError("agent_pool must be an object that makes agent pools (lego_core.agents.pool.AgentPoolFactory), "
                             f"not {self.agent_pool!r}")
        if isinstance(self.agent_relay, str) or not all(isinstance(a, str) for a in self.agent_relay):
            raise ValueError(f"agent_relay must be a tuple of agent names (str), got {self.agent_relay!r}")
        object.__setattr__(self, "agent_relay", tuple(self.agent_relay))
        if len(self.verify_seeds) < 3:
            raise ValueError(f"verification needs at least three seeds, got {len(self.verify_seeds)}")

    def key(self) -> dict:
        """The settings that change generated code or its acceptance.  Drawn
        seeds count as one setting ("drawn"): a cached kernel is verified
        again on every run's own inputs anyway."""
        seeds = "drawn" if self.seeds_drawn else list(self.verify_seeds)
        key = {"verify_seeds": seeds, "use_triton": self.use_triton, "force_triton": self.force_triton}
        if self.agent != "template":  # the template agent's keys stay as they were
            key["llm_model"] = self.llm_model
        return key
