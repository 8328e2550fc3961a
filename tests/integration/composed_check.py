"""Run in a fresh interpreter with cwd = an output folder of ``lego_core.optimize``.

Imports ``optimized_model.py`` the way a user would, builds the original
``Model`` and ``ModelNew`` with *different* seeds (so only
``load_state_dict`` can make them agree), loads the original's weights into
``ModelNew`` and runs both on inputs drawn under a seed the optimizer never
used.  Prints one JSON line: shapes, errors and whether the two models
disagreed before the weights were loaded.

With ``--trained`` every floating parameter and persistent buffer of the
original is first moved away from its initial value, as training would (a
LayerNorm's weight is no longer all ones, its bias no longer all zeros,
BatchNorm's running statistics no longer zeros and ones): the composed model
must not depend on the weights it was optimized with.

Usage: ``python composed_check.py [SEED] [--trained]`` (default seed 777).
"""
import json
import os
import sys

sys.path.insert(0, os.getcwd())
sys.dont_write_bytecode = True

import torch  # noqa: E402

import optimized_model as om  # noqa: E402


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    seed = int(args[0]) if args else 777
    torch.manual_seed(1)
    ref = om.Model(*om.get_init_inputs()).eval()
    if "--trained" in sys.argv:
        with torch.no_grad():
            for p in ref.parameters():
                if p.is_floating_point():
                    p.mul_(1 + 0.2 * torch.randn_like(p)).add_(0.1 * torch.randn_like(p))
            for name, b in ref.named_buffers():  # running statistics; positive ones stay positive
                if b.is_floating_point() and name in ref.state_dict():
                    b.mul_(0.5 + torch.rand_like(b)).add_(0.1 * torch.randn_like(b).abs())
    torch.manual_seed(2)
    new = om.ModelNew(*om.get_init_inputs()).eval()
    ref_state, new_state = ref.state_dict(), new.state_dict()
    differed = any(
        not torch.equal(ref_state[k], new_state[k]) for k in ref_state if ref_state[k].is_floating_point()
    )
    new.load_state_dict(ref_state)
    torch.manual_seed(seed)
    inputs = om.get_inputs()
    with torch.no_grad():
        expected = ref(*inputs)
        actual = new(*inputs)
    diff = (actual.double() - expected.double()).abs()
    finite = torch.isfinite(expected)
    print(
        json.dumps(
            {
                "weights_differed_before_loading": differed,
                "expected_shape": list(expected.shape),
                "actual_shape": list(actual.shape),
                "dtype": str(actual.dtype),
                "max_abs_error": float(diff[finite].max()) if finite.any() else 0.0,
                "max_abs_expected": float(expected.double().abs()[finite].max()) if finite.any() else 0.0,
                "same_nonfinite": bool(torch.equal(torch.isfinite(actual), finite)),
                "allclose": bool(torch.allclose(actual, expected, rtol=1e-4, atol=1e-5, equal_nan=True)),
                "triton_interpret": os.environ.get("TRITON_INTERPRET"),
                "imports_lego_core": sorted(m for m in sys.modules if m.split(".")[0] == "lego_core"),
            }
        )
    )


if __name__ == "__main__":
    main()
