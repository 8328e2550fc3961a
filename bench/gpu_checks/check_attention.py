"""GPU check of the flash-attention template (run on a CUDA machine).

For each case and dtype (bf16, fp32): a small model holding only the
attention is captured on the GPU as LEGO captures models (torch.export, core
ATen), the attention group is matched (``lego_core.tree.fusion.attention``), the
template agent's kernel is generated, imported and run on fresh random
inputs, and compared with ``F.scaled_dot_product_attention`` in fp64
(norm-relative error ||out - ref|| / ||ref||).  Before that the kernel file
is tuned as the search tunes it (``lego_core.judge.tuning``: every
``TUNE_CONFIGS`` entry timed, the fastest baked into ``CONFIG``); the check
runs the tuned file and prints the winning configuration.  Then timed with
``lego_core.runtime.timing.time_gpu`` (CUDA events, L2 flushed, median) against
``F.scaled_dot_product_attention`` (``enable_gqa`` for GQA) and the eager
hand-written math (q @ k^T, scale, mask, softmax, @ v).  The table is last.

Usage: python bench/gpu_checks/check_attention.py [--dtype bf16|fp32|both] [--quick]
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import traceback
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lego_core.agents.template.attention_codegen import generate, launch_config  # noqa: E402
from lego_core.load.capture import Graph, decomposition_table  # noqa: E402
from lego_core.tree.fusion.attention import find_attention  # noqa: E402
from lego_core.judge import tuning  # noqa: E402
from lego_core.judge.inputs import load_module  # noqa: E402
from lego_core.tree.subproblem import make_subproblem  # noqa: E402
from lego_core.runtime.timing import time_gpu  # noqa: E402

# (name, B, H, H_kv, T, D, causal, form): form "math" = hand-written with a tril buffer, "sdpa" = F.sdpa
CASES = [
    ("gpt-like", 8, 12, 12, 256, 64, True, "math"),
    ("llama-like GQA", 4, 16, 4, 512, 128, True, "sdpa"),
    ("vit-like", 32, 6, 6, 197, 64, False, "sdpa"),
    ("odd causal", 2, 8, 8, 300, 64, True, "sdpa"),  # N not a multiple of BLOCK_N: masked key tiles
    ("long causal", 1, 16, 16, 16384, 64, True, "sdpa"),
]
TOLERANCE = {torch.bfloat16: 2e-2, torch.float32: 1e-4}


class HandWritten(nn.Module):
    """gpt_stack's attention: q @ k^T / sqrt(d), masked_fill of a tril buffer, softmax, @ v."""

    def __init__(self, t: int, causal: bool):
        super().__init__()
        self.causal = causal
        self.register_buffer("mask", torch.tril(torch.ones(t, t, dtype=torch.bool)).view(1, 1, t, t), persistent=False)

    def forward(self, q, k, v):
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        if self.causal:
            t = q.shape[2]
            att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
        return F.softmax(att, dim=-1) @ v


class Sdpa(nn.Module):
    """llama_stack's attention: repeat_interleave of K/V (GQA), then F.scaled_dot_product_attention."""

    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


def _inputs(b, h, hk, t, d, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(b, x, t, d, device="cuda", dtype=dtype, generator=gen) for x in (h, hk, hk)]


def _kernel(model, example, workdir: Path, tag: str):
    """Capture ``model`` at ``example``, match the one attention group, generate its kernel,
    tune it on the example's boundary inputs (as the search does) and import the tuned file."""
    ep = torch.export.export(model, tuple(example)).run_decompositions(decomposition_table())
    graph = Graph(ep)
    groups = find_attention(graph.compute_nodes)
    if len(groups) != 1:
        raise RuntimeError(f"expected one attention group, found {len(groups)}; ops: {[str(n.target) for n in graph.compute_nodes]}")
    group = groups[0]
    sub = make_subproblem("sp_check", group.nodes, graph.output_nodes, "attention", group=group)
    source = generate(sub)
    result = tuning.tune_source(source, [_boundary(graph, sub, model, example)], device_name=torch.cuda.get_device_name())
    path = workdir / f"attention_{tag}.py"
    path.write_text(result.source)
    module = load_module(path, f"lego_check_attention_{tag}")
    return graph, sub, module, launch_config(group), result


def _boundary(graph: Graph, sub, model, inputs):
    """The kernel's inputs for the model inputs ``inputs``: run the graph's nodes up to the group's boundary."""
    names = {n.name for n in sub.inputs}
    env = graph.placeholder_values(model, inputs)
    values = {}
    for node in graph.fx_graph.nodes:
        if node.op == "placeholder":
            values[node.name] = env[node.name]
        elif node.op == "call_function" and node.name not in {n.name for n in sub.nodes}:
            args = torch.fx.node.map_arg(node.args, lambda a: values.get(a.name))
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda a: values.get(a.name))
            if any(isinstance(a, torch.fx.Node) and a.name not in values for a in node.all_input_nodes):
                continue
            values[node.name] = node.target(*args, **kwargs)
        if names <= set(values):
            break
    return [values[n.name] for n in sub.inputs]


def _reference(q, k, v, causal):
    rep = q.shape[1] // k.shape[1]
    k, v = k.double().repeat_interleave(rep, 1), v.double().repeat_interleave(rep, 1)
    return F.scaled_dot_product_attention(q.double(), k, v, is_causal=causal)


def _math(q, k, v, causal):
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        t = q.shape[2]
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return F.softmax(att, dim=-1) @ v


def _time(fn, inputs):
    """Median ms, replayed as a CUDA graph (as the shipped model runs kernels and as the
    search measures them: no host launch overhead), launched directly when not capturable."""
    try:
        try:
            return time_gpu(lambda xs: fn(*xs), [inputs], cuda_graph=True).median_ms
        except torch.OutOfMemoryError:
            raise
        except Exception:  # noqa: BLE001 - not capturable
            torch.cuda.synchronize()
            return time_gpu(lambda xs: fn(*xs), [inputs]).median_ms
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        return float("nan")


def run_case(case, dtype, workdir: Path) -> dict:
    name, b, h, hk, t, d, causal, form = case
    model = (HandWritten(t, causal) if form == "math" else Sdpa(causal)).cuda()
    tag = f"{name.replace(' ', '_').replace('-', '_')}_{str(dtype)[6:]}"
    example = _inputs(b, h, hk, t, d, dtype, seed=0)
    graph, sub, module, config, tuned = _kernel(model, example, workdir, tag)
    errors = []
    for seed in (1, 2, 3):  # fresh random inputs, never the capture's
        inputs = _inputs(b, h, hk, t, d, dtype, seed)
        out = module.launch(*_boundary(graph, sub, model, inputs))[0]
        ref = _reference(*inputs, causal)
        errors.append(((out.double() - ref).norm() / ref.norm()).item())
        del out, ref
    inputs = _inputs(b, h, hk, t, d, dtype, seed=4)
    boundary = _boundary(graph, sub, model, inputs)
    lego_ms = _time(lambda *xs: module.launch(*xs), boundary)
    sdpa_ms = _time(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hk != h), inputs)
    math_ms = _time(lambda q, k, v: _math(q, k, v, causal), inputs) if b * h * t * t * 4 < 40e9 else float("nan")
    spec = sub.group.spec
    return {
        "case": f"{name} B={b} H={h}/{hk} T={t} D={d}{' causal' if causal else ''}", "dtype": str(dtype)[6:],
        "form": spec.form + (" +causal-check" if spec.mask is not None else ""), "err": max(errors),
        "ok": max(errors) < TOLERANCE[dtype], "lego_ms": lego_ms, "sdpa_ms": sdpa_ms, "math_ms": math_ms,
        "config": f"{config}\n    tuning: {tuned.summary()}", "winner": _short(tuned.winner), "default_ms": tuned.times[0][1],
    }


def _short(cfg: dict) -> str:
    return f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']} w{cfg['num_warps']} s{cfg['num_stages']}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["bf16", "fp32", "both"], default="both")
    parser.add_argument("--quick", action="store_true", help="skip the long-sequence case")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    dtypes = {"bf16": [torch.bfloat16], "fp32": [torch.float32], "both": [torch.bfloat16, torch.float32]}[args.dtype]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in dtypes:
            for case in CASES[:-1] if args.quick else CASES:
                try:
                    row = run_case(case, dtype, Path(tmp))
                except Exception as exc:  # noqa: BLE001 - report every case
                    traceback.print_exc()
                    row = {"case": case[0], "dtype": str(dtype)[6:], "form": "-", "err": float("nan"), "ok": False,
                           "lego_ms": float("nan"), "sdpa_ms": float("nan"), "math_ms": float("nan"), "config": f"{type(exc).__name__}: {exc}"[:200],
                           "winner": "-", "default_ms": float("nan")}
                print(f"{row['case']} {row['dtype']}: {row['config']}", flush=True)
                rows.append(row)
                torch.cuda.empty_cache()
    print()
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    print("times: CUDA-graph replay, L2 flushed, median; 'default ms' is the untuned CONFIG in the tuning run (short timing)")
    head = f"{'case':44} {'dtype':9} {'form':22} {'norm rel err':>12} {'ok':>3} {'tuned':>16} {'default ms':>10} {'LEGO ms':>9} {'SDPA ms':>9} {'math ms':>9} {'vs SDPA':>8} {'vs math':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['case']:44} {r['dtype']:9} {r['form']:22} {r['err']:12.2e} {'yes' if r['ok'] else 'NO':>3} {r['winner']:>16} {r['default_ms']:10.4f} {r['lego_ms']:9.4f} "
            f"{r['sdpa_ms']:9.4f} {r['math_ms']:9.4f} {r['sdpa_ms'] / r['lego_ms']:7.2f}x {r['math_ms'] / r['lego_ms']:7.2f}x"
        )
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
