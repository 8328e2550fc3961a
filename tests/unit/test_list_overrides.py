"""List and tuple constants as overrides (issue 24: ``--set layer_sizes=[64,32]``).

``layer_sizes = [400, 800]`` or ``kernel = (3, 3)`` in a model file could not
be overridden: ``--set`` took numbers and true/false only.  Now a list or
tuple is written as Python writes it, checked by kind against the file's
value (``lego_core.load.override_checks``), applied where the file sets it so
that what is built from it follows, and shipped in ``optimized_model.py``'s
``OVERRIDES`` so that the downloaded model is built the same way.
"""
import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lego_core.load.override_checks import check_overrides_in_source, override_type_error
from lego_core.load.overrides import MAX_DEPTH, MAX_ITEMS, assigned_names, file_constants
from lego_core.load.problem import ProblemError, ProblemSpec, load_problem
from lego_core.load.spec import format_override, overrides_from_json, overrides_to_json, parse_overrides

REPO = Path(__file__).resolve().parents[2]

# a tiny MLP whose layer sizes come from a list constant, a derived constant
# built from it, and a tuple constant read by forward
MLP = """\
import torch
import torch.nn as nn

batch = 4
d_in = 16
layer_sizes = [400, 800]
scale = (2.0, 0.5)
hidden = layer_sizes[-1] * 2


class Model(nn.Module):
    def __init__(self, d_in, sizes, hidden):
        super().__init__()
        dims = [d_in, *sizes]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.out = nn.Linear(sizes[-1], hidden)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.out(x) * scale[0] + scale[1]


def get_inputs():
    return [torch.randn(batch, d_in)]


def get_init_inputs():
    return [d_in, layer_sizes, hidden]
"""


def write(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def parse_error(text: str, name: str = "sizes") -> ProblemError:
    with pytest.raises(ProblemError) as info:
        parse_overrides([f"{name}={text}"])
    return info.value


# --------------------------------------------------------------------------
# parsing
# --------------------------------------------------------------------------


def test_lists_and_tuples_parse_as_python_writes_them():
    got = parse_overrides(["sizes=[64,32]", "kernel=(3, 3)", "one=(3,)", "pairs=[(1, 2), (3, 4)]", "grid=[[1], [2, 3]]",
                           "flags=[true, False]", "empty=[]", "mixed=[-1, 1_000, 1e-5, +2]"])
    assert got == {"sizes": [64, 32], "kernel": (3, 3), "one": (3,), "pairs": [(1, 2), (3, 4)], "grid": [[1], [2, 3]],
                   "flags": [True, False], "empty": [], "mixed": [-1, 1000, 1e-5, 2]}
    assert type(got["sizes"]) is list and type(got["kernel"]) is tuple and type(got["pairs"][0]) is tuple
    assert [type(x) for x in got["mixed"]] == [int, int, float, int] and type(got["flags"][0]) is bool


def test_numbers_and_booleans_parse_as_before():
    assert parse_overrides(["batch_size=2", "eps=1e-5", "flag=false"]) == {"batch_size": 2, "eps": 1e-5, "flag": False}


@pytest.mark.parametrize("text, where, says", [
    ("[64, nan]", "sizes[1]='nan'", "is not a finite number"),
    ("[64, 1e400]", "sizes[1]='1e400'", "is not a finite number"),
    ("[1, 'a']", "sizes[1]=\"'a'\"", "is not a number"),
    ("[(1, 2), (3, x)]", "sizes[1][1]='x'", "is not a number"),
    ("[0x10]", "sizes[0]='0x10'", "is not a number"),
    ("[{1: 2}]", "sizes[0]='{1: 2}'", "is not a number"),
    ("[None]", "sizes[0]='None'", "is not a number"),
    (f"[{2**63}]", f"sizes[0]='{2**63}'", "is out of range"),
])
def test_an_element_that_is_no_number_is_named(text, where, says):
    err = parse_error(text)
    assert err.message == f"override {where} {says}.", err.message


@pytest.mark.parametrize("text, says", [
    ("(3)", "is not a list or tuple of numbers."),  # the number 3 in Python: a tuple of one needs its comma
    ("[1,", "is not a list or tuple of numbers: it does not parse."),
    ("[x for x in y]", "is not a list or tuple of numbers."),
    ("(x for x in y)", "is not a list or tuple of numbers."),
    ("[1] + [2]", "is not a list or tuple of numbers."),
])
def test_text_that_is_no_list_or_tuple_says_how_to_write_one(text, says):
    err = parse_error(text, "kernel")
    assert err.message.endswith(says) and f"kernel={text!r}" in err.message
    assert err.hint == "write it as Python does: kernel=[64,32] for a list, kernel=(3,3) for a tuple, kernel=(3,) for a one-element tuple."


def test_a_list_without_its_brackets_says_to_write_them():
    """``--set sizes=64,32``: refused (the form splits at commas, so it could not mean the same there),
    with both spellings and the shell's quotes."""
    err = parse_error("64,32")
    assert err.message == "override sizes='64,32' is not a number."
    assert "sizes=[64,32]" in err.hint and "sizes=(64,32)" in err.hint and "--set 'sizes=[64,32]'" in err.hint


@pytest.mark.badinput
@pytest.mark.parametrize("text, says", [
    ("[" * (MAX_DEPTH + 1) + "1" + "]" * (MAX_DEPTH + 1), f"is nested more than {MAX_DEPTH} deep"),
    ("[" * 5000 + "]" * 5000, "is nested more than"),  # beyond what Python's parser takes: still a clear refusal
    ("[" + ",".join(["1"] * (MAX_ITEMS + 1)) + "]", f"holds more than {MAX_ITEMS} numbers"),
    ("[" + ",".join(["1" * 40] * MAX_ITEMS) + "]", "is too long"),
])
def test_list_overrides_are_bounded(text, says):
    err = parse_error(text)
    assert says in err.message and len(err.message) < 200, err.message


def test_depth_and_count_at_the_bounds_are_taken():
    deep = "[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH
    assert parse_overrides([f"a={deep}"])["a"] == [[[[1]]]]
    assert len(parse_overrides(["a=[" + ",".join(["7"] * MAX_ITEMS) + "]"])["a"]) == MAX_ITEMS


@pytest.mark.parametrize("value", [2, -3, 1e-05, 0.1, True, False, [64, 32], (3, 3), (3,), (), [], [(1, 2), (3, 4)],
                                   ([1.5, 2], [True]), [[[1]]]])
def test_format_override_reads_back_to_the_same_value_and_type(value):
    back = parse_overrides([f"v={format_override(value)}"])["v"]
    assert back == value and repr(back) == repr(value)


def test_tuples_survive_json_as_their_text():
    """The web app stores overrides in a JSONField and the report in JSON: a tuple must not come back a list."""
    overrides = {"sizes": [64, 32], "kernel": (3, 3), "pairs": [(1, 2)], "rows": 2, "eps": 1e-5, "flag": True}
    stored = json.loads(json.dumps(overrides_to_json(overrides)))
    assert stored == {"sizes": [64, 32], "kernel": "(3, 3)", "pairs": "[(1, 2)]", "rows": 2, "eps": 1e-5, "flag": True}
    back = overrides_from_json(stored)
    assert back == overrides and repr(back) == repr(overrides)
    assert overrides_from_json(None) == {}


# --------------------------------------------------------------------------
# checked by kind against the file's value
# --------------------------------------------------------------------------


@pytest.mark.parametrize("file_value, value", [
    ([400, 800], [64, 32]),
    ([400, 800], [64, 32, 16]),  # the length may change
    ([400, 800], []),
    ((3, 3), (5, 5)),
    ((3, 3), (5,)),
    ([0.5, 1.0], [1, 2.5]),  # a float element may take an integer
    ([0.5, 1], [0.25]),  # ints and floats mixed: numbers
    ([[1, 2], [3, 4]], [[5], [6, 7, 8]]),
    ([(1, 2)], [(3, 4), (5, 6)]),
    ([True, False], [False]),
    ((3, [1, 2]), (1.5, True)),  # a mix the file itself mixes: anything of the right container
    (4, 2), (1e-5, 2), (1e-5, 0.5), (True, False),
])
def test_an_override_of_the_files_kind_is_taken(file_value, value):
    assert override_type_error("c", file_value, value) is None


@pytest.mark.parametrize("file_value, value, message, hint", [
    ([400, 800], (64, 32),
     "override layer_sizes=(64, 32): `layer_sizes` is a list of whole numbers (layer_sizes = [400, 800] in the file).",
     "give layer_sizes a list of whole numbers in square brackets, like the file's layer_sizes=[400, 800]."),
    ([400, 800], [64, 32.5],
     "override layer_sizes=[64, 32.5]: `layer_sizes` is a list of whole numbers (layer_sizes = [400, 800] in the file); "
     "layer_sizes[1]=32.5 is not a whole number.",
     "give layer_sizes a list of whole numbers in square brackets, like the file's layer_sizes=[400, 800]."),
    ([400, 800], [64, True], None, None),
    ([400, 800], 64, None, None),
    ((3, 3), [5, 5],
     "override layer_sizes=[5, 5]: `layer_sizes` is a tuple of whole numbers (layer_sizes = (3, 3) in the file).",
     "give layer_sizes a tuple of whole numbers in parentheses, like the file's layer_sizes=(3, 3)."),
    ((3, 3), 5, None, "a tuple of one is written with a comma: layer_sizes=(3,)."),
    ([[1, 2], [3, 4]], [1, 2],
     "override layer_sizes=[1, 2]: `layer_sizes` is a list of lists of whole numbers "
     "(layer_sizes = [[1, 2], [3, 4]] in the file); layer_sizes[0]=1 is not a list.", None),
    ([0.5, 1.0], [True], None, None),
    ([True], [1], "override layer_sizes=[1]: `layer_sizes` is a list of true/false values (layer_sizes = [True] in the file); "
     "layer_sizes[0]=1 is not true or false.", None),
    (4, [1], "override layer_sizes=[1]: `layer_sizes` is an integer constant (layer_sizes = 4 in the file).",
     "give layer_sizes a whole number."),
    (4, True, "override layer_sizes=true: `layer_sizes` is an integer constant (layer_sizes = 4 in the file).", None),
    (1e-5, True, None, "give layer_sizes a number (an integer or a float)."),
    (True, 1, "override layer_sizes=1: `layer_sizes` is a true/false constant (layer_sizes = True in the file).",
     "give layer_sizes true or false."),
])
def test_an_override_of_another_kind_names_the_constant_the_files_value_and_what_was_given(file_value, value, message, hint):
    err = override_type_error("layer_sizes", file_value, value, "/m/model.py", 6)
    assert err is not None
    assert err.path == "/m/model.py" and err.line == 6 and str(err).startswith("model.py:6: override layer_sizes=")
    assert f"override layer_sizes={format_override(value)}: `layer_sizes` is " in err.message
    assert "in the file)" in err.message and err.hint.startswith("give layer_sizes ")
    if message:
        assert err.message == message
    if hint:
        assert err.hint.endswith(hint), err.hint


SOURCE = """\
import torch
batch = 4
layer_sizes = [400, 800]  # line 3
kernel: tuple = (3, 3)
hidden = layer_sizes[-1] * 2
if batch > 2:
    late = 1
a, b = 1, 2
batch += 0


def get_init_inputs():
    inner = 5
    return []


class Model:
    attr = 3
"""


def test_the_syntax_tree_refuses_a_wrong_kind_before_anything_runs():
    with pytest.raises(ProblemError) as info:
        check_overrides_in_source({"batch": 2, "layer_sizes": (64, 32)}, SOURCE, "/m/model.py")
    assert info.value.line == 3 and str(info.value).startswith("model.py:3: override layer_sizes=(64, 32): `layer_sizes` is a list")
    with pytest.raises(ProblemError, match="kernel=\\[5, 5\\]: `kernel` is a tuple"):
        check_overrides_in_source({"kernel": [5, 5]}, SOURCE)


def test_the_syntax_tree_leaves_computed_constants_to_the_load():
    """``hidden`` is computed (``layer_sizes[-1] * 2``): only running the file says it is an int."""
    check_overrides_in_source({"hidden": [1], "late": 2.5, "a": 1, "b": 2, "layer_sizes": [1, 2, 3], "kernel": (1,)}, SOURCE)
    check_overrides_in_source({"anything": 1}, "def (:\n")  # a file that does not parse: the load says so


def test_the_syntax_tree_refuses_a_name_no_module_level_assignment_binds():
    for name in ("nope", "inner", "attr"):
        with pytest.raises(ProblemError) as info:
            check_overrides_in_source({name: [1]}, SOURCE, "/m/model.py")
        assert info.value.message == f"override {name}=[1]: the file has no module-level constant `{name}`."
        assert info.value.hint == "override one of: batch, kernel, layer_sizes."
    check_overrides_in_source({"nope": [1]}, SOURCE, refuse_unknown_names=False)


def test_assigned_names_are_what_an_override_can_replace():
    assert assigned_names(ast.parse(SOURCE)) == {"batch", "layer_sizes", "kernel", "hidden", "late", "a", "b"}


def test_file_constants_lists_list_and_tuple_literals():
    source = textwrap.dedent("""\
        n = 4
        sizes = [400, 800]
        kernel = (3, 3)
        pairs = [(1, 2), (3, 4)]
        scales: list = [0.5, 1.0]
        flags = [True, False]
        empty = []
        names = ["a", "b"]
        bad = [1.0, float("nan")]
        infinite = [1e400]
        derived = [n, n]
        deep = [[[[[1]]]]]
        many = [0] * 3
        big = [%s]
        _private = [1]
        """ % ", ".join(["1"] * (MAX_ITEMS + 1)))
    assert file_constants(source) == {"n": 4, "sizes": [400, 800], "kernel": (3, 3), "pairs": [(1, 2), (3, 4)],
                                      "scales": [0.5, 1.0], "flags": [True, False]}


# --------------------------------------------------------------------------
# loading: the override reaches what the file builds from it
# --------------------------------------------------------------------------


def test_a_list_override_builds_the_model_and_what_is_derived_from_it(tmp_path):
    spec = ProblemSpec(write(tmp_path, "mlp.py", MLP), {"layer_sizes": [8, 4], "scale": (3.0, 1), "batch": 2})
    problem = load_problem(spec)
    module, model = problem.module, problem.model
    assert module.layer_sizes == [8, 4] and module.hidden == 8 and module.scale == (3.0, 1)
    assert [tuple(layer.weight.shape) for layer in model.layers] == [(8, 16), (4, 8)]
    assert tuple(model.out.weight.shape) == (8, 4)
    assert problem.constants["layer_sizes"] == [8, 4] and problem.constants["hidden"] == 8
    assert [tuple(x.shape) for x in problem.make_inputs(0)] == [(2, 16)]


def test_the_file_changing_its_list_never_changes_the_callers_override(tmp_path):
    """``sizes.append(..)`` in the file: its own list grows, the spec (shipped as OVERRIDES) keeps what was asked."""
    source = MLP.replace("hidden = layer_sizes[-1] * 2", "layer_sizes.append(2)\nhidden = layer_sizes[-1] * 2")
    overrides = {"layer_sizes": [8, 4]}
    problem = load_problem(ProblemSpec(write(tmp_path, "grows.py", source), overrides))
    assert problem.module.layer_sizes == [8, 4, 2] and problem.module.hidden == 4
    assert overrides == {"layer_sizes": [8, 4]} and problem.spec.overrides == {"layer_sizes": [8, 4]}


@pytest.mark.parametrize("overrides, line, says", [
    ({"layer_sizes": (8, 4)}, 6, "`layer_sizes` is a list of whole numbers (layer_sizes = [400, 800] in the file)"),
    ({"layer_sizes": [8, 4.5]}, 6, "layer_sizes[1]=4.5 is not a whole number"),
    ({"scale": [1.0, 2.0]}, 7, "`scale` is a tuple of numbers (scale = (2.0, 0.5) in the file)"),
    ({"hidden": [1]}, 8, "`hidden` is an integer constant (hidden = 1600 in the file)"),  # computed: only the load knows
])
def test_a_wrong_kind_fails_the_load_naming_the_constants_line(tmp_path, overrides, line, says):
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(write(tmp_path, "mlp.py", MLP), overrides))
    assert info.value.line == line and says in info.value.message and str(info.value).startswith(f"mlp.py:{line}: ")


def test_a_computed_list_constant_is_checked_by_kind_too(tmp_path):
    source = MLP.replace("scale = (2.0, 0.5)", "scale = (2.0, 0.5)\nwidths = [d_in, d_in]")
    path = write(tmp_path, "computed.py", source)
    assert load_problem(ProblemSpec(path, {"widths": [3]})).module.widths == [3]
    with pytest.raises(ProblemError, match=r"widths\[0\]=1.5 is not a whole number"):
        load_problem(ProblemSpec(path, {"widths": [1.5]}))


# --------------------------------------------------------------------------
# the command line, end to end: --set a list and a tuple, ship them
# --------------------------------------------------------------------------


def cli_env() -> dict:
    env = dict(os.environ)
    env.update(TRITON_INTERPRET="1", COLUMNS="200", PYTHONWARNINGS="ignore")
    return env


CHECK_SHIPPED = """
import sys, warnings, torch
warnings.simplefilter("error")  # a fallback to the original forward warns: here it fails
sys.path.insert(0, sys.argv[1])
import optimized_model as m
assert m.OVERRIDES == {"layer_sizes": [8, 4], "scale": (3.0, 1), "batch": 2}, m.OVERRIDES
assert type(m.OVERRIDES["scale"]) is tuple
ref_module = m.reference_model
assert (ref_module.layer_sizes, ref_module.scale, ref_module.hidden) == ([8, 4], (3.0, 1), 8)
torch.manual_seed(0)
ref = m.Model(*m.get_init_inputs()).eval()
new = m.ModelNew(*m.get_init_inputs())
new.load_state_dict(ref.state_dict())
for _ in range(3):
    (x,) = m.get_inputs()
    assert tuple(x.shape) == (2, 16)
    with torch.no_grad():
        torch.testing.assert_close(new(x), ref(x))
print("ok")
"""


def test_cli_optimizes_a_model_whose_layer_sizes_come_from_a_list_override(tmp_path):
    path, out = write(tmp_path, "mlp_sizes.py", MLP), tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "lego_core", "optimize", path, "--set", "layer_sizes=[8,4]", "--set", "scale=(3.0, 1)",
         "--set", "batch=2", "--max-search-time", "5", "--out", str(out)],
        cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "layer_sizes=[8, 4], scale=(3.0, 1), batch=2" in proc.stdout  # the summary's overrides row
    report = json.loads((out / "report.json").read_text())
    assert report["overrides"] == {"layer_sizes": [8, 4], "scale": "(3.0, 1)", "batch": 2}  # JSON has no tuple
    assert report["end_to_end"]["passed"] is True
    text = (out / "optimized_model.py").read_text()
    assert "OVERRIDES = {'layer_sizes': [8, 4], 'scale': (3.0, 1), 'batch': 2}" in text
    assert "(layer_sizes=[8, 4], scale=(3.0, 1), batch=2, fp32, cpu)" in text
    shipped = subprocess.run([sys.executable, "-c", CHECK_SHIPPED, str(out)], capture_output=True, text=True, timeout=180,
                             env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"})
    assert shipped.returncode == 0 and "ok" in shipped.stdout, shipped.stdout + shipped.stderr


@pytest.mark.parametrize("item, says", [
    ("layer_sizes=(8,4)", "mlp.py:6: override layer_sizes=(8, 4): `layer_sizes` is a list of whole numbers"),
    ("layer_sizes=[8,4.5]", "layer_sizes[1]=4.5 is not a whole number"),
    ("scale=[1,2]", "mlp.py:7: override scale=[1, 2]: `scale` is a tuple of numbers"),
    ("layer_sizes=8,4", "override layer_sizes='8,4' is not a number"),
])
def test_cli_refuses_a_wrong_kind_before_the_optimizer_starts(capsys, monkeypatch, tmp_path, item, says):
    from lego_core import cli

    monkeypatch.setattr(cli, "optimize", lambda *a, **k: pytest.fail("the optimizer was started"))
    rc = cli.main(["optimize", write(tmp_path, "mlp.py", MLP), "--set", item, "--out", str(tmp_path / "out")])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 1 and says in out and "Fix: " in out, out
