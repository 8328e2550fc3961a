"""lego_core.load.capture: torch.export capture, value info, module paths, sources, Graph.run."""
import functools
import textwrap

import pytest
import torch

from lego_core.load.capture import (
    Graph,
    PlaceholderSource,
    ValueInfo,
    capture_graph,
    main,
    module_path,
    module_type,
    op_name,
    value_info,
)
from lego_core.load.problem import ProblemError, ProblemSpec, load_problem
from conftest import SHARED_MODELS  # ../shared/models, or $LEGO_MODELS_DIR where they were carried

# torch.export's own deprecation noise and the LSTM's flat-weights notice
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*LeafSpec.*:FutureWarning", "ignore:The tensor attributes:UserWarning"
)

MODELS = SHARED_MODELS


@functools.lru_cache(maxsize=None)
def captured(name: str):
    """(problem, graph) of a reference model at its tiny sizes, captured once per session."""
    import json

    if not MODELS.is_dir():
        pytest.skip(f"reference models not found at {MODELS}")
    overrides = json.loads((MODELS / "tiny.json").read_text())[name]
    problem = load_problem(ProblemSpec(str(MODELS / name), overrides))
    return problem, capture_graph(problem)


def capture_source(tmp_path, name: str, source: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    problem = load_problem(ProblemSpec(str(path)))
    return problem, capture_graph(problem)


def multi_output(node) -> bool:
    return isinstance(node.meta.get("val"), (tuple, list))


# --------------------------------------------------------------------------
# ValueInfo and helpers
# --------------------------------------------------------------------------


def test_value_info_numbers():
    info = ValueInfo((2, 3, 4), torch.float16, (12, 4, 1))
    assert info.numel == 24 and info.nbytes == 48
    assert info.describe() == "float16[2, 3, 4]"
    scalar = ValueInfo((), torch.float32, ())
    assert scalar.numel == 1 and scalar.nbytes == 4 and scalar.describe() == "float32[]"


@pytest.mark.parametrize("name", ["gpt_stack.py", "vit_encoder.py"])
def test_every_compute_node_has_shape_dtype_and_stride(name):
    _, graph = captured(name)
    assert graph.compute_nodes
    for node in graph.compute_nodes:
        info = value_info(node)
        val = node.meta["val"]
        if multi_output(node):
            # a tuple-valued op (layer norm, split): its getitems carry the infos
            assert info is None
            assert node.users and all(op_name(u) == "getitem" for u in node.users), node.name
            for user in node.users:
                assert value_info(user) is not None, user.name
            continue
        assert info is not None, f"{node.name} ({op_name(node)}) has no value info"
        assert info.shape == tuple(val.shape)
        assert info.dtype == val.dtype
        assert info.stride == tuple(val.stride())
        assert len(info.stride) == len(info.shape)
        assert all(isinstance(s, int) for s in info.shape + info.stride)


def test_value_info_of_inputs_and_non_tensors():
    _, graph = captured("gpt_stack.py")
    x = next(n for n in graph.placeholders if graph.sources[n.name].kind == "input")
    assert value_info(x) == ValueInfo((2, 16, 64), torch.float32, (1024, 64, 1))
    ln = next(n for n in graph.compute_nodes if op_name(n) == "aten.native_layer_norm.default")
    assert value_info(ln) is None  # a tuple is not one tensor


def test_transposed_views_keep_their_strides():
    _, graph = captured("gpt_stack.py")
    permutes = [n for n in graph.compute_nodes if op_name(n) == "aten.permute.default"]
    assert permutes
    non_contiguous = [value_info(n) for n in permutes if not n.meta["val"].is_contiguous()]
    assert non_contiguous, "a transpose must show a non-contiguous stride"
    for info in non_contiguous:
        contiguous = [1] * len(info.shape)
        for i in range(len(info.shape) - 2, -1, -1):
            contiguous[i] = contiguous[i + 1] * info.shape[i + 1]
        assert info.stride != tuple(contiguous)


def test_op_names():
    _, graph = captured("gpt_stack.py")
    names = {op_name(n) for n in graph.compute_nodes}
    assert {"aten.addmm.default", "aten.native_layer_norm.default", "aten._softmax.default", "getitem"} <= names
    assert all(n == "getitem" or n.startswith("aten.") for n in names)


# --------------------------------------------------------------------------
# module paths
# --------------------------------------------------------------------------


def test_module_paths_of_gpt_stack():
    _, graph = captured("gpt_stack.py")
    layer_norms = [n for n in graph.compute_nodes if op_name(n) == "aten.native_layer_norm.default"]
    assert [module_path(n) for n in layer_norms] == ["blocks.0.ln1", "blocks.0.ln2", "blocks.1.ln1", "blocks.1.ln2", "ln_f"]
    assert {module_type(n) for n in layer_norms} == {"LayerNorm"}
    gemms = [module_path(n) for n in graph.compute_nodes if op_name(n) == "aten.addmm.default"]
    assert gemms == [
        "blocks.0.attn.qkv", "blocks.0.attn.proj", "blocks.0.fc", "blocks.0.out",
        "blocks.1.attn.qkv", "blocks.1.attn.proj", "blocks.1.fc", "blocks.1.out",
    ]  # fmt: skip
    softmax = [n for n in graph.compute_nodes if op_name(n) == "aten._softmax.default"]
    assert [module_path(n) for n in softmax] == ["blocks.0.attn", "blocks.1.attn"]
    assert {module_type(n) for n in softmax} == {"CausalSelfAttention"}
    gelu = next(n for n in graph.compute_nodes if op_name(n) == "aten.gelu.default")
    assert module_path(gelu) == "blocks.0" and module_type(gelu) == "Block"


def test_root_ops_have_the_empty_module_path():
    _, graph = captured("vit_encoder.py")
    cat = next(n for n in graph.compute_nodes if op_name(n) == "aten.cat.default")
    assert module_path(cat) == ""
    assert module_type(cat) == "Model"
    conv = next(n for n in graph.compute_nodes if op_name(n) == "aten.convolution.default")
    assert module_path(conv) == "patch_embed" and module_type(conv) == "Conv2d"


def test_module_helpers_on_a_node_without_a_stack():
    g = torch.fx.Graph()
    node = g.call_function(torch.ops.aten.relu.default, (g.placeholder("x"),))
    assert module_path(node) == "" and module_type(node) == "Model"


# --------------------------------------------------------------------------
# placeholders and their sources
# --------------------------------------------------------------------------


def test_placeholder_sources_of_gpt_stack():
    problem, graph = captured("gpt_stack.py")
    kinds = [graph.sources[n.name].kind for n in graph.placeholders]
    assert set(graph.sources) == {n.name for n in graph.placeholders}
    # parameters, then buffers, then user inputs
    assert kinds == sorted(kinds, key=["parameter", "buffer", "constant", "input"].index)
    params = {s.target for s in graph.sources.values() if s.kind == "parameter"}
    assert params == {name for name, _ in problem.model.named_parameters()}
    buffers = sorted(s.target for s in graph.sources.values() if s.kind == "buffer")
    assert buffers == ["blocks.0.attn.mask", "blocks.1.attn.mask"]  # the causal masks
    inputs = [s for s in graph.sources.values() if s.kind == "input"]
    assert inputs == [PlaceholderSource("input", index=0)]


def test_placeholder_values_come_from_the_model_and_the_inputs():
    problem, graph = captured("gpt_stack.py")
    inputs = problem.make_inputs(3)
    values = graph.placeholder_values(problem.model, inputs)
    assert set(values) == {n.name for n in graph.placeholders}
    for node in graph.placeholders:
        src = graph.sources[node.name]
        if src.kind == "parameter":
            assert values[node.name] is problem.model.get_parameter(src.target)
        elif src.kind == "buffer":
            assert values[node.name] is problem.model.get_buffer(src.target)
            assert values[node.name].dtype == torch.bool
        else:
            assert values[node.name] is inputs[src.index]


def test_constant_tensor_attributes_are_lifted_as_constants(tmp_path):
    problem, graph = capture_source(
        tmp_path,
        "consts.py",
        """\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.k = torch.arange(4.0)  # neither parameter nor buffer
                self.w = nn.Parameter(torch.randn(4))
                self.register_buffer("b", torch.ones(4))

            def forward(self, x, y):
                return (x * self.k + self.w - self.b) + y


        def get_inputs():
            return [torch.randn(3, 4), torch.randn(3, 4)]


        def get_init_inputs():
            return []
        """,
    )
    by_kind = {}
    for name, src in graph.sources.items():
        by_kind.setdefault(src.kind, []).append(src)
    assert [s.target for s in by_kind["parameter"]] == ["w"]
    assert [s.target for s in by_kind["buffer"]] == ["b"]
    assert [s.target for s in by_kind["constant"]] == ["k"]
    assert [s.index for s in by_kind["input"]] == [0, 1]
    inputs = problem.make_inputs(9)
    env = graph.run(problem.model, inputs)
    with torch.no_grad():
        assert torch.allclose(env[graph.output_nodes[0].name], problem.model(*inputs))


def test_graph_run_with_an_int_forward_argument(tmp_path):
    problem, graph = capture_source(
        tmp_path,
        "intarg.py",
        """\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, x, n, y):
                return x * n + y


        def get_inputs():
            return [torch.randn(3, 4), 2, torch.randn(3, 4)]


        def get_init_inputs():
            return []
        """,
    )
    inputs = problem.make_inputs(1)
    env = graph.run(problem.model, inputs)
    assert torch.allclose(env[graph.output_nodes[0].name], inputs[0] * 2 + inputs[2])


# --------------------------------------------------------------------------
# graph structure and Graph.run
# --------------------------------------------------------------------------


def test_compute_nodes_are_topologically_ordered_call_functions():
    _, graph = captured("gpt_stack.py")
    seen = {n.name for n in graph.placeholders}
    for node in graph.compute_nodes:
        assert node.op == "call_function"
        assert all(a.name in seen for a in node.all_input_nodes), node.name
        seen.add(node.name)
    assert len(graph.output_nodes) == 1
    assert graph.output_nodes[0] in graph.compute_nodes


@pytest.mark.parametrize("name", ["gpt_stack.py", "vit_encoder.py", "scores_chain.py"])
def test_graph_run_reproduces_eager(name):
    problem, graph = captured(name)
    for seed in (0, 11):
        inputs = problem.make_inputs(seed)
        env = graph.run(problem.model, inputs)
        with torch.no_grad():
            expected = problem.model(*inputs)
        got = env[graph.output_nodes[0].name]
        assert got.shape == expected.shape and got.dtype == expected.dtype
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        # every compute node has a recorded value
        assert all(n.name in env for n in graph.compute_nodes)
        assert value_info(graph.output_nodes[0]).shape == tuple(expected.shape)


def test_graph_run_records_intermediate_values_with_their_infos():
    problem, graph = captured("gpt_stack.py")
    env = graph.run(problem.model, problem.make_inputs(0))
    for node in graph.compute_nodes:
        info = value_info(node)
        if info is None:
            continue
        value = env[node.name]
        assert tuple(value.shape) == info.shape and value.dtype == info.dtype, node.name


def test_multihead_attention_is_decomposed():
    before = torch.backends.mha.get_fastpath_enabled()
    _, graph = captured("vit_encoder.py")
    names = [op_name(n) for n in graph.compute_nodes]
    assert not any("multi_head_attention" in n or "scaled_dot_product" in n for n in names)
    assert names.count("aten._softmax.default") == 2  # one attention softmax per block
    assert names.count("aten.bmm.default") >= 4
    attn = [module_path(n) for n in graph.compute_nodes if op_name(n) == "aten._softmax.default"]
    assert attn == ["blocks.0.attn", "blocks.1.attn"]
    assert torch.backends.mha.get_fastpath_enabled() == before  # restored


def test_core_aten_only():
    # run_decompositions: no composite ops such as linear or gelu-backward survive
    _, graph = captured("vit_encoder.py")
    names = {op_name(n) for n in graph.compute_nodes}
    assert "aten.linear.default" not in names and "aten.layer_norm.default" not in names
    assert "aten.addmm.default" in names and "aten.convolution.default" in names


# --------------------------------------------------------------------------
# models torch.export cannot capture
# --------------------------------------------------------------------------

DATA_DEPENDENT = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # <-
            return x * 2
        return x - 1


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


def test_data_dependent_control_flow_is_a_readable_problem_error(tmp_path):
    path = tmp_path / "branchy.py"
    path.write_text(DATA_DEPENDENT)
    problem = load_problem(ProblemSpec(str(path)))
    before = torch.backends.mha.get_fastpath_enabled()
    with pytest.raises(ProblemError) as info:
        capture_graph(problem)
    err = info.value
    assert torch.backends.mha.get_fastpath_enabled() == before
    assert err.path == str(path.resolve())
    assert err.message.startswith("torch.export could not capture the model:")
    assert "data-dependent" in err.message.lower() or "GuardOnDataDependent" in err.message
    assert "\n" not in err.message  # only the first line of torch's long text
    assert len(err.message) < 400
    assert "data-dependent Python control flow" in err.hint
    assert str(err).startswith("branchy.py")


def test_data_dependent_control_flow_error_names_the_line(tmp_path):
    path = tmp_path / "branchy.py"
    path.write_text(DATA_DEPENDENT)
    with pytest.raises(ProblemError) as info:
        capture_graph(load_problem(ProblemSpec(str(path))))
    assert info.value.line == 7


def test_capture_main_prints_the_graph(tmp_path, capsys):
    path = tmp_path / "tiny.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\nn = 3\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x) * 2\n\n"
        "def get_inputs():\n    return [torch.randn(n, 5)]\n\ndef get_init_inputs():\n    return []\n"
    )
    assert main([str(path), "n=2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert "aten.relu.default" in lines[0] and "float32[2, 5]" in lines[0]
    assert "aten.mul.Tensor" in lines[1]
    assert main([]) == 2


def test_graph_is_built_from_an_exported_program():
    problem, graph = captured("scores_chain.py")
    assert isinstance(graph, Graph)
    assert graph.fx_graph is graph.ep.graph
    assert [n.op for n in graph.placeholders] == ["placeholder"] * len(graph.placeholders)
    kinds = sorted(s.kind for s in graph.sources.values())
    assert kinds.count("input") == 2  # x and keep
    keep = next(n for n in graph.placeholders if graph.sources[n.name] == PlaceholderSource("input", index=1))
    assert value_info(keep).dtype == torch.bool


def test_recurrent_layers_stay_one_library_call():
    """nn.LSTM is captured as one aten.lstm op (cuDNN on a GPU), not decomposed per time step."""
    _, graph = captured("lstm_tagger.py")
    ops = [op_name(n) for n in graph.compute_nodes]
    assert ops.count("aten.lstm.input") == 1
    assert "aten.tanh.default" not in ops and "aten.sigmoid.default" not in ops
