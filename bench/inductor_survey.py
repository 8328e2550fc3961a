"""What Inductor generates where LEGO is behind it: kernels, their classes and times (issue 29, GPU).

usage (on a GPU machine):
    python bench/inductor_survey.py --out DIR [--dtype bf16] [--mode reduce-overhead] MODEL.py[,k=v...] ...

For each model, in a child process of its own (a fresh Inductor cache, so the
generated code is this model's alone): builds ``Model`` as
``../shared/tools/sidebyside.py`` does (seed 0, eval, on the GPU in the
dtype), times eager and ``torch.compile(mode=...)`` (CUDA events, L2 flushed,
median of 50 calls, ms), then profiles 10 calls of each with
``torch.profiler`` and lists every GPU kernel: name, calls per forward, time
per forward (us) and its class:

- ``triton``: a kernel Inductor generated (``triton_poi_*`` pointwise,
  ``triton_red_*`` / ``triton_per_*`` reductions, ``triton_tem_*`` templates);
- ``conv``: a cuDNN / implicit-GEMM convolution (extern call);
- ``gemm``: a cuBLAS / CUTLASS matrix multiply (extern call);
- ``attention``: a flash / memory-efficient attention kernel;
- ``other``: anything else (copies, ATen's own elementwise kernels).

Writes ``DIR/<model>-<dtype>.json`` (timings, kernel lists) and
``DIR/<model>-<dtype>-code/`` (Inductor's generated Python modules: the
wrapper that shows which extern kernels it calls, and every Triton kernel's
source), and prints a table last.  Never imports lego_core: this is what the
compiler does, measured on its own.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def kernel_class(name: str) -> str:
    """The class of one GPU kernel by its name (see the module docstring)."""
    low = name.lower()
    if low.startswith("triton_"):
        return "triton"
    if any(k in low for k in ("flash", "fmha", "attention", "efficient_attention")):
        return "attention"
    if any(k in low for k in ("conv", "cudnn", "implicit_convolve", "xmma_fprop", "dgrad", "wgrad", "winograd", "fprop")):
        return "conv"
    if any(k in low for k in ("gemm", "gemv", "nvjet", "cutlass", "sm90_xmma", "cublas", "matmul", "splitk")):
        return "gemm"
    return "other"


def _load(path: str):
    spec = importlib.util.spec_from_file_location("surveyed_" + Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _timed(fn, inputs, flush, reps: int = 50) -> float:
    import torch

    for _ in range(5):
        fn(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _kernels(fn, inputs, calls: int = 10) -> list[dict]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*inputs)
        torch.cuda.synchronize()
    rows: dict[str, dict] = {}
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        row = rows.setdefault(event.name, {"name": event.name, "class": kernel_class(event.name), "count": 0, "us": 0.0})
        row["count"] += 1
        row["us"] += event.device_time if hasattr(event, "device_time") else event.cuda_time
    out = []
    for row in rows.values():
        out.append({**row, "count": round(row["count"] / calls, 2), "us": round(row["us"] / calls, 2)})
    return sorted(out, key=lambda r: -r["us"])


def survey_one(spec: str, dtype_name: str, mode: str, out: Path) -> dict:
    """Time and profile one model, eager and compiled (runs in its own process)."""
    import torch

    path, *pairs = spec.split(",")
    module = _load(path)
    for pair in pairs:
        key, value = pair.split("=", 1)
        setattr(module, key, type(getattr(module, key))(value))
    dtype = getattr(torch, DTYPES[dtype_name])
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).eval().cuda().to(dtype)
    torch.manual_seed(1)
    inputs = [x.cuda().to(dtype) if torch.is_tensor(x) and x.is_floating_point() else (x.cuda() if torch.is_tensor(x) else x)
              for x in module.get_inputs()]
    flush = torch.empty(256 * 1024**2, dtype=torch.uint8, device="cuda")
    row = {"model": Path(path).stem, "dtype": dtype_name, "mode": mode, "overrides": pairs}
    with torch.no_grad():
        reference = model(*inputs)
        row["eager_ms"] = _timed(model, inputs, flush)
        row["eager_kernels"] = _kernels(model, inputs)
        started = time.time()
        compiled = torch.compile(model, mode=None if mode == "default" else mode)
        got = compiled(*inputs)
        torch.cuda.synchronize()
        row["compile_s"] = round(time.time() - started, 1)
        ref, new = reference.double(), got.double()
        row["compiled_rel_err"] = ((ref - new).norm() / ref.norm().clamp_min(1e-12)).item()
        row["compiled_ms"] = _timed(compiled, inputs, flush)
        row["compiled_kernels"] = _kernels(compiled, inputs)
    return row


def _summary(kernels: list[dict]) -> dict:
    total = sum(k["us"] for k in kernels) or 1.0
    share = {}
    for k in kernels:
        share[k["class"]] = share.get(k["class"], 0.0) + k["us"]
    return {"launches": round(sum(k["count"] for k in kernels), 1), "us": round(total, 1),
            **{f"{c}_share": round(v / total, 2) for c, v in share.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--mode", default="reduce-overhead")
    parser.add_argument("--timeout", type=int, default=240, help="seconds per model, compile included")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child: survey this model, print its JSON
    parser.add_argument("models", nargs="*")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.one:
        print("SURVEY " + json.dumps(survey_one(args.one, args.dtype, args.mode, args.out)), flush=True)
        return
    table = []
    for spec in args.models:
        name = f"{Path(spec.split(',')[0]).stem}-{args.dtype}"
        cache = Path(tempfile.mkdtemp(prefix=f"inductor-{name}-"))
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
               "TORCHINDUCTOR_AUTOGRAD_CACHE": "0", "PYTHONUNBUFFERED": "1"}
        started = time.time()
        try:
            done = subprocess.run([sys.executable, __file__, "--out", str(args.out), "--dtype", args.dtype,
                                   "--mode", args.mode, "--one", spec], env=env, capture_output=True, text=True,
                                  timeout=args.timeout)
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("SURVEY ")]
            row = json.loads(lines[-1][7:]) if lines else {"model": name, "error": done.stderr[-1500:]}
        except subprocess.TimeoutExpired:
            row = {"model": name, "error": f"over {args.timeout} s"}
        row["wall_s"] = round(time.time() - started, 1)
        code = args.out / f"{name}-code"
        code.mkdir(exist_ok=True)
        for number, source in enumerate(sorted(cache.rglob("*.py"))):
            shutil.copy(source, code / f"{number:03d}-{source.name}")
        shutil.rmtree(cache, ignore_errors=True)
        (args.out / f"{name}.json").write_text(json.dumps(row, indent=1))
        table.append(row)
        print(f"done {name} in {row['wall_s']} s {row.get('error', '')[:300]}", flush=True)
    print(f"\n{'model':26s} {'dtype':5s} {'eager':>8s} {'compiled':>8s} {'x':>5s}  eager kernels -> compiled kernels (class shares of GPU time)")
    for row in table:
        if "error" in row:
            print(f"{row['model']:26s} error: {row['error'][:200]}")
            continue
        e, c = _summary(row["eager_kernels"]), _summary(row["compiled_kernels"])
        print(f"{row['model']:26s} {row['dtype']:5s} {row['eager_ms']:8.3f} {row['compiled_ms']:8.3f} "
              f"{row['eager_ms'] / row['compiled_ms']:5.2f}  {e} -> {c}")
        for k in row["compiled_kernels"][:6]:
            print(f"{'':34s}{k['class']:9s} {k['us']:9.1f} us x{k['count']:<5} {k['name'][:90]}")


if __name__ == "__main__":
    main()
