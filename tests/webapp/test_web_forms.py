"""The upload form: overrides text, file checks."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from webapp.runs.forms import RunForm, format_overrides, split_overrides


def form_with(overrides="", filename="model.py", content=b"x = 1\n", **data):
    upload = SimpleUploadedFile(filename, content, content_type="text/x-python")
    return RunForm({"overrides": overrides, "dtype": "fp32", "device": "cpu", **data}, {"upload": upload})


@pytest.mark.parametrize(
    "text, items",
    [
        ("", []),
        ("batch_size=2", ["batch_size=2"]),
        ("batch_size=2, d_model=32", ["batch_size=2", "d_model=32"]),
        ("batch_size=2\n\n d_model = 32 \r\n", ["batch_size=2", "d_model = 32"]),
    ],
)
def test_split_overrides_takes_commas_and_lines(text, items):
    assert split_overrides(text) == items


def test_format_overrides_round_trips():
    assert split_overrides(format_overrides({"rows": 16, "eps": 1e-05})) == ["rows=16", "eps=1e-05"]


@pytest.mark.parametrize("content, says", [
    (b"import torch\n\nx = '\xff'\n", "model.py:3: the file is not UTF-8 text: byte 0xff is not UTF-8"),
    ("import torch\n".encode("utf-16"), "model.py:1: the file is not UTF-8 text: it is UTF-16"),
    (b"x = 1\n\x00\x00\n", "model.py:2: the file is not UTF-8 text: it holds null bytes"),
])
def test_a_file_that_is_not_utf8_text_is_refused_saying_so_and_how_to_convert_it(content, says):
    form = form_with(content=content)
    assert not form.is_valid()
    message = " ".join(form.errors["upload"])
    assert message.startswith(says) and "Fix: save the file as UTF-8" in message and "iconv" in message
    assert "None" not in message


def test_a_utf8_file_with_a_byte_order_mark_is_accepted():
    assert form_with(content=b"\xef\xbb\xbfx = 1\n").is_valid()


def test_valid_form_parses_overrides_into_numbers():
    form = form_with("rows=16\nscale=0.5, causal=true", content=b"rows = 4\nscale = 1.0\ncausal = False\n")
    assert form.is_valid(), form.errors
    assert form.cleaned_data["overrides"] == {"rows": 16, "scale": 0.5, "causal": True}


@pytest.mark.parametrize("text, fragment", [("rows", "name=value"), ("rows=abc", "not a number"), ("2x=1", "name=value")])
def test_malformed_overrides_are_form_errors(text, fragment):
    form = form_with(text)
    assert not form.is_valid()
    assert fragment in " ".join(form.errors["overrides"])


def test_upload_must_be_a_python_file():
    form = form_with(filename="model.txt")
    assert not form.is_valid()
    assert "Python file" in " ".join(form.errors["upload"])


def test_upload_size_is_capped(settings):
    settings.LEGO_MAX_UPLOAD_BYTES = 10
    form = form_with(content=b"#" * 11)
    assert not form.is_valid()
    assert "larger than" in " ".join(form.errors["upload"])


def test_unknown_dtype_is_refused():
    form = form_with(dtype="fp8")
    assert not form.is_valid()
    assert "dtype" in form.errors


def test_the_agent_choice_defaults_to_template_and_rejects_unknown_names(monkeypatch):
    """Issue 12: the upload form's agent choice (template, llm, both)."""
    monkeypatch.setenv("LEGO_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    from django.core.files.uploadedfile import SimpleUploadedFile

    from webapp.runs.forms import RunForm

    def form(agent):
        data = {"overrides": "", "dtype": "fp32", "device": "cpu"} | ({"agent": agent} if agent is not None else {})
        return RunForm(data, {"upload": SimpleUploadedFile("m.py", b"x = 1\n")})

    for given, agent in ((None, "template"), ("both", "both"), ("llm", "llm")):
        checked = form(given)
        assert checked.is_valid() and checked.cleaned_data["agent"] == agent
    assert not form("gpt").is_valid()


def test_an_llm_agent_is_refused_while_the_server_has_no_endpoint(monkeypatch):
    """A new user chose the LLM agent on a server with no endpoint: the run
    retried api.openai.com without a key and ended on the library plan,
    saying why only inside each node's events.  The form (and so the API)
    says it before any run is made; the template agent is still taken."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from webapp.runs.forms import RunForm

    for name in ("LEGO_LLM_BASE_URL", "LEGO_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)

    def form(agent):
        return RunForm({"overrides": "", "dtype": "fp32", "device": "cpu", "agent": agent},
                       {"upload": SimpleUploadedFile("m.py", b"x = 1\n")})

    for agent in ("llm", "both"):
        refused = form(agent)
        assert not refused.is_valid()
        assert "no LLM endpoint configured" in refused.errors["agent"][0] and "template" in refused.errors["agent"][0]
    assert form("template").is_valid()
    monkeypatch.setenv("LEGO_LLM_API_KEY", "sk-test")
    assert form("llm").is_valid()


@pytest.fixture
def probe(monkeypatch):
    """``probe(answer)``: what lego_core.runtime.gpu_probe.cuda_available answers
    (this machine's CUDA); the calls it got are counted in ``probe.calls``."""
    from lego_core.runtime import gpu_probe

    calls = []

    def install(answer):
        monkeypatch.setattr(gpu_probe, "cuda_available", lambda: calls.append(1) or answer)
        return calls

    return install


@pytest.mark.parametrize("configured, probed, refused, how", [
    (False, None, True, "LEGO_WORKER_CUDA=0 says so"),
    (True, False, False, ""),  # the operator says the (other machine's) workers have GPUs: this machine is not asked
    (None, False, True, "torch.cuda.is_available() is False on this machine, where the run workers run"),
    (None, True, False, ""),
    (None, None, False, ""),  # the probe failed: nothing is refused, the run says what it finds
], ids=["setting-no", "setting-yes", "probe-no", "probe-yes", "probe-failed"])
def test_cuda_is_refused_up_front_where_the_run_workers_have_no_gpu(settings, probe, configured, probed, refused, how):
    """A new user asked for device=cuda on a server without a GPU and the
    run failed later; the form (and so the API) says it now, with what to
    choose instead.  cpu is never refused and never probes."""
    settings.LEGO_WORKER_CUDA = configured
    calls = probe(probed)
    form = form_with(device="cuda")
    assert form.is_valid() is not refused, form.errors
    if refused:
        message = " ".join(form.errors["device"])
        assert message.startswith(f"This server's run workers have no CUDA GPU ({how}), so a cuda run would only fail")
        assert "Choose device cpu" in message and "LEGO_WORKER_CUDA=1" in message
    assert len(calls) == (1 if configured is None else 0)
    calls.clear()
    assert form_with(device="cpu").is_valid() and calls == []


def test_the_setting_reads_the_environment(monkeypatch):
    import importlib

    import webapp.config.settings.base as base

    try:
        for value, expected in (("", None), ("auto", None), ("0", False), ("no", False), ("1", True), ("yes", True)):
            monkeypatch.setenv("LEGO_WORKER_CUDA", value)
            assert importlib.reload(base).LEGO_WORKER_CUDA is expected, value
    finally:
        monkeypatch.delenv("LEGO_WORKER_CUDA")
        importlib.reload(base)


def test_a_web_run_has_the_products_search_budget(monkeypatch):
    import importlib

    import webapp.config.settings.base as base
    from lego_core.config import DEFAULT_MAX_SEARCH_S, DEFAULT_PATIENCE_S

    try:
        monkeypatch.delenv("LEGO_RUN_MAX_SEARCH_S", raising=False)
        monkeypatch.delenv("LEGO_RUN_PATIENCE_S", raising=False)
        fresh = importlib.reload(base)
        assert (fresh.LEGO_RUN_MAX_SEARCH_S, fresh.LEGO_RUN_PATIENCE_S) == (DEFAULT_MAX_SEARCH_S, DEFAULT_PATIENCE_S)
        for value, expected in (("none", None), ("0", None), ("45", 45.0), ("2.5", 2.5)):
            monkeypatch.setenv("LEGO_RUN_PATIENCE_S", value)
            assert importlib.reload(base).LEGO_RUN_PATIENCE_S == expected, value
        for bad in ("-1", "inf", "soon"):
            monkeypatch.setenv("LEGO_RUN_MAX_SEARCH_S", bad)
            with pytest.raises(ValueError):
                importlib.reload(base)
    finally:
        monkeypatch.delenv("LEGO_RUN_MAX_SEARCH_S", raising=False)
        monkeypatch.delenv("LEGO_RUN_PATIENCE_S", raising=False)
        importlib.reload(base)


def test_a_web_runs_config_carries_the_search_budget(settings):
    from webapp.runs.execution import run_config

    settings.LEGO_RUN_MAX_SEARCH_S, settings.LEGO_RUN_PATIENCE_S = 77.0, None
    config = run_config(owner_id=1)
    assert config.max_search_s == 77.0 and config.patience_s is None
