"""GPU check: generated kernels propagate NaN/inf as eager does, and bf16 rounds as eager (issue 10).

On the GPU, ``tl.maximum``/``tl.minimum`` drop NaN unless asked to propagate
it (maxnumf) and ``tl.max`` skips it; the CPU interpreter hides the first.
For each case a small model is optimized on the GPU (``lego_core.optimize``,
device cuda), then ModelNew and the eager model are called on fresh random
inputs with NaN, +inf and -inf planted in a few positions: the outputs must
agree in NaN/inf positions and values (``equal_nan``).  The bf16 case also
compares both against a float64 run of the same model (L2 error and mean
bias).  Each case is timed with ``lego_core.runtime.timing.time_gpu`` (ModelNew vs
eager, median ms).  The table is last.

Usage: python bench/gpu_checks/check_nan.py
"""
from __future__ import annotations

import sys
import tempfile
import textwrap
import traceback
import uuid
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lego_core import ProblemSpec, optimize  # noqa: E402
from lego_core.config import OptimizeConfig  # noqa: E402
from lego_core.runtime.timing import time_gpu  # noqa: E402
from lego_core.judge.inputs import load_module  # noqa: E402

NAN, INF = float("nan"), float("inf")
# (name, init, forward, input shape, dtype)
CASES = [
    ("relu/clamp/maximum", "pass", "torch.maximum(F.relu(x), x.clamp(-0.5, 0.5)) + F.hardtanh(x)", "64, 1024", "fp32"),
    ("x - amax", "pass", "x - x.amax(dim=-1, keepdim=True)", "512, 1000", "fp32"),
    ("absmax scale + amin", "pass", "x / x.abs().amax(dim=-1, keepdim=True) + x.amin(dim=-1, keepdim=True)", "512, 1000", "fp32"),
    ("softmax/log_softmax", "pass", "torch.softmax(x, -1) + torch.log_softmax(x, -1)", "512, 1000", "fp32"),
    ("logsumexp", "pass", "torch.logsumexp(x, -1, keepdim=True) - x", "512, 1000", "fp32"),
    ("layer_norm + rms", "self.ln = nn.LayerNorm(1024)", "self.ln(x) * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)", "256, 1024", "fp32"),
    ("linear + relu epilogue", "self.fc = nn.Linear(512, 512)", "F.relu(self.fc(x)).clamp_max(1.0)", "256, 512", "fp32"),
    ("causal sdpa", "self.qkv = nn.Linear(64, 192)", "F.scaled_dot_product_attention(*self.qkv(x).view(4, 128, 3, 4, 16).permute(2, 0, 3, 1, 4), is_causal=True)", "4, 128, 64", "fp32"),
    ("bf16 layernorm chain", "self.ln = nn.ModuleList(nn.LayerNorm(1024) for _ in range(3))",
     "(x := x + self.ln[0](x)) is None or (x := x + self.ln[1](x)) is None or x + self.ln[2](x)", "256, 1024", "bf16"),
]


def model_file(folder: Path, init: str, forward: str, shape: str) -> Path:
    path = folder / f"m_{uuid.uuid4().hex[:6]}.py"
    path.write_text(textwrap.dedent(f"""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                {init}

            def forward(self, x):
                return {forward}


        def get_inputs():
            return [torch.randn({shape})]


        def get_init_inputs():
            return []
        """))
    return path


def load(folder: Path):
    return load_module(folder / "optimized_model.py", f"opt_{uuid.uuid4().hex[:8]}")


def plant(x: torch.Tensor, seed: int) -> torch.Tensor:
    """``x`` with NaN, +inf and -inf at random positions (a few of each)."""
    gen = torch.Generator().manual_seed(seed)
    y = x.clone().view(-1)
    pos = torch.randperm(y.numel(), generator=gen)[:9].to(y.device)
    y[pos[:3]], y[pos[3:6]], y[pos[6:]] = NAN, INF, -INF
    return y.view_as(x)


def run_case(name, init, forward, shape, dtype_name, work: Path) -> dict:
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    out = work / name.replace(" ", "_").replace("/", "_")
    report = optimize(ProblemSpec(str(model_file(work, init, forward, shape)), {}, dtype=dtype_name, device="cuda"), str(out), OptimizeConfig(cache=False))
    module = load(out)
    torch.manual_seed(0)
    model = module.Model().eval().cuda()
    for p in model.parameters():  # weights that are not ones and zeros
        p.data.normal_(0.5 if p.dim() == 1 else 0.0, 0.3)
    model = model.to(dtype)
    new = module.ModelNew().cuda().to(dtype)
    new.load_state_dict(model.state_dict())
    row = {"case": name, "triton": report["summary"]["triton"], "e2e": report["summary"]["e2e_passed"]}
    dims = [int(s) for s in shape.split(",")]
    with torch.no_grad():
        ok = True
        for seed in (1, 2, 3):
            x = torch.randn(*dims, device="cuda", generator=torch.Generator("cuda").manual_seed(seed)).to(dtype)
            x = plant(x, seed)
            e, g = model(x), new(x)
            same_nan = torch.equal(torch.isnan(e), torch.isnan(g))
            same_inf = torch.equal(torch.isinf(e), torch.isinf(g)) and torch.equal(e[torch.isinf(e)], g[torch.isinf(e)])
            fin = torch.isfinite(e) & torch.isfinite(g)
            close = torch.allclose(e[fin].float(), g[fin].float(), atol=2e-2 if dtype == torch.bfloat16 else 1e-4, rtol=2e-2 if dtype == torch.bfloat16 else 1e-4)
            ok = ok and same_nan and same_inf and close
        row["nan_inf_match"] = ok
        x = torch.randn(*dims, device="cuda") * 2 + 0.5
        if dtype == torch.bfloat16:
            exact = model.double()(x.double())
            model.to(dtype)
            eager, got = model(x.to(dtype)).double(), new(x.to(dtype)).double()
            row["err_ratio"] = float((got - exact).norm() / (eager - exact).norm())
            row["bias_new"], row["bias_eager"] = float((got - exact).mean()), float((eager - exact).mean())
        xs = [[torch.randn(*dims, device="cuda").to(dtype)] for _ in range(4)]
        row["eager_ms"] = time_gpu(lambda v: model(*v), xs).median_ms
        row["lego_ms"] = time_gpu(lambda v: new(*v), xs).median_ms
    return row


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            try:
                rows.append(run_case(*case, Path(tmp)))
            except Exception:  # noqa: BLE001 - one failing case must not hide the others
                traceback.print_exc()
                rows.append({"case": case[0], "error": True})
    print(f"\n{'case':24} {'triton':>6} {'e2e':>5} {'NaN/inf ok':>10} {'err ratio':>9} {'bias new':>10} {'bias eager':>10} {'eager ms':>9} {'lego ms':>8}")
    for r in rows:
        if r.get("error"):
            print(f"{r['case']:24} ERROR (traceback above)")
            continue
        ratio = f"{r['err_ratio']:.3f}" if "err_ratio" in r else "-"
        bias_n = f"{r['bias_new']:.2e}" if "bias_new" in r else "-"
        bias_e = f"{r['bias_eager']:.2e}" if "bias_eager" in r else "-"
        print(f"{r['case']:24} {r['triton']:>6} {str(r['e2e']):>5} {str(r['nan_inf_match']):>10} {ratio:>9} {bias_n:>10} {bias_e:>10} {r['eager_ms']:>9.4f} {r['lego_ms']:>8.4f}")


if __name__ == "__main__":
    main()
