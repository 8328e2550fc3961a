"""List and tuple constants through the web app (issue 24): the upload form,
the page, the JSON API and the run worker.

A model file with ``sizes = [400, 800]`` and ``kernel = (3, 3)`` shows them
as fields (``test_upload_form_js.py``), takes ``sizes=[8, 4]`` and
``kernel=(1, 1)`` on the page and the API alike, refuses an override of
another kind at submit with the message the run would fail with (issue 28:
nothing is queued), keeps a tuple a tuple through the database (JSON has
none) and hands the run worker the values as they were typed.
"""
import html

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from webapp.runs import execution
from webapp.runs.forms import RunForm, format_overrides, split_overrides
from webapp.runs.models import Run
from webapp.runs.tasks import optimize_run

LIST_MODEL = b'''import torch
import torch.nn as nn

rows = 4
sizes = [400, 800]
kernel = (3, 3)


class Model(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.lin = nn.Linear(8, sizes[-1])

    def forward(self, x):
        return torch.relu(self.lin(x))[..., : kernel[0]]


def get_inputs():
    return [torch.randn(rows, 8)]


def get_init_inputs():
    return [sizes]
'''

# what the page and the API both say, for overrides the file's constants refuse
WRONG_KINDS = [
    ("sizes=(8, 4)", "override sizes=(8, 4): `sizes` is a list of whole numbers (sizes = [400, 800] in the file). "
                     "Give sizes a list of whole numbers in square brackets, like the file's sizes=[400, 800]."),
    ("sizes=[8, 4.5]", "override sizes=[8, 4.5]: `sizes` is a list of whole numbers (sizes = [400, 800] in the file); "
                       "sizes[1]=4.5 is not a whole number. Give sizes a list of whole numbers in square brackets, "
                       "like the file's sizes=[400, 800]."),
    ("kernel=[1, 1]", "override kernel=[1, 1]: `kernel` is a tuple of whole numbers (kernel = (3, 3) in the file). "
                      "Give kernel a tuple of whole numbers in parentheses, like the file's kernel=(3, 3)."),
    ("rows=true", "override rows=true: `rows` is an integer constant (rows = 4 in the file). Give rows a whole number."),
    ("sizes=[8, nan]", "override sizes[1]='nan' is not a finite number. Give sizes[1] a finite value: nan, inf and "
                       "numbers beyond ±1.8e308 cannot be used."),
]


def form_with(overrides: str) -> RunForm:
    upload = SimpleUploadedFile("lists.py", LIST_MODEL, content_type="text/x-python")
    return RunForm({"overrides": overrides, "dtype": "fp32", "device": "cpu"}, {"upload": upload})


# --- the overrides text ---------------------------------------------------------


@pytest.mark.parametrize("text, items", [
    ("sizes=[8, 4], kernel=(1, 1)\nrows=2", ["sizes=[8, 4]", "kernel=(1, 1)", "rows=2"]),
    ("pairs=[(1, 2), (3, 4)], rows=2", ["pairs=[(1, 2), (3, 4)]", "rows=2"]),
    ("sizes=[8, 4", ["sizes=[8, 4"]),  # unclosed: one item, which the parser refuses
    ("sizes=[8,\n4], rows=2", ["sizes=[8,", "4]", "rows=2"]),  # a new line always ends an item
    ("a=1)], b=2", ["a=1)]", "b=2"]),
])
def test_split_overrides_keeps_a_lists_own_commas(text, items):
    assert split_overrides(text) == items


def test_format_overrides_round_trips_lists_and_tuples():
    overrides = {"sizes": [8, 4], "kernel": (1, 1), "one": (2,), "flag": True}
    assert format_overrides(overrides) == "sizes=[8, 4]\nkernel=(1, 1)\none=(2,)\nflag=true"
    form = form_with(format_overrides({"sizes": [8, 4], "kernel": (1, 1)}))
    assert form.is_valid(), form.errors
    assert form.cleaned_data["overrides"] == {"sizes": [8, 4], "kernel": (1, 1)}


# --- the form and the page ------------------------------------------------------------


def test_the_form_takes_list_and_tuple_overrides_of_the_files_kind():
    form = form_with("sizes=[8, 4, 2], kernel=(1, 1), rows=2")
    assert form.is_valid(), form.errors
    overrides = form.cleaned_data["overrides"]
    assert overrides == {"sizes": [8, 4, 2], "kernel": (1, 1), "rows": 2} and type(overrides["kernel"]) is tuple


@pytest.mark.parametrize("overrides, message", WRONG_KINDS)
def test_the_form_refuses_an_override_of_another_kind_with_the_runs_message(overrides, message):
    form = form_with(overrides)
    assert not form.is_valid()
    assert form.errors["overrides"] == [message]


@pytest.mark.django_db
def test_a_tuple_is_stored_as_its_text_and_reaches_the_run_worker_as_a_tuple(user_client, queued, monkeypatch, sample_report):
    response = user_client.post(reverse("runs:new"), {
        "upload": SimpleUploadedFile("lists.py", LIST_MODEL), "overrides": "sizes=[8, 4], kernel=(1, 1)",
        "dtype": "fp32", "device": "cpu",
    })
    assert response.status_code == 302, response.content.decode()[-2000:]
    run = Run.objects.get()
    assert run.overrides == {"sizes": [8, 4], "kernel": "(1, 1)"} and run.state == "queued"
    page = html.unescape(user_client.get(reverse("runs:detail", args=[run.id])).content.decode())
    assert "fp32 on cpu, sizes=[8, 4], kernel=(1, 1)" in page
    given = []
    monkeypatch.setattr(execution, "optimize", lambda spec, out_dir, config=None, sink=None, run_id=None: given.append(spec) or sample_report)
    optimize_run(str(run.id))
    assert given[0].overrides == {"sizes": [8, 4], "kernel": (1, 1)} and type(given[0].overrides["kernel"]) is tuple


@pytest.mark.django_db
@pytest.mark.badinput
@pytest.mark.parametrize("overrides, message", WRONG_KINDS)
def test_a_wrong_kind_is_refused_at_submit_with_one_message_on_the_page_and_the_api(user_client, api, queued, overrides, message):
    """Issue 28: a wrong-typed override was queued and failed 15-22 s later."""
    page = user_client.post(reverse("runs:new"), {
        "upload": SimpleUploadedFile("lists.py", LIST_MODEL), "overrides": overrides, "dtype": "fp32", "device": "cpu",
    })
    assert page.status_code == 200 and message in html.unescape(page.content.decode())
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("lists.py", LIST_MODEL), "overrides": overrides},
                        format="multipart")
    assert response.status_code == 400 and response.json()["errors"] == {"overrides": [message]}
    assert not Run.objects.exists() and queued == []


# --- the JSON API -------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("overrides", [
    '{"sizes": [8, 4], "kernel": [1, 1]}',  # JSON has no tuple: an array takes the file's constant's kind
    '{"sizes": [8, 4], "kernel": "(1, 1)"}',
    "sizes=[8, 4], kernel=(1, 1)",
])
def test_the_api_takes_lists_and_tuples_as_json_or_text(api, queued, overrides):
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("lists.py", LIST_MODEL), "overrides": overrides},
                        format="multipart")
    assert response.status_code == 201, response.content
    assert Run.objects.get().overrides == {"sizes": [8, 4], "kernel": "(1, 1)"}
    assert response.json()["overrides"] == {"sizes": [8, 4], "kernel": "(1, 1)"}


@pytest.mark.django_db
@pytest.mark.badinput
@pytest.mark.parametrize("overrides, message", [
    ('{"kernel": [1]}', "override kernel=(1,)"),  # written as the file's tuple, then taken
    ('{"sizes": [8, "a"]}', "override sizes[1]='\"a\"' is not a number. Give sizes[1] an integer or a float."),
    ('{"sizes": [8, null]}', "override sizes[1]='null' is not a number."),
    ('{"sizes": [8, {"a": 1}]}', "is not a number."),
    ('{"sizes": [[[[[8]]]]]}', "override sizes is nested more than 4 deep. Give sizes lists nested at most 4 deep."),
    ('{"sizes": [8, 4.5]}', "sizes[1]=4.5 is not a whole number"),
])
def test_json_arrays_are_checked_like_typed_lists(api, queued, overrides, message):
    response = api.post(reverse("api:runs"), {"model": SimpleUploadedFile("lists.py", LIST_MODEL), "overrides": overrides},
                        format="multipart")
    if message.startswith("override kernel=(1,)"):
        assert response.status_code == 201 and Run.objects.get().overrides == {"kernel": "(1,)"}
        return
    assert response.status_code == 400, response.content
    assert any(message in m for m in response.json()["errors"]["overrides"]), response.json()
    assert not Run.objects.exists() and queued == []
