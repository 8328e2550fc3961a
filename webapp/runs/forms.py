"""The upload form. It checks the overrides text with lego_core's own parser
(pure text parsing); the uploaded file is stored, never imported here."""
from __future__ import annotations

from pathlib import Path

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.text import get_valid_filename

from lego_core import ProblemError, parse_overrides
from lego_core.load.override_checks import check_overrides_in_source
from lego_core.load.overrides import file_constants
from lego_core.load.spec import decode_source, format_override, overrides_to_json, syntax_problem
from webapp.runs.models import Run


def source_text(upload) -> str:
    """The uploaded file's text (``lego_core.load.spec.decode_source``: UTF-8 with
    no null byte); a ValidationError that says what is wrong, on which line
    and how to convert the file, for anything else.  The file is left at
    its start."""
    upload.seek(0)
    data = upload.read()
    upload.seek(0)
    try:
        return decode_source(data, upload_name(upload))
    except ProblemError as exc:
        raise forms.ValidationError(str(exc), code="not_utf8") from None


def upload_name(upload) -> str:
    """The uploaded file's name as messages show it (no folders)."""
    return get_valid_filename(Path(upload.name).name)


def compiled_source(upload) -> str:
    """:func:`source_text`, and the file must compile (``spec.syntax_problem``:
    what the run would fail with, ``model.py:6: syntax error: ...``), so
    that a file that cannot run is refused at submit, not queued.  Never
    run.  A ValidationError with that message otherwise."""
    source = source_text(upload)
    error = syntax_problem(source, upload_name(upload))
    if error is not None:
        raise forms.ValidationError(str(error), code="syntax")
    return source


def too_large_text(size: int) -> str:
    """The form's words for a model file over ``LEGO_MAX_UPLOAD_BYTES``
    (``upload_form.js`` says the same before sending it)."""
    from webapp.config.body_limit import size_text

    return (f"The file is larger than {settings.LEGO_MAX_UPLOAD_BYTES // 1000} kB: it is {size_text(size)} ({size:,} bytes). "
            "A model file is Python source, usually a few kB; choose the model's .py file.")


def split_overrides(text: str) -> list[str]:
    """``"a=1, b=[2, 3]\\nc=(4,)"`` -> ``["a=1", "b=[2, 3]", "c=(4,)"]``: items
    are separated by new lines, and by commas outside brackets (a list's
    or tuple's own commas stay in it)."""
    items, current, depth = [], [], 0
    for char in text or "":
        if char in "[(":
            depth += 1
        elif char in ")]":
            depth = max(depth - 1, 0)
        if char == "\n" or (char == "," and depth == 0):
            items.append("".join(current))
            current, depth = [], 0
        else:
            current.append(char)
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


def format_overrides(overrides: dict) -> str:
    """``{"rows": 16, "sizes": [64, 32]}`` as the overrides box's text, one
    ``name=value`` per line, as :func:`split_overrides` reads it back."""
    return "\n".join(f"{name}={format_override(value)}" for name, value in overrides.items())


def field_message(exc: ProblemError) -> str:
    """A ProblemError as a form field's message: what is wrong, then how to
    fix it (the same text on the page and in the JSON API's errors)."""
    return f"{exc.message} {exc.hint[:1].upper()}{exc.hint[1:]}" if exc.hint else exc.message


class RunForm(forms.ModelForm):
    overrides = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "batch_size=2\nd_model=64"}),
        help_text="Module-level constants to change, one name=value per line or comma-separated "
        "(a list as [64, 32], a tuple as (3, 3)); the fields above fill it in once a file is chosen.",
    )

    agent = forms.ChoiceField(
        required=False,
        choices=[("template", "template (offline)"), ("llm", "LLM (the server's endpoint)"), ("both", "both: the best verified kernel wins")],
        help_text="Who writes kernels. An LLM uses the server's configured OpenAI-compatible endpoint.",
    )

    def clean_agent(self) -> str:
        """The agent choice; an LLM is refused while the server has no
        endpoint (its run would only retry a default endpoint and end on
        the library plan)."""
        from lego_core.agents.llm.settings import endpoint_missing

        agent = self.cleaned_data.get("agent") or "template"
        missing = endpoint_missing() if agent in ("llm", "both") else None
        if missing:
            raise forms.ValidationError(
                "This server has no LLM endpoint configured (its operator sets LEGO_LLM_BASE_URL or LEGO_LLM_API_KEY "
                "where the agents worker starts; README, LLM agents). Choose the template agent.")
        return agent

    def clean_device(self) -> str:
        """The device; ``cuda`` is refused up front where the run workers have
        no CUDA GPU (``devices.cuda_refusal``), not when the run fails later."""
        from webapp.runs import devices

        device = self.cleaned_data.get("device") or "cpu"
        refusal = devices.cuda_refusal() if device == "cuda" else None
        if refusal:
            raise forms.ValidationError(refusal, code="no_cuda")
        return device

    class Meta:
        model = Run
        fields = ["upload", "overrides", "dtype", "device", "agent"]
        labels = {"upload": "Model file (.py)"}
        help_texts = {"upload": "KernelBench format: class Model, get_inputs(), get_init_inputs()."}

    def clean_upload(self):
        upload = self.cleaned_data["upload"]
        if not upload.name.endswith(".py"):
            raise forms.ValidationError("Upload a Python file (.py).")
        if upload.size > settings.LEGO_MAX_UPLOAD_BYTES:
            raise forms.ValidationError(too_large_text(upload.size))
        compiled_source(upload)  # not text, not UTF-8, or does not compile: refused now, with the line and the fix, not after a run
        return upload

    def clean_overrides(self) -> dict:
        try:
            return parse_overrides(split_overrides(self.cleaned_data["overrides"]))
        except ProblemError as exc:
            raise forms.ValidationError(field_message(exc)) from None

    def clean(self) -> dict:
        """Overrides the file's syntax tree already refuses are refused now,
        with the message the run would fail with later
        (``override_checks.check_overrides_in_source``): a name the file
        never assigns at module level, a value of another kind than the
        file's constant (``rows=true`` for ``rows = 4``, ``sizes=(64,32)``
        for a list, ``sizes=[6.5]`` for a list of integers), a negative
        value for a positive integer constant (``rows=-5``).  Nothing is
        queued for such a submission (issue 28)."""
        cleaned = super().clean()
        upload, overrides = cleaned.get("upload"), cleaned.get("overrides")
        if upload and overrides:
            try:
                check_overrides_in_source(overrides, source_text(upload))
            except ProblemError as exc:
                self.add_error("overrides", field_message(exc))
            except forms.ValidationError:  # not text: the upload field says so
                pass
        return cleaned

    def submit(self, owner) -> Run:
        """Save the valid form as ``owner``'s run and queue its optimization
        once the transaction commits (the page and the JSON API both use it);
        a run the broker does not take is failed at once with the reason
        (``tasks.queue_run_or_fail``) and returned so.
        When the row cannot be saved, the stored upload and its folders are
        removed again before the error propagates: no orphan files.
        Raises ``queue.RunLimitReached`` (nothing saved, no file written)
        when ``owner`` already has ``LEGO_MAX_RUNS_IN_FLIGHT`` runs queued or
        running."""
        from django.db import transaction

        from webapp.runs import queue, tasks

        run = self.save(commit=False)
        run.owner = owner
        # letters, digits, -, _ and . only: the name is shown on pages and names the download
        run.original_filename = get_valid_filename(Path(self.cleaned_data["upload"].name).name)
        run.overrides = overrides_to_json(self.cleaned_data["overrides"])  # a tuple as its text: JSON has none
        run.override_order = list(self.cleaned_data["overrides"])  # as typed (jsonb reorders keys)
        sent: list[bool] = []
        try:
            with transaction.atomic():
                queue.check_in_flight_limit(owner)
                run.save()
                transaction.on_commit(lambda: sent.append(tasks.queue_run_or_fail(str(run.id))))
        except BaseException:
            remove_stored_upload(run)
            raise
        if sent == [False]:  # the broker did not take it: the run was failed with the reason
            run.refresh_from_db()
        return run


def remove_stored_upload(run: Run) -> None:
    """Delete ``run``'s stored upload and the run's folders it leaves empty
    (``runs/<id>/upload`` and ``runs/<id>``); never raises."""
    if not run.upload or not run.upload.name:
        return
    try:
        path = Path(run.upload.path)
        run.upload.storage.delete(run.upload.name)
        for folder in (path.parent, path.parent.parent):
            folder.rmdir()  # only when empty
    except (OSError, ValueError):
        pass


KEPT = "lego-kept-upload"  # the session key of a file kept across a validation error


def keep_upload(request, upload) -> tuple[str, str]:
    """Keep the valid ``upload`` of a form that failed for another reason in
    the session (at most LEGO_MAX_UPLOAD_BYTES) so that the form can use it
    again; returns its name and text."""
    upload.seek(0)
    text = upload.read().decode("utf-8", errors="replace")
    request.session[KEPT] = {"name": upload.name, "text": text}
    return upload.name, text


def constants_of(source: str, strict: bool = False) -> list[dict]:
    """``[{"name", "value", "text"}]``: the file's module-level constants,
    read from its syntax tree (``lego_core.load.overrides.file_constants``),
    never run; ``text`` is the value as an override is typed
    (``true``, ``[400, 800]``, ``(3, 3)``: JSON would make a tuple a list).
    A file that does not parse has none (``strict``: SyntaxError)."""
    try:
        found = file_constants(source)
    except SyntaxError:
        if strict:
            raise
        return []
    return [{"name": name, "value": value, "text": format_override(value)} for name, value in found.items()]


def kept_upload(request) -> SimpleUploadedFile | None:
    """The kept file, when the form was sent without a new one and asks for
    it (``keep_upload=1``)."""
    kept = request.session.get(KEPT)
    if not kept or request.POST.get("keep_upload") != "1":
        return None
    return SimpleUploadedFile(kept["name"], kept["text"].encode(), content_type="text/x-python")


def forget_upload(request) -> None:
    request.session.pop(KEPT, None)


def example_names() -> list[str]:
    """The reference models' file names (LEGO_EXAMPLES_DIR), sorted."""
    folder = Path(settings.LEGO_EXAMPLES_DIR)
    return sorted(p.name for p in folder.glob("*.py")) if folder.is_dir() else []


def example_cpu_sizes() -> dict[str, dict]:
    """The examples' CPU-sized overrides, ``{file name: {constant: value}}``,
    from ``tiny.json`` beside them (LEGO_EXAMPLES_DIR): the reference files
    are GPU-sized, far too slow through Triton's interpreter on a CPU.  Only
    examples that exist and plain values; {} without the file or when it
    does not parse."""
    import json

    try:
        table = json.loads((Path(settings.LEGO_EXAMPLES_DIR) / "tiny.json").read_text())
    except (OSError, ValueError):
        return {}
    names = set(example_names())
    return {name: sizes for name, sizes in table.items() if name in names and isinstance(sizes, dict)} \
        if isinstance(table, dict) else {}
