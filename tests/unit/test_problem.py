"""lego_core.load.spec + lego_core.load.problem: loading a KernelBench-style model file.

Every broken file must give a ProblemError that names the file, the line
where there is one, and what to fix.  Problem files are written to tmp_path;
``# <-`` marks the line an error message must point at.
"""
import pickle
import textwrap
from pathlib import Path

import pytest
import torch

from lego_core.load.problem import Problem, ProblemError, ProblemSpec, cast_input, load_problem, main, parse_overrides
from lego_core.load.spec import DEVICES, DTYPE_NAMES, UTF8_HINT, decode_source, syntax_error_text

GOOD = """\
import torch
import torch.nn as nn

batch_size = 4
dim = 8
scale = 0.5
use_bias = True


class Model(nn.Module):
    def __init__(self, dim, use_bias):
        super().__init__()
        self.lin = nn.Linear(dim, dim, bias=use_bias)
        self.register_buffer("offset", torch.ones(dim))

    def forward(self, x, idx, keep):
        y = self.lin(x) * scale + self.offset
        return torch.where(keep[:, None], y, y + idx[:, None].to(y.dtype))


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randint(0, 5, (batch_size,)), torch.rand(batch_size) > 0.5]


def get_init_inputs():
    return [dim, use_bias]
"""

TAIL = """

def get_inputs():
    return [torch.randn(3, 4)]


def get_init_inputs():
    return []
"""

IDENTITY_MODEL = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2
"""


def write(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def marked_line(source: str, marker: str = "# <-") -> int:
    """1-based number of the line that carries ``marker``."""
    lines = textwrap.dedent(source).splitlines()
    hits = [i + 1 for i, text in enumerate(lines) if marker in text]
    assert len(hits) == 1, f"marker {marker!r} must appear once"
    return hits[0]


def load_error(tmp_path, name, source, **spec) -> ProblemError:
    path = write(tmp_path, name, source)
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(path, **spec))
    err = info.value
    assert err.path is not None and Path(err.path).name == name, "the error must name the file"
    assert str(err).startswith(f"{name}:"), str(err)
    assert err.hint, "the error must say what to fix"
    assert " Fix: " in str(err)
    return err


# --------------------------------------------------------------------------
# a good file
# --------------------------------------------------------------------------


def test_good_file_loads(tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    problem = load_problem(ProblemSpec(path))
    assert isinstance(problem, Problem)
    assert problem.spec.path == str(Path(path).resolve())
    assert problem.spec.name == "good"
    assert problem.source == GOOD
    assert problem.constants == {"batch_size": 4, "dim": 8, "scale": 0.5, "use_bias": True}
    assert problem.init_inputs == [8, True]
    assert isinstance(problem.model, torch.nn.Module) and not problem.model.training
    assert problem.model.lin.weight.dtype == torch.float32
    x, idx, keep = problem.make_inputs(0)
    assert x.shape == (4, 8) and idx.shape == (4,) and keep.shape == (4,)
    with torch.no_grad():
        assert problem.model(x, idx, keep).shape == (4, 8)


def test_relative_path_is_resolved(tmp_path, monkeypatch):
    write(tmp_path, "good.py", GOOD)
    monkeypatch.chdir(tmp_path)
    problem = load_problem(ProblemSpec("good.py"))
    assert Path(problem.spec.path).is_absolute()
    assert problem.spec.path == str((tmp_path / "good.py").resolve())


def test_main_guard_of_the_file_does_not_run(tmp_path):
    source = GOOD + '\nif __name__ == "__main__":\n    raise SystemExit(3)\n'
    problem = load_problem(ProblemSpec(write(tmp_path, "guarded.py", source)))
    assert problem.constants["dim"] == 8


def test_file_with_a_dataclass_config_loads(tmp_path):
    source = """\
        from __future__ import annotations
        import dataclasses
        import torch
        import torch.nn as nn

        rows = 3


        @dataclasses.dataclass
        class Config:
            dim: int = 4


        class Model(nn.Module):
            def __init__(self, cfg: Config):
                super().__init__()
                self.lin = nn.Linear(cfg.dim, cfg.dim)

            def forward(self, x):
                return self.lin(x)


        def get_inputs():
            return [torch.randn(rows, 4)]


        def get_init_inputs():
            return [Config()]
    """
    problem = load_problem(ProblemSpec(write(tmp_path, "dc.py", source), {"rows": 5}))
    assert problem.make_inputs(0)[0].shape == (5, 4)


def test_reference_models_load_at_tiny_sizes(shared_models, tiny_overrides):
    names = sorted(p.name for p in shared_models.glob("*.py"))
    assert len(names) >= 10
    for name in names:
        overrides = tiny_overrides(name)
        problem = load_problem(ProblemSpec(str(shared_models / name), overrides))
        for key, value in overrides.items():
            assert problem.constants[key] == value, name
        assert all(isinstance(x, torch.Tensor) for x in problem.make_inputs(0)), name


# --------------------------------------------------------------------------
# overrides, dtype, seeds
# --------------------------------------------------------------------------


def test_overrides_change_sizes(tmp_path):
    problem = load_problem(ProblemSpec(write(tmp_path, "good.py", GOOD), {"batch_size": 2, "dim": 6}))
    assert problem.constants["batch_size"] == 2 and problem.constants["dim"] == 6
    assert problem.module.batch_size == 2
    assert [tuple(x.shape) for x in problem.make_inputs(3)] == [(2, 6), (2,), (2,)]
    assert problem.model.lin.weight.shape == (6, 6)  # init inputs follow the override too


def test_overrides_of_float_and_bool_constants(tmp_path):
    problem = load_problem(ProblemSpec(write(tmp_path, "good.py", GOOD), {"scale": 2, "use_bias": False}))
    assert problem.module.scale == 2
    assert problem.model.lin.bias is None


@pytest.mark.parametrize("dtype, torch_dtype", [("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp32", torch.float32)])
def test_dtype_casts_float_inputs_and_parameters_only(tmp_path, dtype, torch_dtype):
    problem = load_problem(ProblemSpec(write(tmp_path, "good.py", GOOD), dtype=dtype))
    x, idx, keep = problem.make_inputs(0)
    assert x.dtype == torch_dtype
    assert idx.dtype == torch.int64
    assert keep.dtype == torch.bool
    assert problem.model.lin.weight.dtype == torch_dtype
    assert problem.model.offset.dtype == torch_dtype  # floating buffers too
    assert problem.spec.torch_dtype == torch_dtype


def test_cast_input_leaves_non_tensors_alone():
    spec = ProblemSpec("m.py", dtype="fp16")
    assert cast_input(3, spec) == 3
    assert cast_input(torch.ones(2, dtype=torch.float64), spec).dtype == torch.float16
    assert cast_input(torch.ones(2, dtype=torch.int32), spec).dtype == torch.int32


def test_make_inputs_is_deterministic_per_seed(tmp_path):
    problem = load_problem(ProblemSpec(write(tmp_path, "good.py", GOOD)))
    a1, a2, b = problem.make_inputs(1), problem.make_inputs(1), problem.make_inputs(2)
    for x, y in zip(a1, a2):
        assert torch.equal(x, y)
    assert not torch.equal(a1[0], b[0])
    assert not torch.equal(a1[1], b[1]) or not torch.equal(a1[2], b[2])


def test_model_weights_do_not_depend_on_earlier_random_draws(tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    first = load_problem(ProblemSpec(path)).model.lin.weight.detach().clone()
    torch.manual_seed(12345)
    torch.randn(100)
    second = load_problem(ProblemSpec(path)).model.lin.weight
    assert torch.equal(first, second)


def test_parse_overrides_values():
    got = parse_overrides(["batch_size=2", "eps=1e-5", " flag = false ", "on=TRUE", "neg=-3", "big=1_000"])
    assert got == {"batch_size": 2, "eps": 1e-5, "flag": False, "on": True, "neg": -3, "big": 1000}
    assert type(got["batch_size"]) is int and type(got["eps"]) is float and type(got["flag"]) is bool
    assert parse_overrides(None) == {} and parse_overrides([]) == {}


@pytest.mark.parametrize("item", ["batch_size", "=3", "1abc=2", "a b=2", "batch-size=2", ""])
def test_malformed_override_text(item):
    with pytest.raises(ProblemError) as info:
        parse_overrides([item])
    assert "is not of the form name=value" in info.value.message
    assert repr(item) in info.value.message
    assert "batch_size=2" in info.value.hint


@pytest.mark.parametrize("text", ["abc", "", "2x", "{1}"])  # [1] is a list now (test_list_overrides.py)
def test_non_numeric_override(text):
    with pytest.raises(ProblemError) as info:
        parse_overrides([f"batch_size={text}"])
    assert "is not a number" in info.value.message
    assert "batch_size" in info.value.message
    assert "integer or a float" in info.value.hint


@pytest.mark.badinput
@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "1" * 400 + ".0"])
def test_non_finite_override_is_refused(text):
    """nan / inf / 1e400 reached the database as non-finite JSON (issue 11)."""
    with pytest.raises(ProblemError) as info:
        parse_overrides([f"eps={text}"])
    assert "eps=" in info.value.message and "is not a finite number" in info.value.message
    assert "finite value" in info.value.hint


@pytest.mark.badinput
@pytest.mark.parametrize("text", [str(2**63), str(-(2**63) - 1), "9" * 5000, "1_" * 3000 + "1"])
def test_override_beyond_64_bits_is_refused(text):
    with pytest.raises(ProblemError) as info:
        parse_overrides([f"batch_size={text}"])
    assert "is out of range" in info.value.message and len(info.value.message) < 120
    assert "-2**63 to 2**63-1" in info.value.hint


def test_overrides_at_the_64_bit_edges_and_tiny_floats_are_kept():
    got = parse_overrides([f"hi={2**63 - 1}", f"lo={-(2**63)}", "tiny=1e-300", "zero=1e-400"])
    assert got == {"hi": 2**63 - 1, "lo": -(2**63), "tiny": 1e-300, "zero": 0.0}


def test_unknown_constant_lists_the_known_ones(tmp_path):
    err = load_error(tmp_path, "good.py", GOOD, overrides={"nonexistent": 3})
    assert "nonexistent" in err.message and "no module-level constant" in err.message
    assert err.hint == "override one of: batch_size, dim, scale, use_bias."


def test_unknown_constant_in_a_file_without_constants(tmp_path):
    err = load_error(tmp_path, "bare.py", IDENTITY_MODEL + TAIL, overrides={"n": 1})
    assert err.hint == "override one of: none."


def test_private_names_modules_and_classes_are_not_constants(tmp_path):
    source = "import math\n_hidden = 3\nflag = False\nkind = int\n" + IDENTITY_MODEL + TAIL
    problem = load_problem(ProblemSpec(write(tmp_path, "consts.py", source)))
    assert problem.constants == {"flag": False}


BATCH_SIZE_MODEL = """\
        import torch
        import torch.nn as nn

        batch_size = 4


        class Model(nn.Module):
            def forward(self, x):
                return x + 1


        def get_inputs():
            return [torch.randn(batch_size, 3)]  # <-


        def get_init_inputs():
            return []
"""


def test_override_that_makes_a_size_invalid_points_at_the_line(tmp_path):
    source = BATCH_SIZE_MODEL
    err = load_error(tmp_path, "sizes.py", source, overrides={"batch_size": -1})
    assert err.line == marked_line(source)
    assert "while get_inputs()" in err.message and "negative dimension" in err.message
    assert "override" in err.hint


# --------------------------------------------------------------------------
# broken files
# --------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(str(tmp_path / "nowhere.py")))
    err = info.value
    assert str(err).startswith("nowhere.py: no such file.")
    assert err.line is None and "path" in err.hint


def test_directory_instead_of_a_file(tmp_path):
    (tmp_path / "adir.py").mkdir()
    with pytest.raises(ProblemError, match="adir.py: cannot read the file"):
        load_problem(ProblemSpec(str(tmp_path / "adir.py")))


def test_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"import torch\n# caf\xe9\nx = 1\n")
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(str(path)))
    err = info.value
    assert err.line == 2
    assert str(err).startswith("latin.py:2: the file is not UTF-8 text: byte 0xe9 is not UTF-8 (the file was saved in "
                               "another encoding, such as Latin-1 or Windows-1252). Fix: save the file as UTF-8")
    assert "iconv -f LATIN1 -t UTF-8" in err.hint and "None" not in str(err)


@pytest.mark.parametrize("data, line, says", [
    ("import torch\n".encode("utf-16"), 1, "it is UTF-16 (it starts with a UTF-16 byte-order mark)"),
    ("import torch\n".encode("utf-32"), 1, "it is UTF-32"),
    ("x = 1\nimport torch\n".encode("utf-16-le"), 1, "it holds null bytes"),  # no mark: a NUL beside each letter
    (b"x = 1\n\x00\x00\n", 2, "it holds null bytes, which Python source cannot"),
    (b"x = 1\ny = 2\n\x80\n", 3, "byte 0x80 is not UTF-8"),
], ids=["utf-16", "utf-32", "utf-16-no-mark", "null-bytes", "stray-byte"])
def test_every_file_that_is_not_utf8_text_says_so_with_its_line(data, line, says):
    with pytest.raises(ProblemError) as info:
        decode_source(data, "/uploads/model.py")
    err = info.value
    assert err.line == line and str(err).startswith(f"model.py:{line}: the file is not UTF-8 text: ")
    assert says in err.message and err.hint == UTF8_HINT


def test_a_utf8_file_with_a_byte_order_mark_loads():
    assert decode_source(b"\xef\xbb\xbfx = 1\n") == "x = 1\n"
    assert decode_source("caf\u00e9 = 1\n".encode()) == "caf\u00e9 = 1\n"


def test_no_error_without_a_line_prints_one():
    """A SyntaxError Python gives no line (NUL bytes) and a ProblemError
    without one: their text names no line, never "line None"."""
    try:
        compile("x = 1\n\x00\n", "m.py", "exec")
    except SyntaxError as exc:
        assert exc.lineno is None
        assert syntax_error_text(exc) == "source code string cannot contain null bytes"
    try:
        compile("x = (\n", "m.py", "exec")
    except SyntaxError as exc:
        assert syntax_error_text(exc).startswith("line 1: ")
    assert str(ProblemError("the file is empty", "/a/m.py", None, hint="add a Model.")) == "m.py: the file is empty. Fix: add a Model."
    assert str(ProblemError("bad", "/a/m.py", 3)) == "m.py:3: bad."
    from lego_core.judge import host_allowlist, static_check

    for check in (static_check.unsafe_host_code, host_allowlist.refusal):
        said = check("x = 1\n\x00\n")
        assert said == "source does not parse: source code string cannot contain null bytes", said


def test_syntax_error_names_the_line(tmp_path):
    source = """\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, x)  # <-
                return x
    """
    source = textwrap.dedent(source) + TAIL
    err = load_error(tmp_path, "broken.py", source)
    assert err.line == marked_line(source)
    assert str(err).startswith(f"broken.py:{err.line}: syntax error")
    assert "syntax" in err.hint


def test_null_bytes_are_refused_as_not_text_on_their_line(tmp_path):
    path = tmp_path / "nul.py"
    path.write_bytes(b"import torch\nx = 1\0\n")
    with pytest.raises(ProblemError, match="nul.py:2: the file is not UTF-8 text: it holds null bytes"):
        load_problem(ProblemSpec(str(path)))


@pytest.mark.parametrize("missing", ["Model", "get_inputs", "get_init_inputs"])
def test_missing_required_name(tmp_path, missing):
    source = IDENTITY_MODEL + TAIL
    if missing == "Model":
        source = source.replace("class Model(", "class Other(")
    else:
        source = source.replace(f"def {missing}(", f"def _{missing}(")
    err = load_error(tmp_path, "incomplete.py", source)
    assert err.message == f"the file defines no `{missing}`."
    assert err.line is None
    assert "class Model(nn.Module)" in err.hint and "get_inputs()" in err.hint and "get_init_inputs()" in err.hint


@pytest.mark.parametrize("definition", ["class Model:\n    pass\n", "Model = 3\n", "def Model():\n    return None\n"])
def test_model_not_an_nn_module(tmp_path, definition):
    source = "import torch\nimport torch.nn as nn\n" + definition + TAIL
    err = load_error(tmp_path, "notmodule.py", source)
    assert "`Model` is not a subclass of torch.nn.Module" in err.message
    assert "class Model(nn.Module)" in err.hint


def test_exception_at_import_names_the_line(tmp_path):
    source = """\
        import torch
        import torch.nn as nn
        import not_a_module_anyone_has  # <-
    """
    source = textwrap.dedent(source) + TAIL
    err = load_error(tmp_path, "imports.py", source)
    assert err.line == marked_line(source)
    assert "ModuleNotFoundError while importing the file" in err.message


def test_exception_while_building_the_model_names_the_users_line(tmp_path):
    source = """\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.table = {}
                self.lin = nn.Linear(dim, self.table["width"])  # <-

            def forward(self, x):
                return self.lin(x)


        def get_inputs():
            return [torch.randn(3, 4)]


        def get_init_inputs():
            return [4]
    """
    err = load_error(tmp_path, "build.py", source)
    assert err.line == marked_line(source)
    assert err.message.startswith("KeyError while Model(*get_init_inputs()):")
    assert "'width'" in err.message


def test_exception_inside_torch_points_at_the_users_calling_line(tmp_path):
    source = """\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, -1)  # <-

            def forward(self, x):
                return self.lin(x)
    """
    source = textwrap.dedent(source) + TAIL
    err = load_error(tmp_path, "torchfail.py", source)
    assert err.line == marked_line(source)  # not a line inside torch


def test_exception_in_get_inputs_names_the_line(tmp_path):
    source = """\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, x):
                return x


        def helper():
            return 1 / 0  # <-


        def get_inputs():
            return [torch.randn(2) * helper()]


        def get_init_inputs():
            return []
    """
    err = load_error(tmp_path, "inputs.py", source)
    assert err.line == marked_line(source)  # the innermost line in the user's file
    assert err.message.startswith("ZeroDivisionError while get_inputs():")


def test_exception_in_get_init_inputs_names_the_line(tmp_path):
    source = IDENTITY_MODEL + """

def get_inputs():
    return [torch.randn(2)]


def get_init_inputs():
    raise RuntimeError("no init today")  # <-
"""
    err = load_error(tmp_path, "init.py", source)
    assert err.line == marked_line(source)
    assert "RuntimeError while get_init_inputs(): no init today" in err.message


def test_exception_in_forward_names_the_line(tmp_path):
    source = """\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, x):
                return x @ torch.ones(5, 5)  # <-
    """
    source = textwrap.dedent(source) + TAIL
    err = load_error(tmp_path, "fwd.py", source)
    assert err.line == marked_line(source)
    assert "while running Model.forward on get_inputs()" in err.message


@pytest.mark.parametrize("op, dtype", [
    ("torch.nn.functional.avg_pool3d(x.reshape(1, 1, 3, 2, 2), 2, 1)", "bf16"),  # no bf16 kernel on the CPU (LocalResponseNorm calls it)
    ("torch.nn.functional.local_response_norm(x.reshape(1, 3, 2, 2), 2)", "bf16"),
])
def test_an_op_without_a_kernel_at_the_dtype_says_to_choose_another_dtype(tmp_path, op, dtype):
    """Found by the breadth bench: an AlexNet-style model in bf16 on the CPU
    failed in PyTorch's own avg_pool3d, and the fix line blamed the code."""
    probe = torch.randn(1, 1, 3, 2, 2, dtype=torch.bfloat16)
    try:
        torch.nn.functional.avg_pool3d(probe, 2, 1)
        pytest.skip("this torch has a bf16 avg_pool3d on the CPU")
    except (NotImplementedError, RuntimeError):
        pass
    source = textwrap.dedent(f"""\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, x):
                return {op}
    """) + TAIL
    err = load_error(tmp_path, "nokernel.py", source, dtype=dtype)
    assert "not implemented for 'BFloat16'" in err.message
    assert err.hint.startswith("PyTorch itself has no kernel for this op at this dtype") and "--dtype" in err.hint
    ok = load_error(tmp_path, "fwd2.py", textwrap.dedent("""\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, x):
                return x @ torch.ones(5, 5)
    """) + TAIL)
    assert "PyTorch itself" not in ok.hint  # a plain bug in the file keeps the usual fix line


def test_get_inputs_not_returning_a_list(tmp_path):
    source = IDENTITY_MODEL + "\ndef get_inputs():\n    return torch.randn(2)\n\ndef get_init_inputs():\n    return []\n"
    err = load_error(tmp_path, "notlist.py", source)
    assert err.message == "get_inputs() returned Tensor, not a list."
    assert "return a list" in err.hint


def test_tuples_of_inputs_are_accepted(tmp_path):
    source = IDENTITY_MODEL + "\ndef get_inputs():\n    return (torch.randn(2),)\n\ndef get_init_inputs():\n    return ()\n"
    problem = load_problem(ProblemSpec(write(tmp_path, "tuples.py", source)))
    assert isinstance(problem.make_inputs(0), list) and problem.init_inputs == []


@pytest.mark.parametrize("returned, message", [
    ("None", "Model.forward returned NoneType, not a tensor (nor a tuple, list or dict of tensors)."),
    ("'done'", "Model.forward returned str, not a tensor (nor a tuple, list or dict of tensors)."),
    ("x, None", "Model.forward returned a tuple holding NoneType: LEGO optimizes a forward that returns tensors only."),
    ("{'y': x, 'n': 3}", "Model.forward returned a dict holding int: LEGO optimizes a forward that returns tensors only."),
    ("()", "Model.forward returned an empty tuple: there is no tensor to optimize."),
])  # fmt: skip
def test_forward_output_not_tensors(tmp_path, returned, message):
    source = f"import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return {returned}\n" + TAIL
    err = load_error(tmp_path, "multi.py", source)
    assert err.message == message
    assert "return a tensor, or a tuple, list or dict of tensors" in err.hint


@pytest.mark.parametrize("returned", ["x, x", "[x]", "{'y': x}", "x, (x * 2, [x + 1])"])
def test_forward_returning_tuples_lists_and_dicts_of_tensors_loads(tmp_path, returned):
    source = f"import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return {returned}\n" + TAIL
    load_problem(ProblemSpec(write(tmp_path, "multi.py", source)))


def test_sys_exit_at_import_is_a_problem_error(tmp_path):
    source = "import sys\nimport torch\nimport torch.nn as nn\nsys.exit(0)  # <-\n" + IDENTITY_MODEL + TAIL
    path = write(tmp_path, "exits.py", source)
    try:
        load_problem(ProblemSpec(path))
    except ProblemError as err:
        assert err.line == 4
    except SystemExit:
        pytest.fail("SystemExit escaped load_problem")
    else:
        pytest.fail("no error")


def test_problem_error_str_is_one_line_for_a_float_size_override(tmp_path):
    source = BATCH_SIZE_MODEL
    err = load_error(tmp_path, "floaty.py", source, overrides={"batch_size": 2.5})
    assert err.line == 4  # the constant's own line
    assert "integer constant" in err.message and "whole number" in err.hint
    assert "\n" not in str(err)


# --------------------------------------------------------------------------
# dtype and device
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["fp64", "float32", "FP32", ""])
def test_bad_dtype(dtype):
    with pytest.raises(ProblemError) as info:
        ProblemSpec("m.py", dtype=dtype)
    assert f"unknown dtype {dtype!r}" in info.value.message
    assert info.value.hint == "use one of fp32, bf16, fp16."


@pytest.mark.parametrize("device", ["tpu", "gpu:0", "cuda:0", "CPU"])
def test_bad_device(device):
    with pytest.raises(ProblemError) as info:
        ProblemSpec("m.py", device=device)
    assert f"unknown device {device!r}" in info.value.message
    assert info.value.hint == "use one of cpu, cuda."


def test_spec_constants():
    assert DTYPE_NAMES == ("fp32", "bf16", "fp16") and DEVICES == ("cpu", "cuda")
    spec = ProblemSpec("/a/b/my_model.py", {"n": 1})
    assert spec.name == "my_model" and spec.dtype == "fp32" and spec.device == "cpu"
    assert pickle.loads(pickle.dumps(spec)) == spec  # crosses into the child process


needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")


@needs_no_cuda
def test_cuda_without_a_gpu(tmp_path):
    with pytest.raises(ProblemError) as info:
        load_problem(ProblemSpec(write(tmp_path, "good.py", GOOD), device="cuda"))
    assert "no usable CUDA GPU" in info.value.message
    assert "device cpu" in info.value.hint


@needs_no_cuda
def test_cuda_without_a_gpu_names_the_file(tmp_path):
    load_error(tmp_path, "good.py", GOOD, device="cuda")


# --------------------------------------------------------------------------
# ProblemError itself and the module's command line
# --------------------------------------------------------------------------


def test_problem_error_formatting_and_pickling():
    full = ProblemError("bad thing.", "/x/y/model.py", 12, "do this.")
    assert str(full) == "model.py:12: bad thing. Fix: do this."
    assert str(ProblemError("bad thing.", "/x/y/model.py")) == "model.py: bad thing."
    assert str(ProblemError("bad thing.")) == "bad thing."
    back = pickle.loads(pickle.dumps(full))
    assert (back.message, back.path, back.line, back.hint) == ("bad thing.", "/x/y/model.py", 12, "do this.")


def test_problem_main_prints_shapes(tmp_path, capsys):
    assert main([write(tmp_path, "good.py", GOOD), "batch_size=2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("good: constants {'batch_size': 2,")
    assert "(2, 8)" in out


def test_problem_main_reports_errors(tmp_path, capsys):
    assert main([write(tmp_path, "good.py", GOOD), "nope=1"]) == 1
    assert "error: good.py: override nope=1" in capsys.readouterr().err
    assert main([]) == 2
