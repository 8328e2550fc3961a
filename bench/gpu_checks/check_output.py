"""GPU check of issue 10's overrides-follow and atomic-output fixes (run on a CUDA machine).

1. A model whose input shape and hidden width are built from overridden
   constants (``input_shape = (batch_size, d_model)``, ``hidden = 4 *
   d_model``) is optimized on the GPU with ``batch_size=2, d_model=64``
   (``lego_core.optimize``, the sandboxed child, launch chosen by
   measurement in the staging folder).  The shipped ``ModelNew`` is imported
   from the committed folder, given the original weights and compared with
   the original model in fp64 on fresh random inputs of the overridden shape
   (norm-relative error, ModelNew's no more than 2x eager's own + 1e-6), its
   ``LAUNCH`` line must equal report.json's ``launch``, then eager and
   ModelNew are timed with ``lego_core.runtime.timing.time_gpu`` (CUDA events, L2
   flushed, median).
2. A run that fails its end-to-end check into the same folder must leave
   every file as it was and write ``FAILED.json``; no staging folder stays.

Usage: python bench/gpu_checks/check_output.py [--dtype fp32|bf16|both]
The table is printed last; exit status 1 if any check failed.
"""
from __future__ import annotations

import uuid
import argparse
import json
import sys
import tempfile
import textwrap
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lego_core import OptimizeConfig, OptimizeError, ProblemSpec, optimize  # noqa: E402
from lego_core.runtime.timing import time_gpu  # noqa: E402
from lego_core.judge.inputs import load_module  # noqa: E402

MODEL = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    batch_size = 16
    d_model = 256
    hidden = 4 * d_model
    input_shape = (batch_size, d_model)


    class Model(nn.Module):
        width = d_model

        def __init__(self, d_hidden=hidden):
            super().__init__()
            self.up = nn.Linear(self.width, d_hidden)
            self.down = nn.Linear(d_hidden, self.width)
            self.norm = nn.LayerNorm(self.width)
            {extra}

        def forward(self, x):
            return self.norm(x + self.down(torch.relu(self.up(x)))){tail}


    def get_inputs():
        return [torch.randn(*input_shape)]


    def get_init_inputs():
        return []
""")
GOOD = MODEL.replace("{extra}", "").replace("{tail}", "")
MISMATCH = MODEL.replace(
    "{extra}", "self.register_buffer('shift', torch.full((d_model,), 2.0 if type(self).__name__ == 'ModelNew' else 1.0), persistent=False)"
).replace("{tail}", " + self.shift")


def import_file(path: Path):
    return load_module(path, f"check_output_{uuid.uuid4().hex[:8]}")


def norm_rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return (torch.linalg.vector_norm(a.double() - ref) / torch.linalg.vector_norm(ref)).item()


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def check(dtype: str, root: Path) -> dict:
    row = {"dtype": dtype}
    model_path = root / f"ffn_{dtype}.py"
    model_path.write_text(GOOD)
    out = root / f"out_{dtype}"
    overrides = {"batch_size": 2, "d_model": 64}
    report = optimize(ProblemSpec(str(model_path), overrides, dtype, "cuda"), out, OptimizeConfig(cache=False))
    row["e2e"] = report["end_to_end"]["passed"]
    shipped = import_file(out / "optimized_model.py")
    launch_ok = f"'forward': '{report['launch']['forward']}'" in (out / "optimized_model.py").read_text()
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    torch.manual_seed(0)
    ref = shipped.Model(*shipped.get_init_inputs()).cuda().to(torch_dtype).eval()
    new = shipped.ModelNew(*shipped.get_init_inputs()).cuda().to(torch_dtype)
    new.load_state_dict(ref.state_dict())
    ref64 = shipped.Model(*shipped.get_init_inputs()).cuda().double().eval()
    ref64.load_state_dict({k: v.double() for k, v in ref.state_dict().items()})
    torch.manual_seed(1234)  # fresh inputs, none the run saw
    sets = [[x.cuda().to(torch_dtype) for x in shipped.get_inputs()] for _ in range(3)]
    shape_ok = tuple(sets[0][0].shape) == (2, 64) and ref.up.weight.shape == (256, 64)
    errs_new, errs_eager = [], []
    with torch.no_grad():
        for xs in sets:
            truth = ref64(*[x.double() for x in xs])
            errs_new.append(norm_rel(new(*xs), truth))
            errs_eager.append(norm_rel(ref(*xs), truth))
        row["err_new"], row["err_eager"] = max(errs_new), max(errs_eager)
        row["eager_ms"] = time_gpu(lambda xs: ref(*xs), sets).median_ms
        row["new_ms"] = time_gpu(lambda xs: new(*xs), sets).median_ms
    row["shapes_follow"] = shape_ok
    row["launch_line"] = launch_ok
    row["accurate"] = row["err_new"] <= 2 * row["err_eager"] + 1e-6

    before = snapshot(out)
    model_path.write_text(MISMATCH)
    try:
        optimize(ProblemSpec(str(model_path), overrides, dtype, "cuda"), out, OptimizeConfig(cache=False))
        row["failed_run_kept_out"] = False
    except OptimizeError:
        after = snapshot(out)
        failed = json.loads(after.pop("FAILED.json", b"null"))
        after.pop(".lego_output.json", None)
        before.pop(".lego_output.json", None)
        row["failed_run_kept_out"] = (
            after == before and failed is not None and failed["output_from_run"] == report["run_id"]
            and not [p for p in root.iterdir() if ".lego-" in p.name]
        )
    row["ok"] = all(row[k] for k in ("e2e", "shapes_follow", "launch_line", "accurate", "failed_run_kept_out"))
    return row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", choices=("fp32", "bf16", "both"), default="both")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="lego-check-output-") as tmp:
        for dtype in (("fp32", "bf16") if args.dtype == "both" else (args.dtype,)):
            try:
                rows.append(check(dtype, Path(tmp)))
            except Exception as exc:  # noqa: BLE001 - report and go on
                rows.append({"dtype": dtype, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:200]})
    print(f"{'dtype':6} {'ok':5} {'e2e':5} {'shapes':6} {'launch':6} {'err new':>9} {'err eager':>9} {'eager ms':>9} {'new ms':>9} {'failed run kept out':>20}")
    for r in rows:
        if "error" in r:
            print(f"{r['dtype']:6} {'NO':5} {r['error']}")
            continue
        print(f"{r['dtype']:6} {'yes' if r['ok'] else 'NO':5} {str(r['e2e']):5} {str(r['shapes_follow']):6} {str(r['launch_line']):6} "
              f"{r['err_new']:9.2e} {r['err_eager']:9.2e} {r['eager_ms']:9.4f} {r['new_ms']:9.4f} {str(r['failed_run_kept_out']):>20}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
