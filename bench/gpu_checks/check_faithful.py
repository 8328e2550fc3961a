"""GPU check of the faithfulness checks at capture (issue 10, section 2).

``lego_core.load.faithful_capture.check_fast_paths`` must refuse exactly the
attention fast paths that compute other values than the ordinary path LEGO
captures, on the GPU and in bf16 too (the fused kernels round differently,
which must not count).  For each case, on fresh random inputs: the user's
eager (fast path on) and the ordinary path (fast path off) against an fp64
run of the ordinary path on the CPU, the check's decision, and the time of
both paths (``lego_core.runtime.timing.time_gpu``: what turning the fast path off,
the suggested fix, costs).  Exit 1 when a decision is wrong.

Usage: ``PYTHONPATH=. python bench/gpu_checks/check_faithful.py``
"""
from __future__ import annotations

import copy
import sys

import torch
import torch.nn as nn

from lego_core.load.faithful_capture import check_fast_paths
from lego_core.load.spec import ProblemError
from lego_core.runtime.timing import time_gpu

D, HEADS, FF, SEQ, BATCH = 256, 8, 1024, 128, 8


class Encoder(nn.Module):
    def __init__(self, nested: bool):
        super().__init__()
        layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True)
        self.net = nn.TransformerEncoder(layer, 4, enable_nested_tensor=nested)

    def forward(self, x, mask):
        return self.net(x, src_key_padding_mask=mask)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)

    def forward(self, x, mask):
        return self.attn(x, x, x, key_padding_mask=mask, need_weights=False)[0]


def mask(padded: int, full_row: bool, device) -> torch.Tensor:
    m = torch.zeros(BATCH, SEQ, dtype=torch.bool, device=device)
    if padded:
        m[:, SEQ - padded:] = True
    if full_row:
        m[0] = True
    return m


# name, model factory, padded positions per row, a fully masked row.  The
# check must refuse exactly where the fast and ordinary paths differ grossly
# (a NaN pattern, or an element off by more than GROSS): on the CPU the
# nested-tensor and full-row cases.
CASES = [
    ("encoder nested, no padding", lambda: Encoder(True), 0, False),
    ("encoder nested, 16 padded", lambda: Encoder(True), 16, False),
    ("encoder no nested, 16 padded", lambda: Encoder(False), 16, False),
    ("encoder no nested, full row", lambda: Encoder(False), 16, True),
    ("mha, 16 padded", Attention, 16, False),
    ("mha, full row", Attention, 16, True),
]
GROSS = 0.25


def main() -> int:
    cpu = "--cpu" in sys.argv  # a smoke run of the decisions without a GPU (no timing)
    if not cpu and not torch.cuda.is_available():
        print("needs a CUDA GPU (or --cpu for a smoke run)")
        return 2
    device = torch.device("cpu" if cpu else "cuda")
    rows, wrong = [], 0
    for dtype in (torch.float32, torch.bfloat16):
        for name, make, padded, full_row in CASES:
            torch.manual_seed(0)
            model = make().eval()
            model64 = copy.deepcopy(model).double()
            model = model.to(device=device, dtype=dtype)
            m = mask(padded, full_row, device)
            x = torch.randn(BATCH, SEQ, D, device=device, dtype=dtype, generator=torch.Generator(device.type).manual_seed(7))
            try:
                check_fast_paths(model, [x, m], dtype)
                refused = False
            except ProblemError:
                refused = True
            with torch.no_grad():
                fast = model(x, m).float()
                torch.backends.mha.set_fastpath_enabled(False)
                slow = model(x, m).float()
                truth = model64(x.double().cpu(), m.cpu())
                t_slow = float("nan") if cpu else time_gpu(lambda xs: model(*xs), [[x, m]]).median_ms
                torch.backends.mha.set_fastpath_enabled(True)
                t_fast = float("nan") if cpu else time_gpu(lambda xs: model(*xs), [[x, m]]).median_ms

            def err(a):
                a = a.double().cpu()
                ok = torch.isfinite(a) & torch.isfinite(truth)
                nan_mismatch = int((torch.isnan(a) != torch.isnan(truth)).sum())
                return (a[ok] - truth[ok]).abs().max().item() if ok.any() else float("nan"), nan_mismatch

            (e_fast, n_fast), (e_slow, n_slow) = err(fast), err(slow)
            both = torch.isfinite(fast) & torch.isfinite(slow)
            refuse = bool((torch.isnan(fast) != torch.isnan(slow)).any()) or bool(((fast - slow).abs()[both] > GROSS).any())
            wrong += refused != refuse
            rows.append((str(dtype).removeprefix("torch."), name, f"{e_fast:.2e}/{n_fast}", f"{e_slow:.2e}/{n_slow}",
                         "refused" if refused else "accepted", "ok" if refused == refuse else "WRONG", f"{t_fast:.3f}", f"{t_slow:.3f}"))
    header = ("dtype", "case", "fast err/NaN-diff", "ordinary err/NaN-diff", "check", "decision", "fast ms", "ordinary ms")
    widths = [max(len(str(r[k])) for r in rows + [header]) for k in range(len(header))]
    print("errors: max abs against fp64 of the ordinary path on finite elements / count of NaN-pattern differences")
    for r in [header] + rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
