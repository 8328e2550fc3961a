"""GPU check: candidates that fake their timing or hide TF32 are caught (issue 10, section 1).

Runs the GPU half of the adversarial corpus (``tests/hacks/corpus.py``,
``GPU_HACKS``) next to honest kernels for the same sub-problems, on an
add+ReLU of two 4096 x 4096 fp32 inputs (large enough that the memory
roofline floor is tens of microseconds) and a 512 x 512 Linear + ReLU:

* verification through the search (``CandidateJudge.judge`` on CUDA: call trace,
  streams, TF32 in the compiled kernel's TTIR);
* the time the search measured before the timing guard
  (``costing.measure_ms`` of ``launch(*xs)``), and the guarded time
  (``timing_guard.guarded_measure_ms``: fresh inputs, poisoned outputs and
  a launch count after timing, the roofline floor).

Prints one row per kernel: name, verification verdict, unguarded ms, guarded
ms, roofline floor ms, timing verdict, reason.  Exit status 1 when a hack got
through or an honest kernel was rejected.

Usage: python bench/gpu_checks/check_hacks.py
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

# compiled Triton kernels: the corpus's support module defaults to the
# interpreter (for the CPU suite), which would time Python, not the GPU
os.environ["TRITON_INTERPRET"] = "0"

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "hacks"))

import torch  # noqa: E402

from corpus import CONTROLS, GPU_HACKS  # noqa: E402
from gpu_hacks import time_on_gpu, time_unguarded, verify_on_gpu  # noqa: E402

BIG = {
    "add_relu": "[torch.randn(4096, 4096), torch.randn(4096, 4096)]",
    "linear_relu": None,  # the model's own 16 x 64 input: TF32 is about verification, not time
}


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    rows, bad = [], 0
    honest = [c for c in CONTROLS if c.name in ("add_relu_honest", "linear_relu_honest")]
    with tempfile.TemporaryDirectory(prefix="lego-check-hacks-") as tmp:
        folder = Path(tmp)
        for entry in [*GPU_HACKS, *honest]:
            is_hack = entry in GPU_HACKS
            inputs = BIG.get(entry.case)
            reason = verify_on_gpu(entry, folder, inputs)
            verified = "rejected" if reason else "accepted"
            raw = guarded = None
            if not reason or entry.name == "memo_when_timed" or entry.name == "private_stream":
                raw = time_unguarded(entry.source, entry.case, folder, inputs)
                guarded = time_on_gpu(entry.source, entry.case, folder, inputs)
            timing_reason = guarded.reason if guarded else ""
            caught = bool(reason) or bool(timing_reason)
            if caught != is_hack:
                bad += 1
            rows.append((
                entry.name, "hack" if is_hack else "honest", verified,
                f"{raw:.4f}" if raw is not None else "-",
                f"{guarded.ms:.4f}" if guarded else "-",
                f"{guarded.floor_ms:.4f}" if guarded else "-",
                ("rejected" if timing_reason else "believed") if guarded else "-",
                (reason or timing_reason or "")[:150],
            ))
    header = ("kernel", "kind", "verification", "unguarded ms", "guarded ms", "floor ms", "timing", "reason")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for r in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)) + "  " + str(r[-1]))
    print("OK: every hack caught, every honest kernel accepted" if not bad else f"FAILED: {bad} kernel(s) judged wrongly")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
