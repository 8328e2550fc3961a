"""Where the language model is and how it is called.

Read from the environment (``from_env``) or from a mapping such as Django
settings (``from_mapping``), names below.  The API key is kept out of
``repr``, ``public()`` and everything LEGO writes (events, logs, reports,
pages): only ``client.chat`` hands it to the ``openai`` client.

======================  ===========================================  =================
variable                meaning                                      default
======================  ===========================================  =================
LEGO_LLM_BASE_URL       the endpoint (``.../v1``)                    https://api.openai.com/v1
LEGO_LLM_MODEL          model name the server knows                  gpt-4o-mini
LEGO_LLM_API_KEY        API key (else ``OPENAI_API_KEY``)            "none" (local servers)
LEGO_LLM_TEMPERATURE    sampling temperature                         0.2
LEGO_LLM_MAX_TOKENS     completion tokens per call                   4096
LEGO_LLM_TIMEOUT_S      seconds per request                          120
LEGO_LLM_RETRIES        retries of a failed request (429/5xx/timeout) 3
LEGO_LLM_STREAM         stream replies (1) or not (0)                1
LEGO_LLM_PRICE_PROMPT   USD per million prompt tokens (cost report)  0
LEGO_LLM_PRICE_COMPLETION USD per million completion tokens          0
======================  ===========================================  =================
"""
from __future__ import annotations

import dataclasses
import os
from typing import Mapping

PREFIX = "LEGO_LLM_"


@dataclasses.dataclass(frozen=True)
class LLMSettings:
    """How to call the endpoint.  ``timeout_s``: per request (seconds);
    ``retries``: further tries of a request that failed with 429, a 5xx, a
    timeout or a broken connection (exponential backoff from ``backoff_s``);
    ``failures_to_give_up``: calls in a row that failed after their retries
    before the agent stops asking this endpoint (the run goes on without it);
    prices in USD per million tokens (0: cost not reported)."""

    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    api_key: str = dataclasses.field(default="none", repr=False)
    temperature: float = 0.2
    max_tokens: int = 4096
    timeout_s: float = 120.0
    retries: int = 3
    backoff_s: float = 1.0
    stream: bool = True
    failures_to_give_up: int = 2
    price_prompt: float = 0.0
    price_completion: float = 0.0

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"LEGO_LLM_BASE_URL must be an http(s) URL, got {self.base_url!r}")
        if not self.model:
            raise ValueError("LEGO_LLM_MODEL is empty; name the model the endpoint serves")
        if self.max_tokens < 1 or self.timeout_s <= 0 or self.retries < 0 or self.failures_to_give_up < 1:
            raise ValueError("LEGO_LLM_MAX_TOKENS, _TIMEOUT_S must be positive and LEGO_LLM_RETRIES at least 0")

    @classmethod
    def from_mapping(cls, values: Mapping[str, object], prefix: str = PREFIX) -> "LLMSettings":
        """Settings from ``values`` (``os.environ``, Django settings as a dict):
        keys ``<prefix>BASE_URL`` ... as in the module docstring; missing keys
        keep their defaults.  Raises ValueError for a value of the wrong kind."""
        kwargs: dict = {}
        for field in dataclasses.fields(cls):
            raw = values.get(prefix + field.name.upper())
            if raw is None or raw == "":
                continue
            kwargs[field.name] = _convert(field, raw)
        if "api_key" not in kwargs and values.get("OPENAI_API_KEY"):
            kwargs["api_key"] = str(values["OPENAI_API_KEY"])
        return cls(**kwargs)

    @classmethod
    def from_env(cls) -> "LLMSettings":
        """Settings from this process's environment (see the module docstring)."""
        return cls.from_mapping(os.environ)

    def public(self) -> dict:
        """JSON-ready, for reports and events: everything but the API key."""
        data = dataclasses.asdict(self)
        data.pop("api_key")
        return data

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What the tokens cost at the configured prices (USD)."""
        return (prompt_tokens * self.price_prompt + completion_tokens * self.price_completion) / 1e6


def endpoint_missing(env: Mapping[str, str] | None = None) -> str | None:
    """Why no LLM endpoint is configured in ``env`` (default: this process's
    environment), or None when one is: ``LEGO_LLM_BASE_URL`` (a local vLLM,
    Ollama or llama.cpp server) or an API key (``LEGO_LLM_API_KEY``,
    ``OPENAI_API_KEY``) is set.  Without either the agent would call
    api.openai.com with no key and give up after its retries."""
    env = os.environ if env is None else env
    if env.get(f"{PREFIX}BASE_URL") or env.get(f"{PREFIX}API_KEY") or env.get("OPENAI_API_KEY"):
        return None
    return ("no LLM endpoint is configured: set LEGO_LLM_BASE_URL (a local vLLM, Ollama or llama.cpp server) "
            "or LEGO_LLM_API_KEY (OpenAI) where the agents run (README, LLM agents)")


def _convert(field: dataclasses.Field, raw: object):
    kind = field.type if isinstance(field.type, str) else field.type.__name__
    try:
        if kind == "bool":
            return raw if isinstance(raw, bool) else str(raw).strip().lower() in ("1", "true", "yes", "on")
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise ValueError(f"{PREFIX}{field.name.upper()}: {raw!r} is not a {kind}") from None
    return str(raw)
