"""GPU check: a stateful forward's ModelNew, loaded from its output folder,
follows eager call after call (issue 14: stateful forwards carried).

For each optimizer output folder given (``python -m lego_core optimize`` of
a model whose forward writes module state: ``bench/models/breadth/stateful_*``),
on the device and dtype it was optimized for: build eager ``Model`` and
``ModelNew`` from the folder's own files with the same weights (seeded
construction, then ``load_state_dict``), move them as a user does
(``.to(device, dtype)``; plain tensor attributes, which ``Module.to``
leaves alone, moved by hand to the device, keeping their dtype), and call
both ``CALLS`` times on fresh inputs.  After every call: the norm-relative
error of ModelNew's output and of every state tensor (buffers, plain tensor
attributes) against eager's, integer state (counters) exactly, and that the
state tensors eager updates in place keep their storage in ModelNew while
those eager reassigns are new tensors in both.  The bound is the dtype's
end-to-end bound (``lego_core.judge.end_to_end.e2e_judge``-style: 1e-4 fp32, 3e-2 bf16/fp16
norm-relative), on every call, so drift of the carried state shows.

Prints one row per folder and call, then ``ok`` / ``FAILED`` per folder; exit
status 1 when any folder failed.  Plain files among the arguments (the
``.search.json`` / ``.search.log`` beside each folder that a glob such as
``OUT/stateful_*`` also matches) are skipped and said so.

Usage: python bench/gpu_checks/check_stateful.py OUT_DIR [OUT_DIR ...]
"""
from __future__ import annotations

import importlib.util
import json
import sys
import uuid
from pathlib import Path

import torch

CALLS = 5
BOUND = {"fp32": 1e-4, "bf16": 3e-2, "fp16": 3e-2}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def load(folder: Path):
    """``folder/optimized_model.py`` imported under a fresh name (it loads its
    reference model, kernels and runtime from its own folder)."""
    spec = importlib.util.spec_from_file_location(f"stateful_{uuid.uuid4().hex[:8]}", folder / "optimized_model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def state_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Buffers and plain tensor attributes, by name (the state a forward may write)."""
    found = {f"buffer {name}": b for name, b in model.named_buffers()}
    for path, module in model.named_modules():
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                found[f"attribute {path + '.' if path else ''}{name}"] = value
    return found


def move(model: torch.nn.Module, device: str, dtype: torch.dtype) -> torch.nn.Module:
    model = model.to(device=device, dtype=dtype)
    for module in model.modules():
        for name, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                setattr(module, name, value.to(device))  # the user's move: device only, dtype kept
    return model


def norm_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    scale = torch.linalg.vector_norm(b).item()
    diff = torch.linalg.vector_norm(a - b).item()
    return diff / scale if scale > 0 else diff


def leaves(value) -> list[torch.Tensor]:
    return [x for x in torch.utils._pytree.tree_leaves(value) if isinstance(x, torch.Tensor)]


def check(folder: Path) -> bool:
    report = json.loads((folder / "report.json").read_text())
    dtype_name, device = report["dtype"], report["device"]
    dtype = DTYPES[dtype_name]
    module = load(folder)
    torch.manual_seed(0)
    eager = module.Model(*module.get_init_inputs()).eval()
    torch.manual_seed(0)
    new = module.ModelNew(*module.get_init_inputs()).eval()
    new.load_state_dict(eager.state_dict())
    eager, new = move(eager, device, dtype), move(new, device, dtype)
    import warnings

    new_before, eager_before = state_of(new), state_of(eager)  # held: no storage is reused while compared
    ok = True
    for call in range(1, CALLS + 1):
        torch.manual_seed(1000 + call)
        inputs = [x.to(device=device, dtype=dtype) if x.is_floating_point() else x.to(device) for x in module.get_inputs()]
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            want = eager(*[x.clone() for x in inputs])
            got = new(*[x.clone() for x in inputs])
        fell_back = [str(w.message)[:160] for w in caught if "LEGO" in str(w.message) or "original forward" in str(w.message)]
        out_err = max(norm_rel(g, w) for g, w in zip(leaves(got), leaves(want)))
        eager_state, new_state = state_of(eager), state_of(new)
        state_err = max((norm_rel(new_state[k], v) for k, v in eager_state.items() if v.is_floating_point()), default=0.0)
        exact = all(torch.equal(new_state[k], v) for k, v in eager_state.items() if not v.is_floating_point())
        # a state tensor eager updates in place keeps its storage in ModelNew; one eager reassigns is new in both
        kept = {k: new_state[k] is new_before.get(k) for k in new_state}
        same_objects = kept == {k: eager_state[k] is eager_before.get(k) for k in eager_state}
        new_before, eager_before = new_state, eager_state
        good = (out_err <= BOUND[dtype_name] and state_err <= BOUND[dtype_name] and exact and same_objects
                and set(new_state) == set(eager_state) and not fell_back)
        ok &= good
        print(f"{folder.name:34} {dtype_name:5} call {call}: output {out_err:.2e} state {state_err:.2e} "
              f"integer state {'equal' if exact else 'DIFFERS'}, in place as eager {'yes' if same_objects else 'NO'}, "
              f"plan ran {'no: ' + fell_back[0] if fell_back else 'yes'}  {'ok' if good else 'FAILED'}")
    return ok


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1])
        return 2
    results = {}
    for folder in map(Path, argv):
        if folder.is_file():  # a shell glob over an --out-dir also matches the runs' .search.json/.log files
            print(f"{folder.name}: skipped, a file and not an optimizer output folder")
            continue
        try:
            results[folder.name] = check(folder)
        except Exception as exc:  # noqa: BLE001 - one folder's failure is a row, not the end of the check
            print(f"{folder.name}: {type(exc).__name__}: {exc}")
            results[folder.name] = False
    for name, good in results.items():
        print(f"{name}: {'ok' if good else 'FAILED'}")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
