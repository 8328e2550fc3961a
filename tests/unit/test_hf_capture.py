"""Hugging Face transformers models go through load and capture as their users write them (issue 24).

Real ``transformers`` models at tiny sizes, built from configs with random
weights (no download: ``HF_HUB_OFFLINE=1``), from ``tests/models_real/``:
GPT-2 (SDPA and eager attention), Llama with grouped-query attention, BERT
(integer ``input_ids`` and a 0/1 ``attention_mask``) and ViT.  Capture only
(seconds each); the end-to-end optimize tests are elsewhere.  Each captured
graph is run and compared with the model's eager output, so a capture that
dropped or baked an input would fail here.

The library's conventions are each handled or refused at load with the fix:
a ``ModelOutput`` return is optimized and rebuilt as the same class by
``optimized_model.py`` (``lego_runtime.unflatten_output``); ``use_cache=True``
(the default) returning a ``DynamicCache`` is refused naming
``use_cache=False``; an output class defined in the model file is refused.
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported: never reach the network

import importlib.util  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from faithful_support import write_model  # noqa: E402
from lego_core.load.capture import capture_graph, op_name  # noqa: E402
from lego_core.compose.folder import output_spec_text, write_output  # noqa: E402
from lego_core.tree.fusion.attention import find_attention  # noqa: E402
from lego_core.load.problem import ProblemSpec, load_problem  # noqa: E402
from lego_core.load.spec import ProblemError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "tests" / "models_real"
SDPA = "aten.scaled_dot_product_attention.default"


def captured(name: str, overrides: dict | None = None, dtype: str = "fp32"):
    """(problem, graph) of ``tests/models_real/{name}.py`` at its tiny sizes."""
    problem = load_problem(ProblemSpec(str(MODELS / f"{name}.py"), overrides or {}, dtype=dtype))
    return problem, capture_graph(problem)


def assert_graph_computes_the_model(problem, graph, seed: int = 1, inputs: list | None = None):
    """The captured graph, run on fresh inputs, gives the model's eager output."""
    inputs = inputs if inputs is not None else problem.make_inputs(seed)
    env = graph.run(problem.model, inputs)
    with torch.no_grad():
        eager = problem.model(*inputs)
    torch.testing.assert_close(env[graph.output_nodes[0].name], eager)
    return env[graph.output_nodes[0].name]


def test_gpt2_with_sdpa_is_captured_keeping_sdpa_whole_and_saying_so():
    """Stock GPT-2 (SDPA, then transpose(1, 2).contiguous().view(...)) failed in
    run_decompositions; now SDPA stays one node per layer, recorded in
    ``Graph.kept_whole`` with the failure that made it so, and LEGO's
    attention region still finds each one."""
    problem, graph = captured("hf_gpt2")
    ops = [op_name(n) for n in graph.compute_nodes]
    assert ops.count(SDPA) == problem.constants["n_layer"] == 2
    [kept] = graph.kept_whole
    assert (kept.op, kept.nodes, kept.cause) == (SDPA, 2, "decomposition failed")
    assert "Cannot view a tensor" in kept.reason and "transformers/pytorch_utils.py" in kept.reason
    call = "return self.gpt(input_ids=input_ids, use_cache=False).logits"
    line = 1 + (MODELS / "hf_gpt2.py").read_text().splitlines().index(f"        {call}")
    assert f"reached from line {line} of the model file (`{call}`)" in kept.reason
    assert [g.spec.form for g in find_attention(graph.compute_nodes)] == ["fused", "fused"]
    assert_graph_computes_the_model(problem, graph)


def test_gpt2_with_eager_attention_decomposes_fully_at_the_sizes_set_overrides():
    """The model files' sizes and attention choice are --set constants."""
    problem, graph = captured("hf_gpt2", {"sdpa": False, "n_layer": 1, "hidden": 32, "n_head": 2, "seq_len": 8})
    ops = [op_name(n) for n in graph.compute_nodes]
    assert graph.kept_whole == [] and SDPA not in ops and ops.count("aten._softmax.default") == 1
    assert list(graph.output_nodes[0].meta["val"].shape) == [2, 8, 128]  # batch, seq_len, vocab_size
    assert problem.model.gpt.config.n_embd == 32
    assert_graph_computes_the_model(problem, graph)


def test_llama_with_grouped_query_attention_is_captured_with_two_query_heads_per_kv_head():
    problem, graph = captured("hf_llama")
    assert problem.constants["n_head"] // problem.constants["n_kv_head"] == 2
    groups = find_attention(graph.compute_nodes)
    assert len(groups) == 2 and {g.spec.k_map.rep for g in groups} == {2} and {g.spec.h for g in groups} == {4}
    assert graph.kept_whole == []
    assert_graph_computes_the_model(problem, graph)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_bert_takes_integer_ids_and_a_mask_as_graph_inputs_that_stay_int64(dtype):
    """input_ids and attention_mask are int64 placeholders at any model
    dtype (``cast_input`` keeps non-float tensors), and the mask is a real
    input: another mask gives another output from the same graph."""
    problem, graph = captured("hf_bert", dtype=dtype)
    inputs = [n for n in graph.placeholders if graph.sources[n.name].kind == "input"]
    assert [(n.name, n.meta["val"].dtype) for n in inputs] == [("input_ids", torch.int64), ("attention_mask", torch.int64)]
    ids, mask = problem.make_inputs(1)
    assert ids.dtype == mask.dtype == torch.int64 and 0 < int(mask.sum()) < mask.numel()
    if dtype == "bf16":
        assert graph.output_nodes[0].meta["val"].dtype == torch.bfloat16
        return  # bf16 eager vs graph: same ops, compared in fp32 below
    padded = assert_graph_computes_the_model(problem, graph, inputs=[ids, mask])
    unpadded = assert_graph_computes_the_model(problem, graph, inputs=[ids, torch.ones_like(mask)])
    assert not torch.allclose(padded[1], unpadded[1])  # the second row is padded: its mask matters
    torch.testing.assert_close(padded[0], unpadded[0])  # the first is not


def test_vit_is_captured_from_pixel_values():
    problem, graph = captured("hf_vit")
    [pixels] = [n for n in graph.placeholders if graph.sources[n.name].kind == "input"]
    assert list(pixels.meta["val"].shape) == [2, 3, 32, 32] and pixels.meta["val"].dtype == torch.float32
    assert len(find_attention(graph.compute_nodes)) == 2
    out = assert_graph_computes_the_model(problem, graph)
    assert list(out.shape) == [2, 10]


# the convention cases: a GPT-2 of one layer, its forward's return line replaced
CONVENTION = '''
import dataclasses

import torch
from torch import nn
from transformers import GPT2Config, GPT2Model
from transformers.utils import ModelOutput

batch_size = 2
seq_len = 8


@dataclasses.dataclass
class Hidden(ModelOutput):
    last: torch.Tensor = None


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32, bos_token_id=0, eos_token_id=0,
                            attn_implementation="eager")
        self.gpt = GPT2Model(config)

    def forward(self, input_ids):
        RETURN


def get_inputs():
    return [torch.randint(0, 64, (batch_size, seq_len))]


def get_init_inputs():
    return []
'''


def convention(tmp_path, name: str, returned: str) -> Path:
    return write_model(tmp_path, name, CONVENTION.replace("RETURN", returned))


def test_use_cache_true_returning_a_dynamic_cache_is_refused_at_load_naming_use_cache_false(tmp_path):
    for name, returned in [("default_cache", "return self.gpt(input_ids)"),
                           ("tuple_cache", "return self.gpt(input_ids, use_cache=True, return_dict=False)")]:
        with pytest.raises(ProblemError) as caught:
            load_problem(ProblemSpec(str(convention(tmp_path, name, returned)), {}))
        err = caught.value
        assert "DynamicCache" in err.message and "use_cache" in err.message, err.message
        assert "use_cache=False" in err.hint and "self.model(input_ids, use_cache=False)" in err.hint


def _library_plan_model(tmp_path, problem, graph):
    """``optimized_model.py`` for the all-library plan of ``graph``, imported
    plainly: (eager Model, ModelNew with its weights)."""
    from lego_core.tree.fusion_tree import Candidate, build_tree

    items = build_tree(graph).first_decomposition_leaves()
    for leaf in items:
        leaf.chosen = Candidate(f"{leaf.id}-library", leaf.id, "library", "library")
    out = tmp_path / "out"
    write_output(out, graph, items, problem, "hftest")
    name = f"hf_optimized_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, out / "optimized_model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    model = module.Model(*module.get_init_inputs()).eval()
    new = module.ModelNew(*module.get_init_inputs()).eval()
    new.load_state_dict(model.state_dict())
    return model, new


def test_a_model_output_return_is_captured_and_rebuilt_as_the_same_class_by_the_optimized_model(tmp_path):
    """``return self.gpt(ids, use_cache=False, output_hidden_states=True)``: a
    BaseModelOutputWithPastAndCrossAttentions holding a tensor and a tuple of
    tensors.  The graph's outputs are its leaves; ``OUTPUT_SPEC`` names the
    class, and ModelNew returns that class with the same keys and values."""
    path = convention(tmp_path, "model_output", "return self.gpt(input_ids, use_cache=False, output_hidden_states=True)")
    problem = load_problem(ProblemSpec(str(path), {}))
    graph = capture_graph(problem)
    assert graph.out_spec.type.__name__ == "BaseModelOutputWithPastAndCrossAttentions" and len(graph.user_outputs) == 3
    assert "transformers.modeling_outputs.BaseModelOutputWithPastAndCrossAttentions" in output_spec_text(graph)
    model, new = _library_plan_model(tmp_path, problem, graph)
    runtime = sys.modules[type(new).__module__].lego_runtime
    rebuilt = []
    unflatten = runtime.unflatten_output
    runtime.unflatten_output = lambda leaves, spec: rebuilt.append(spec) or unflatten(leaves, spec)
    ids = problem.make_inputs(2)[0]
    with torch.no_grad():
        # the plan itself, whatever ModelNew's guards decide (today they run the original forward for an HF
        # model: the model file's __name__ and transformers' lazily set gpt._output_capturing_hooks_installed)
        got, want = new._lego_plan(ids), model(ids)
    assert len(rebuilt) == 1
    assert type(got) is type(want) and list(got.keys()) == list(want.keys()) == ["last_hidden_state", "hidden_states"]
    torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state)
    torch.testing.assert_close(got.hidden_states, want.hidden_states)


def test_the_runtime_imports_a_model_output_classs_module_when_nothing_registered_it_yet():
    """In a fresh interpreter that has not imported ``transformers.modeling_outputs``
    (``import transformers`` alone does not register its classes with pytree),
    ``lego_runtime.unflatten_output`` imports the module the spec names and rebuilds the class."""
    code = (
        "import sys, torch\n"
        f"sys.path.insert(0, {str(REPO / 'lego_core' / 'compose' / 'templates')!r})\n"
        "import lego_runtime\n"
        "spec = ('[1, {\"type\": \"transformers.modeling_outputs.CausalLMOutput\", \"context\": \"[\\\\\"logits\\\\\"]\", '\n"
        "        '\"children_spec\": [{\"type\": null, \"context\": null, \"children_spec\": []}]}]')\n"
        "assert 'transformers.modeling_outputs' not in sys.modules\n"
        "out = lego_runtime.unflatten_output((torch.ones(2),), spec)\n"
        "print(type(out).__module__, type(out).__name__, out.logits.tolist())\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["transformers.modeling_outputs", "CausalLMOutput", "[1.0,", "1.0]"]


def test_an_output_class_defined_in_the_model_file_is_refused_at_load_with_the_fix(tmp_path):
    """A ModelOutput subclass of the file itself: the optimized model imports
    the file under another module name and could not find the class."""
    path = convention(tmp_path, "own_output", "return Hidden(last=self.gpt(input_ids, use_cache=False).last_hidden_state)")
    with pytest.raises(ProblemError) as caught:
        load_problem(ProblemSpec(str(path), {}))
    assert "returned a Hidden, a class defined in the model file" in caught.value.message
    assert "dict(out)" in caught.value.hint and "transformers' ModelOutput classes work" in caught.value.hint
