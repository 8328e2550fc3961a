"""Sub-problems as JSON payloads (``lego_core.agents.payload``).

Every leaf the template agent attempts, in every reference model at its
tiny.json sizes, goes through ``json.dumps`` / ``json.loads`` and
``sub_from_payload``; the template agent must write the same kernel file for
the rebuilt sub-problem as for the original.  Broken payloads must raise a
ValueError that says what is wrong.
"""
from __future__ import annotations

import copy
import json
import os
import re

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere

import pytest

from lego_core.agents.payload import sub_from_payload, sub_to_payload
from lego_core.agents.template.agent import TemplateAgent
from lego_core.load.capture import capture_graph
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.tree.fusion_tree import build_tree

MODELS = [
    "gated_conv_mixer.py",
    "gpt_stack.py",
    "llama_stack.py",
    "lstm_tagger.py",
    "mlp_residual.py",
    "mobile_se_block.py",
    "moe_router.py",
    "resnet_stage.py",
    "scores_chain.py",
    "vit_encoder.py",
]


def tree_of(shared_models, tiny_overrides, name: str):
    spec = ProblemSpec(str(shared_models / name), tiny_overrides(name))
    return build_tree(capture_graph(load_problem(spec)))


def leaves(shared_models, tiny_overrides, name: str) -> list:
    return tree_of(shared_models, tiny_overrides, name).leaves()


def normalised(text: str | None, sub_id: str) -> str | None:
    return None if text is None else re.sub(rf"\b{re.escape(sub_id)}", "SUB", text)


@pytest.mark.parametrize("name", MODELS)
def test_attempted_leaves_round_trip_through_json(shared_models, tiny_overrides, name):
    agent = TemplateAgent()
    tree = tree_of(shared_models, tiny_overrides, name)
    whole = sub_from_payload(json.loads(json.dumps(sub_to_payload(tree.root.sub))))  # what the monolithic strategy sends
    assert (whole.ops, whole.signature, whole.group) == (tree.root.sub.ops, tree.root.sub.signature, None)
    attempted = [leaf.sub for leaf in tree.leaves() if agent.can_attempt(leaf.sub)]
    assert attempted, f"{name}: the template agent attempts no leaf"
    for sub in attempted:
        payload = sub_to_payload(sub)
        wire = json.loads(json.dumps(payload))
        assert wire == payload, f"{sub.id}: the payload is not plain JSON"
        rebuilt = sub_from_payload(wire)
        where = f"{name} {sub.id} {sub.ops}"
        assert rebuilt.signature == sub.signature, where
        assert (rebuilt.input_specs, rebuilt.output_specs) == (sub.input_specs, sub.output_specs), where
        assert (rebuilt.group.kind, rebuilt.group.shape, rebuilt.group.roles) == (sub.group.kind, sub.group.shape, sub.group.roles), where
        assert agent.can_attempt(rebuilt), where
        original, again = agent.propose(sub, []), agent.propose(rebuilt, [])
        assert normalised(again.source, rebuilt.id) == normalised(original.source, sub.id), where
        assert normalised(again.kernel_name, rebuilt.id) == normalised(original.kernel_name, sub.id), where


def test_every_leaf_rebuilds_including_library_ones(shared_models, tiny_overrides):
    """Layout and heavy leaves (GEMM, views, factories) rebuild too, with
    ops that take no tensor (aten.scalar_tensor) kept as nodes."""
    for leaf in leaves(shared_models, tiny_overrides, "gpt_stack.py"):
        rebuilt = sub_from_payload(json.loads(json.dumps(sub_to_payload(leaf.sub))))
        assert rebuilt.ops == leaf.sub.ops and rebuilt.signature == leaf.sub.signature


@pytest.fixture(scope="module")
def softmax_payload(shared_models, tiny_overrides) -> dict:
    """The payload of the masked-softmax leaf of gpt_stack (several ops, a
    boolean mask, a factory op with -inf)."""
    for leaf in leaves(shared_models, tiny_overrides, "gpt_stack.py"):
        if "aten._softmax.default" in leaf.sub.ops:
            return json.loads(json.dumps(sub_to_payload(leaf.sub)))
    pytest.fail("gpt_stack has no softmax leaf")


def broken(payload: dict, change) -> dict:
    data = copy.deepcopy(payload)
    change(data)
    return data


CORRUPTIONS = {
    "not an object": (lambda d: None, "expected a JSON object", True),
    "missing field": (lambda d: d.pop("reference"), "missing field.*reference", False),
    "mistyped field": (lambda d: d.update(inputs="x"), "field 'inputs' has type str", False),
    "other format": (lambda d: d.update(format=99), "format 99", False),
    "syntax error": (lambda d: d.update(reference=d["reference"] + "\n  )("), "does not parse", False),
    "arbitrary code": (
        lambda d: d.update(reference=d["reference"].replace("    div", "    import os\n    div", 1)),
        "only `name = torch.ops.aten",
        False,
    ),
    "not an aten op": (
        lambda d: d.update(reference=d["reference"].replace("torch.ops.aten.div.Tensor", "torch.load", 1)),
        "not a torch.ops.aten operator",
        False,
    ),
    "changed op": (
        lambda d: d.update(reference=d["reference"].replace("aten.div.Tensor", "aten.mul.Tensor", 1)),
        "signature",
        False,
    ),
    "changed shape": (lambda d: d["inputs"][0]["value"]["tensor"]["shape"].__setitem__(0, 3), None, False),
    "unknown dtype": (lambda d: d["inputs"][0]["value"]["tensor"].update(dtype="float99"), "unknown dtype 'float99'", False),
    "renamed input": (lambda d: d["inputs"][0].update(name="zz"), "input specs name", False),
    "other group kind": (lambda d: d.update(group_kind="pointwise"), "row_reduction group, the payload says pointwise", False),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_a_corrupted_payload_raises_a_clear_value_error(softmax_payload, case):
    change, message, replace_whole = CORRUPTIONS[case]
    data = change(None) if replace_whole else broken(softmax_payload, change)
    with pytest.raises(ValueError, match=message) as info:
        sub_from_payload(data)
    assert "sub-problem payload" in str(info.value)


@pytest.mark.parametrize("name", ["mlp_residual.py", "gpt_stack.py"])
def test_gemm_epilogue_groups_round_trip(shared_models, tiny_overrides, name):
    """GEMM + epilogue sub-problems (formed by bottom-up mutation) rebuild
    through ``fusion.gemm.gemm_epilogue_group``."""
    gemm = pytest.importorskip("lego_core.tree.fusion.gemm")
    from lego_core.load.capture import op_name
    from lego_core.tree.subproblem import make_subproblem

    graph = capture_graph(load_problem(ProblemSpec(str(shared_models / name), tiny_overrides(name))))
    agent = TemplateAgent()
    grown = [gemm.grow_epilogue(n) for n in graph.compute_nodes if op_name(n) in ("aten.mm.default", "aten.addmm.default")]
    subs = []
    for k, nodes in enumerate(g for g in grown if len(g) > 1):
        group, reason = gemm.gemm_epilogue_group(nodes)
        assert group is not None, reason
        subs.append(make_subproblem(f"spg{k}", nodes, graph.output_nodes, "gemm_epilogue", group=group))
    assert subs
    for sub in subs:
        rebuilt = sub_from_payload(json.loads(json.dumps(sub_to_payload(sub))))
        assert rebuilt.group.kind == "gemm_epilogue" and rebuilt.signature == sub.signature
        original = agent.propose(sub, []).source
        assert original is not None and agent.propose(rebuilt, []).source == original
