"""GPU check: convolution + eval BatchNorm forms on resnet_stage and mobile_se_block.

At the model files' own sizes, in bf16 and fp32, on one CUDA GPU:

- ``eager NCHW``: the user's Model as written;
- ``eager NHWC``: the Model converted to channels_last (input converted at
  entry and the output back to NCHW at exit, as a user calling it with NCHW
  tensors would need);
- ``lego fused`` / ``lego fused NHWC``: every conv a library call, every
  pointwise / row-reduction fusion group of the heavy-op seam split a
  generated Triton kernel (eval BatchNorm + activation + residual in ONE
  kernel), graph captured in NCHW or channels_last;
- ``lego folded`` / ``lego folded NHWC``: as above, but each conv followed by
  BatchNorm is a ``conv_bn`` kernel file (W', b' folded from the live weights,
  cached; one library conv + the tail kernel).
- ``lego fused NHWC old``: ``lego fused NHWC`` with the pointwise template's
  dense-in-memory-order path turned off (``pointwise_codegen.DENSE_FAST_PATH``): every
  kernel iterates in NCHW logical order through strides, as before it existed.
- ``lego plan (pipeline)``: the real ``lego_core.optimize`` (channels_last
  ``auto``: on for these conv models on CUDA) run on the model file at its
  own size, and the shipped ``ModelNew`` called as a user calls it (NCHW
  input, eager's output layout; its LAUNCH as chosen by the pipeline).  Only
  for the dtypes in ``--pipeline-dtypes`` (default bf16; each run takes a
  while).  Its report's launch choice is printed.

The NHWC capture converts only the inputs: the user's conv weights stay NCHW
(cuDNN converts them itself), while ``eager NHWC`` converts the whole model.

For each form: the norm-relative error of the output against the fp64 eager
model on a fresh random input (seed 1234, never seen at capture), and the
median GPU time (``lego_core.runtime.timing.time_gpu``: CUDA events, L2 flushed,
three rotating input sets) called op by op and replayed as a CUDA graph.
The forms run the graph through a small Python interpreter (one call per
ATen op or kernel), so "op by op" includes Python dispatch; the CUDA-graph
column is the GPU time.  The table is printed last.

Usage (repository root, on the GPU machine):

    PYTHONPATH=. python bench/gpu_checks/check_conv.py [--models resnet_stage mobile_se_block] [--dtypes bf16 fp32] [--pipeline-dtypes bf16]
    PYTHONPATH=. python bench/gpu_checks/check_conv.py --smoke --pipeline-dtypes fp32   # CPU, tiny sizes, no timing
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

import torch
import torch.fx as fx

from lego_core.agents.template import pointwise_codegen
from lego_core.agents.template.codegen import generate
from lego_core.agents.template.expressions import Unsupported
from lego_core.load.capture import capture_graph, to_channels_last
from lego_core.tree.fusion import policy
from lego_core.tree.fusion.conv_bn import conv_bn_group
from lego_core.tree.fusion.groups import partition
from lego_core.load.problem import ProblemSpec, load_problem
from lego_core.judge.inputs import load_module
from lego_core.tree.subproblem import make_subproblem
from lego_core.runtime.timing import time_gpu
from lego_core.tree.fusion_tree import _heavy_seams

_ROOT = Path(__file__).resolve().parents[2]
_PLACES = [os.environ.get("LEGO_MODELS", ""), _ROOT / "shared" / "models", _ROOT.parent / "shared" / "models", "/work/shared/models"]
MODELS = next((Path(p) for p in _PLACES if p and (Path(p) / "tiny.json").exists()), Path("/work/shared/models"))


def plan_subproblems(graph, fold: bool) -> list:
    """Fusable sub-problems of the whole graph's heavy-op seam split (and,
    with ``fold``, conv + BatchNorm groups in place of conv | BN-group pairs)."""
    groups = []
    for is_heavy, nodes in _heavy_seams(graph.compute_nodes):
        if not is_heavy:
            groups += [g for g in partition(nodes) if g.kind in ("pointwise", "row_reduction") and g.fusable]
    subs, used = [], set()
    if fold:
        by_first = {g.nodes[0].name: g for g in groups}
        for node in graph.compute_nodes:
            if "convolution" not in str(node.target) or len(node.users) != 1:
                continue
            bn = next(iter(node.users))
            g = by_first.get(bn.name)
            if g is None:
                continue
            group, _reason = conv_bn_group([node] + list(g.nodes))
            if group is not None:
                subs.append(make_subproblem(f"fold{len(subs)}", group.nodes, graph.output_nodes, "conv_bn", group=group))
                used.add(id(g))
    for k, g in enumerate(groups):
        if id(g) not in used:
            subs.append(make_subproblem(f"g{k}", g.nodes, graph.output_nodes, g.kind, group=g))
    return subs


class PlanRunner:
    """Runs a captured graph op by op, with some node groups replaced by
    generated kernel files (``launch`` at the group's last node in graph order)."""

    def __init__(self, graph, model, subs: list, work: Path):
        self.graph = graph
        self.inputs = [n.name for n in graph.placeholders if graph.sources[n.name].kind == "input"]
        values = graph.placeholder_values(model, [None] * len(self.inputs))
        self.constants = {k: v for k, v in values.items() if graph.sources[k].kind != "input"}
        order = {n.name: k for k, n in enumerate(graph.compute_nodes)}
        self.at: dict[str, tuple] = {}
        self.skip: set[str] = set()
        self.kernels = 0
        for sub in subs:
            try:
                source = generate(sub)
            except Unsupported as exc:
                print(f"  {sub.id}: stays a library call ({exc})")
                continue
            path = work / f"{sub.id}_{abs(hash(source)) % 10**8}.py"
            path.write_text(source)
            module = load_module(path, f"check_conv_{path.stem}")
            last = max(sub.nodes, key=lambda n: order[n.name])
            self.at[last.name] = (sub, module)
            self.skip |= {n.name for n in sub.nodes}
            self.kernels += 1

    def __call__(self, *user_inputs):
        env = dict(self.constants)
        env.update(zip(self.inputs, user_inputs))
        for node in self.graph.compute_nodes:
            if node.name in self.at:
                sub, module = self.at[node.name]
                outs = module.launch(*[env[a.name] for a in sub.inputs])
                env.update(zip([o.name for o in sub.outputs], outs))
                continue
            if node.name in self.skip:
                continue
            args = fx.node.map_arg(node.args, lambda a: env[a.name])
            kwargs = fx.node.map_arg(node.kwargs, lambda a: env[a.name])
            env[node.name] = node.target(*args, **kwargs)
        return env[self.graph.output_nodes[0].name]


def nontrivial_batchnorm(model: torch.nn.Module) -> None:
    """Random running statistics and affine parameters in every BatchNorm."""
    gen = torch.Generator().manual_seed(7)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            for t, lo, hi in ((m.running_mean, -0.5, 0.5), (m.running_var, 0.5, 1.5), (m.weight, 0.5, 1.5), (m.bias, -0.5, 0.5)):
                if t is not None:
                    with torch.no_grad():
                        t.copy_((torch.rand(t.shape, generator=gen) * (hi - lo) + lo).to(t))


def pipeline_model(spec: ProblemSpec, problem, work: Path):
    """``lego_core.optimize`` of ``spec`` (channels_last auto) into ``work``;
    returns (ModelNew with ``problem.model``'s weights, number of kernel files, report)."""
    from lego_core import optimize
    from lego_core.config import OptimizeConfig
    from lego_core.judge.end_to_end.shipped import load_composed

    out = work / f"pipeline_{Path(spec.path).stem}_{spec.dtype}"
    report = optimize(spec, str(out), OptimizeConfig(cache=False, compare_compile=False, channels_last="auto"))
    launch = report.get("launch") or {}
    print(f"  pipeline: channels_last {report.get('layout', {}).get('channels_last')}, launch {launch.get('chosen')}: {launch.get('reason')}", flush=True)
    return load_composed(out, problem), len(list((out / "kernels").glob("*.py"))), report


def check_model(name: str, dtype: str, work: Path, smoke: bool = False, pipeline: bool = False) -> list[tuple]:
    """Rows (model, dtype, form, kernels, rel err, ms, graph ms, status);
    ``smoke``: tiny sizes on the CPU (Triton's interpreter), no timing;
    ``pipeline``: also the ``lego plan (pipeline)`` row (optimize + ModelNew)."""
    rows = []
    overrides = json.loads((MODELS / "tiny.json").read_text())[f"{name}.py"] if smoke else {}
    spec = ProblemSpec(str(MODELS / f"{name}.py"), dict(overrides), dtype=dtype, device="cpu" if smoke else "cuda")
    problem = load_problem(spec)
    nontrivial_batchnorm(problem.model)
    state = copy.deepcopy(problem.model.state_dict())
    reference = copy.deepcopy(problem.model).double().eval()
    x_check = problem.make_inputs(1234)
    with torch.no_grad():
        want = reference(*[x.double() if torch.is_tensor(x) and x.is_floating_point() else x for x in x_check])
    input_sets = [problem.make_inputs(seed) for seed in (1, 2, 3)]

    def nchw_out(fn):
        return lambda *xs: fn(*xs).contiguous()

    eager = problem.model.eval()
    eager_cl = copy.deepcopy(eager).to(memory_format=torch.channels_last)
    forms = [
        ("eager NCHW", eager, 0, False),
        ("eager NHWC", eager_cl, 0, True),
    ]
    for fold, channels_last, dense in ((False, False, True), (False, True, True), (False, True, False), (True, False, True), (True, True, True)):
        p = load_problem(spec)
        p.model.load_state_dict(state)
        graph = capture_graph(p, channels_last=channels_last)
        pointwise_codegen.DENSE_FAST_PATH = dense
        try:
            runner = PlanRunner(graph, p.model, plan_subproblems(graph, fold), work)
        finally:
            pointwise_codegen.DENSE_FAST_PATH = True
        label = f"lego {'folded' if fold else 'fused'}{' NHWC' if channels_last else ''}{'' if dense else ' old'}"
        forms.append((label, runner, runner.kernels, channels_last))
    if pipeline:
        try:
            new, kernels, _report = pipeline_model(spec, problem, work)
            forms.append(("lego plan (pipeline)", new, kernels, None))
        except Exception as exc:  # noqa: BLE001 - report, keep going
            traceback.print_exc()
            rows.append((name, dtype, "lego plan (pipeline)", 0, float("nan"), float("nan"), float("nan"), f"FAILED {type(exc).__name__}"))
    for label, fn, kernels, nhwc in forms:
        call = (lambda f: lambda *xs: f(*[to_channels_last(x) for x in xs]).contiguous())(fn) if nhwc else fn
        try:
            with torch.no_grad():
                got = call(*x_check)
                err = ((got.double() - want).norm() / want.norm()).item()
                if nhwc is None and got.stride() != want.stride():  # the shipped model: eager's layout
                    raise AssertionError(f"output strides {got.stride()} differ from eager's {want.stride()}")
                if smoke:
                    rows.append((name, dtype, label, kernels, err, float("nan"), float("nan"), "ok" if err <= 1e-4 else "ERROR"))
                    print(f"  {name} {dtype} {label}: rel err {err:.2e} ({kernels} kernels)", flush=True)
                    continue
                ms = time_gpu(lambda xs: call(*xs), input_sets).median_ms
                try:
                    graph_ms = time_gpu(lambda xs: call(*xs), input_sets, cuda_graph=True).median_ms
                except Exception as exc:  # noqa: BLE001 - report, keep going
                    print(f"  {label}: CUDA graph failed: {type(exc).__name__}: {exc}")
                    graph_ms = float("nan")
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            rows.append((name, dtype, label, kernels, float("nan"), float("nan"), float("nan"), f"FAILED {type(exc).__name__}"))
            continue
        tol = 2e-2 if dtype == "bf16" else 1e-4
        rows.append((name, dtype, label, kernels, err, ms, graph_ms, "ok" if err <= tol else f"ERROR > {tol}"))
        print(f"  {name} {dtype} {label}: rel err {err:.2e}, {ms:.4f} ms, graph {graph_ms:.4f} ms", flush=True)
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet_stage", "mobile_se_block"])
    parser.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"])
    parser.add_argument("--pipeline-dtypes", nargs="*", default=["bf16"], help="dtypes of the 'lego plan (pipeline)' row (none: skip it)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, fp32, CPU (TRITON_INTERPRET=1), no timing")
    args = parser.parse_args(argv)
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")
        args.dtypes = ["fp32"]
    elif not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    torch.backends.cudnn.benchmark = True
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            for dtype in args.dtypes:
                print(f"{name} {dtype}", flush=True)
                rows += check_model(name, dtype, Path(tmp), args.smoke, pipeline=dtype in args.pipeline_dtypes)
    print()
    print(f"{'model':16} {'dtype':5} {'form':20} {'kernels':>7} {'rel err':>9} {'ms':>9} {'graph ms':>9} {'vs eager':>8}  check")
    eager = {(r[0], r[1]): r[6] for r in rows if r[2] == "eager NCHW"}
    for name, dtype, label, kernels, err, ms, graph_ms, status in rows:
        speed = eager.get((name, dtype), float("nan")) / graph_ms if graph_ms == graph_ms and graph_ms else float("nan")
        print(f"{name:16} {dtype:5} {label:20} {kernels:7d} {err:9.2e} {ms:9.4f} {graph_ms:9.4f} {speed:7.2f}x  {status}")
    print("(vs eager = eager NCHW graph ms / this form's graph ms)")
    return 0 if all(r[7] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
