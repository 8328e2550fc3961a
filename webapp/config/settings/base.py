"""Settings shared by every environment, read from the environment.

Environment variables:

- ``DJANGO_SECRET_KEY``: required in production.
- ``DATABASE_URL``: e.g. ``postgres://user@host:5432/lego``; unset means the
  embedded default, an SQLite file under ``LEGO_VAR_DIR``.
- ``REDIS_URL``: e.g. ``redis://127.0.0.1:6379/0`` for the Celery broker;
  unset means kombu's filesystem transport under ``LEGO_VAR_DIR``, which needs
  no server.
- ``LEGO_VAR_DIR``: where the database file, the broker folder and media
  (uploads and each run's output) live; default ``var/`` in the repository.
- ``LEGO_RUN_TIMEOUT_S``: wall-clock limit of one optimization run.
- ``LEGO_LOAD_TIMEOUT_S``: limit on loading the uploaded file (import,
  get_inputs, building the model and running forward once; default 300 s);
  past it the run fails saying so.  The load stage's limit below, by its
  older name (``LEGO_STAGE_LIMIT_LOAD_S`` wins when both are set).
- ``LEGO_STAGE_LIMIT_LOAD_S``, ``_CAPTURE_S``, ``_CONSTRUCT_S``,
  ``_SEARCH_S``, ``_COMPOSE_S``, ``_VERIFY_S``, ``_LAUNCH_S``
  (``LEGO_STAGE_LIMIT_<STAGE>_S``): wall-clock limit of each stage of a run
  in seconds (``lego_core.config.StageLimits``); unset: lego_core's defaults
  (300, 300, 180, the run's search budget plus 300, 120, 600, 600).  The
  run worker watches the stages from outside the jail and, past a stage's
  limit, kills the run's process group: the run fails naming the stage, its
  limit and this setting, and the worker takes the next run.  A number of
  seconds above 0; anything else stops the server at start.
- ``LEGO_RUN_MEMORY_MB``, ``LEGO_RUN_CPU_S``, ``LEGO_RUN_PROCESSES``,
  ``LEGO_RUN_FILE_MB``: the resource limits of a run's jailed child and of
  each process it starts (``lego_core.config.SandboxLimits``: data segment,
  CPU seconds, processes and threads of the user, largest file written);
  unset means lego_core's defaults (three quarters of the memory, 6 h,
  4096, 16 GiB).
- ``LEGO_CELERY_QUEUE``: the queue runs go to (default ``lego``), the GPU
  queue: one worker per GPU, concurrency 1.
- ``LEGO_AGENT_FANOUT``: send agent calls to Celery workers of the agents
  queue (default on); off runs them in threads of the run's own process.
- ``LEGO_AGENTS``: how many agents work at once in one run (default 4).
- ``LEGO_RUN_MAX_TOKENS``: a web run's hard LLM token budget, prompt plus
  completion, as the endpoint reports them (default 500000; 0: none).
- ``LEGO_RUN_MAX_SEARCH_S`` / ``LEGO_RUN_PATIENCE_S``: a web run's search
  budget in seconds, wall time and patience (no better plan for that long,
  once every signature worth 1% of the library time was tried); default
  lego_core's product defaults (``lego_core.config.DEFAULT_MAX_SEARCH_S``,
  ``DEFAULT_PATIENCE_S``); 0 or ``none``: no limit.
- ``LEGO_CACHE_DIR``: the persistent kernel cache the run workers share
  (default ``LEGO_VAR_DIR/kernel-cache``).
- ``LEGO_AGENT_QUEUE``: the agents queue (default ``lego-agents``).
- ``LEGO_AGENT_TIMEOUT_S``: how long an agent call may wait for a worker
  and run (default 300); a call no worker took in that time fails the run.
- ``LEGO_EVENT_POLL_S``: how often a live viewer's websocket looks for new
  events in the database when no wake-up came (default 0.5 s without
  Redis, 5 s with it).
- ``LEGO_MAX_REQUEST_BYTES``: the largest request body accepted (default
  the model file's 1 MB limit plus 1 MiB); larger ones get 413 before
  they are read.
- ``LEGO_HEARTBEAT_S`` (5), ``LEGO_HEARTBEAT_TIMEOUT_S`` (45),
  ``LEGO_REAP_EVERY_S`` (15): how often a running run's task writes its
  heartbeat, how old a heartbeat may get before the reaper (a Celery beat
  task) fails the run, and how often the reaper looks.
- ``LEGO_WORKER_CUDA``: whether the run workers have a CUDA GPU, so that
  the form and the API refuse ``device=cuda`` up front where they have none
  (``runs/devices.py``): ``1`` yes, ``0`` no; unset (or ``auto``) means the
  workers run on this machine, as with ``make run`` and the Docker image,
  and this machine is asked (``lego_core.runtime.gpu_probe.cuda_available``: a fresh
  interpreter, once per web process, on the first ``cuda`` upload).  Set it
  where the web server and the GPU workers are different machines.
- ``LEGO_MAX_QUEUED_PER_USER`` (3), ``LEGO_MAX_RUNNING_PER_USER`` (1),
  ``LEGO_MAX_RUNS_IN_FLIGHT`` (default the sum of the two): runs one user
  may have queued, running (on all run workers together) and queued or
  running at once.  An upload past the queued or in-flight limit is refused
  with a message; a run whose owner is at the running limit waits while
  other users' runs start.  Workers take runs in a fair order, users in
  turn (``runs/queue.py``).  Whole numbers above 0, else the server does not start.
- ``LEGO_SIGNUP_ENABLED``: self sign-up at ``/accounts/signup/`` (Django's
  ``UserCreationForm``: an ordinary, non-staff user); default off, the page
  is then a 404 and users are added with ``manage.py adduser``.
- ``DJANGO_DEBUG``, ``DJANGO_ALLOWED_HOSTS``, ``DJANGO_STATIC_ROOT``.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import dj_database_url

from lego_core.config import DEFAULT_MAX_SEARCH_S, DEFAULT_PATIENCE_S, STAGES, StageLimits

BASE_DIR = Path(__file__).resolve().parents[3]  # the repository root
WEBAPP_DIR = BASE_DIR / "webapp"


def env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name, "")
    return value if value != "" else default


def env_bool(name: str, default: bool) -> bool:
    value = env(name)
    return default if value is None else value.lower() in ("1", "true", "yes", "on")


VAR_DIR = Path(env("LEGO_VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = env("DJANGO_SECRET_KEY", "")
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = [h for h in (env("DJANGO_ALLOWED_HOSTS", "") or "").split(",") if h]

INSTALLED_APPS = [
    # first: its runserver (daphne's, with the request-body limit enforced
    # while the body streams in) wins over daphne's and staticfiles'
    "webapp.server",
    "daphne",  # before staticfiles: runserver serves ASGI, websockets included
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "webapp.runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "webapp.config.urls"
WSGI_APPLICATION = "webapp.config.wsgi.application"
ASGI_APPLICATION = "webapp.config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [WEBAPP_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database: PostgreSQL with DATABASE_URL, else an SQLite file ------------
DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=60,
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # the web server and the worker write to one file: wait for its lock
    # instead of failing at once with "database is locked"
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # write-ahead log: the worker's stream of events (one commit each, a
    # thousand in a tree's construction) no longer waits for a full sync per
    # commit, and the web server's reads do not block it (nor it them);
    # IMMEDIATE: a writer takes the lock when it starts, so two writers wait
    # in turn instead of failing with "database is locked" on the upgrade
    DATABASES["default"]["OPTIONS"].update(
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", transaction_mode="IMMEDIATE")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:list"
LOGOUT_REDIRECT_URL = "login"
LEGO_SIGNUP_ENABLED = env_bool("LEGO_SIGNUP_ENABLED", False)  # /accounts/signup/ (webapp/runs/accounts.py); off: 404

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --- files -------------------------------------------------------------------
STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "frontend"]
# plotly.min.js from the plotly package (no CDN): {% static 'plotly/plotly.min.js' %}
_PLOTLY_SPEC = importlib.util.find_spec("plotly")
if _PLOTLY_SPEC is not None and _PLOTLY_SPEC.submodule_search_locations:
    STATICFILES_DIRS.append(("plotly", str(Path(_PLOTLY_SPEC.submodule_search_locations[0]) / "package_data")))
STATIC_ROOT = Path(env("DJANGO_STATIC_ROOT", str(VAR_DIR / "static")))  # collectstatic output
# Uploads and run outputs. Never served as plain media: downloads go through
# the owner-checked zip view.
MEDIA_ROOT = VAR_DIR / "media"
# Bounded input: LEGO_MAX_UPLOAD_BYTES is the model file's limit (the form
# says so); LEGO_MAX_REQUEST_BYTES bounds a whole request body, enforced in
# front of Django (webapp/config/body_limit.py: 413 before the body is read,
# before authentication); Django's own limits bound the form fields.
LEGO_MAX_UPLOAD_BYTES = 1_000_000
# the reference models the upload form offers as examples (../shared/models beside the repository)
LEGO_EXAMPLES_DIR = Path(env("LEGO_EXAMPLES_DIR", str(BASE_DIR.parent / "shared" / "models")))
LEGO_MAX_REQUEST_BYTES = int(env("LEGO_MAX_REQUEST_BYTES", str(LEGO_MAX_UPLOAD_BYTES + 1_048_576)))
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440  # above the request limit: an upload stays in memory
DATA_UPLOAD_MAX_MEMORY_SIZE = 262_144  # the fields other than files (overrides text, JSON bodies)
DATA_UPLOAD_MAX_NUMBER_FIELDS = 100
DATA_UPLOAD_MAX_NUMBER_FILES = 4

# --- Celery: Redis with REDIS_URL, else kombu's filesystem transport ---------
REDIS_URL = env("REDIS_URL")
BROKER_DIR = VAR_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
else:
    CELERY_BROKER_URL = "filesystem://localhost//"
    # kombu's filesystem transport with messages written whole and claimed
    # once (stock kombu lets a worker read a half-written message and die)
    CELERY_BROKER_TRANSPORT = "webapp.config.file_broker:Transport"
    # data_folder_in and data_folder_out must be the same folder, or the
    # worker never sees the tasks the web process writes (celery issue 3564)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
    for folder in ("queue", "control"):
        (BROKER_DIR / folder).mkdir(parents=True, exist_ok=True)
CELERY_TASK_DEFAULT_QUEUE = env("LEGO_CELERY_QUEUE", "lego")
CELERY_TASK_IGNORE_RESULT = True  # a run's outcome lives in the database
# Agent calls (runs.propose) go to their own queue and return their proposal
# through the result backend: Redis, or files under LEGO_VAR_DIR that every
# process on the machine can read (no server needed).
LEGO_AGENT_QUEUE = env("LEGO_AGENT_QUEUE", "lego-agents")
CELERY_TASK_ROUTES = {"runs.propose": {"queue": LEGO_AGENT_QUEUE}}
RESULTS_DIR = VAR_DIR / "results"
if REDIS_URL:
    CELERY_RESULT_BACKEND = REDIS_URL
else:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    # Celery's file:// backend, with result files replaced whole
    CELERY_RESULT_BACKEND = f"webapp.config.file_broker:ResultBackend+file://{RESULTS_DIR}"
CELERY_RESULT_EXPIRES = 3600  # proposals are read within seconds and then deleted
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# The run worker uses Celery's prefork pool with one process
# (``CELERY_WORKER_CONCURRENCY = 1``: one run at a time, so timings never
# overlap).  The run's task runs in that pool process, which lego_core's
# child process is spawned from; the worker's main process only supervises
# it: when the pool process dies (killed, or taken down by an upload) the
# worker starts a new one and keeps taking runs, Celery's time limits are
# enforced, and a run can be revoked with ``terminate`` (cancel).
CELERY_WORKER_POOL = "prefork"
CELERY_WORKER_CONCURRENCY = 1
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# a run's message is acknowledged when its task ends, not when it starts;
# when the pool process running it dies, the message goes back to the queue
# (reject_on_worker_lost) and its next delivery fails the run at once with
# the reason (``execution.claim``), instead of the message being lost
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- live event stream (Channels) --------------------------------------------
# Events are stored in the database first; the channel layer only wakes the
# websocket consumers of a run up ("new events after seq N"), and consumers
# read the events from the database.  With Redis the wake-up crosses
# processes (the run worker -> the web server); on the embedded default the
# in-memory layer reaches only this process, so consumers also poll the
# database every LEGO_EVENT_POLL_S.
if REDIS_URL:
    # socket_timeout None: redis-py 8 reads with a 5 s timeout by default,
    # which breaks the layer's blocking receive (BZPOPMIN) of every quiet
    # consumer after 5 s (channels_redis issue 422, redis-py issue 4091)
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py's pool raises past max_connections (100 by default) instead of
            # waiting: 200 viewers leaving a run at once failed to leave its group
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None, "max_connections": 1000}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
LEGO_EVENT_POLL_S = float(env("LEGO_EVENT_POLL_S", "5" if REDIS_URL else "0.5"))

# --- JSON API (Django REST framework): session or token authentication -------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}

# --- LEGO ----------------------------------------------------------------------
LEGO_RUN_TIMEOUT_S = float(env("LEGO_RUN_TIMEOUT_S", "3600"))
def positive_seconds(variable: str, default: float | None) -> float | None:
    """``$variable`` as a number of seconds above 0, ``default`` when unset; ValueError (the server does not start) for anything else."""
    text = env(variable)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ValueError(f"{variable} must be a number of seconds above 0, got {text!r}")
    return value


LEGO_LOAD_TIMEOUT_S = positive_seconds("LEGO_LOAD_TIMEOUT_S", StageLimits().load_s)
# each stage's limit (lego_core.config.StageLimits): {stage: seconds, or None for lego_core's default}
LEGO_STAGE_LIMITS = {stage: positive_seconds(f"LEGO_STAGE_LIMIT_{stage.upper()}_S", getattr(StageLimits(), f"{stage}_s")) for stage in STAGES}
if env("LEGO_STAGE_LIMIT_LOAD_S") is None:
    LEGO_STAGE_LIMITS["load"] = LEGO_LOAD_TIMEOUT_S
# resource limits of a run's jailed child (lego_core.config.SandboxLimits);
# None leaves lego_core's default
LEGO_RUN_LIMITS = {
    name: int(value) if (value := env(variable)) is not None else None
    for name, variable in (("memory_mb", "LEGO_RUN_MEMORY_MB"), ("cpu_s", "LEGO_RUN_CPU_S"),
                           ("processes", "LEGO_RUN_PROCESSES"), ("file_mb", "LEGO_RUN_FILE_MB"))
}
LEGO_AGENT_FANOUT = env_bool("LEGO_AGENT_FANOUT", True)
LEGO_AGENTS = int(env("LEGO_AGENTS", "4"))
LEGO_RUN_MAX_TOKENS = int(env("LEGO_RUN_MAX_TOKENS", "500000")) or None
# a web run's search budget: wall seconds and patience (no better plan), lego_core's product defaults; 0: none
def seconds_or_none(variable: str, default: float) -> float | None:
    """``$variable`` as seconds: ``0`` or ``none`` for no limit; ValueError (the server does not start) for anything else not above 0."""
    text = env(variable, str(default)).strip().lower()
    if text in ("0", "none", ""):
        return None
    value = float(text)
    if not 0 < value < float("inf"):
        raise ValueError(f"{variable} must be a number of seconds above 0, 0 or none, got {text!r}")
    return value


LEGO_RUN_MAX_SEARCH_S = seconds_or_none("LEGO_RUN_MAX_SEARCH_S", DEFAULT_MAX_SEARCH_S)
LEGO_RUN_PATIENCE_S = seconds_or_none("LEGO_RUN_PATIENCE_S", DEFAULT_PATIENCE_S)
LEGO_AGENT_TIMEOUT_S = float(env("LEGO_AGENT_TIMEOUT_S", "300"))
# the persistent kernel cache every run worker of this machine reads and writes
LEGO_CACHE_DIR = env("LEGO_CACHE_DIR", str(VAR_DIR / "kernel-cache"))

# --- no run stuck: heartbeats, the reaper, time limits, fair share ---------------
# A running run's task writes Run.heartbeat_at every LEGO_HEARTBEAT_S and, at
# the same time, notices a cancel; Celery beat sends ``runs.reap`` every
# LEGO_REAP_EVERY_S, which fails the running runs whose heartbeat is older
# than LEGO_HEARTBEAT_TIMEOUT_S (their worker died or stopped answering).
LEGO_HEARTBEAT_S = float(env("LEGO_HEARTBEAT_S", "5"))
LEGO_HEARTBEAT_TIMEOUT_S = float(env("LEGO_HEARTBEAT_TIMEOUT_S", "45"))
LEGO_REAP_EVERY_S = float(env("LEGO_REAP_EVERY_S", "15"))
# the reaper also sends again the task of a run still queued this long after
# its message went out (a broker restarted without its data lost it)
LEGO_RESEND_QUEUED_S = float(env("LEGO_RESEND_QUEUED_S", "300"))


def positive_count(variable: str, default: int) -> int:
    """``$variable`` as a whole number above 0, ``default`` when unset; ValueError (the server does not start) for anything else."""
    text = env(variable)
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{variable} must be a whole number above 0, got {text!r}")
    return value


# fair share (runs/queue.py): runs one user may have queued (more are refused
# at upload with a message), running on all run workers together (more wait
# while other users' runs start: workers take users in turn), and queued or
# running at once (refused at upload)
LEGO_MAX_QUEUED_PER_USER = positive_count("LEGO_MAX_QUEUED_PER_USER", 3)
LEGO_MAX_RUNNING_PER_USER = positive_count("LEGO_MAX_RUNNING_PER_USER", 1)
LEGO_MAX_RUNS_IN_FLIGHT = positive_count("LEGO_MAX_RUNS_IN_FLIGHT", LEGO_MAX_QUEUED_PER_USER + LEGO_MAX_RUNNING_PER_USER)
# whether the run workers have a CUDA GPU: True, False, or None (they run on
# this machine: ask it; runs/devices.py)
_worker_cuda = (env("LEGO_WORKER_CUDA", "auto") or "auto").lower()
LEGO_WORKER_CUDA = None if _worker_cuda == "auto" else _worker_cuda in ("1", "true", "yes", "on")
# Celery's limits on the run task, past lego_core's own (the run's timeout
# plus the file's load limit): the soft one raises in the task (the run
# fails with a message), the hard one kills the pool process (the run is
# failed on the message's next delivery, or by the reaper)
LEGO_RUN_SOFT_LIMIT_S = LEGO_RUN_TIMEOUT_S + LEGO_STAGE_LIMITS["load"] + 60
LEGO_RUN_HARD_LIMIT_S = LEGO_RUN_SOFT_LIMIT_S + 60
if REDIS_URL:
    # with acks_late, Redis hands an unacknowledged message to another
    # worker after the visibility timeout: keep it above the longest run
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": int(LEGO_RUN_HARD_LIMIT_S + 600)}
# the reaper runs on the agents worker: it never waits behind a run
CELERY_TASK_ROUTES["runs.reap"] = {"queue": LEGO_AGENT_QUEUE}
CELERY_BEAT_SCHEDULE = {
    "reap-stuck-runs": {
        "task": "runs.reap",
        "schedule": LEGO_REAP_EVERY_S,
        "options": {"expires": LEGO_REAP_EVERY_S},  # a late one is dropped, not piled up
    }
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"webapp": {"handlers": ["console"], "level": env("LEGO_LOG_LEVEL", "INFO")}},
}
