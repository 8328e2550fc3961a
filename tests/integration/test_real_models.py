"""Real library models, optimized as their users write them (issue 24).

Each model file wraps a library model the way its users build one (a
Hugging Face ``transformers`` model from its config, a ``torchvision`` or
``timm`` model with ``weights=None``), in KernelBench format.  Each is
optimized through the command line, as a user runs it (a child process,
jailed where bubblewrap works), at its tiny sizes; then, in a fresh Python
process, the output folder copied elsewhere is imported as a user imports it
and ``ModelNew`` is compared with ``Model`` over three calls on fresh inputs,
with every LEGO warning an error (a plan that falls back to the original
forward fails), counting the Triton kernels that ran.

On the CPU: Hugging Face GPT-2 (SDPA attention followed by a ``view``),
Llama with grouped-query attention, BERT (integer ``input_ids`` and an
``attention_mask`` input), ViT; and hand-written ResNet-18,
MobileNetV3-small, EfficientNet-B0 and ConvNeXt that use the same ``nn``
modules and forward code as torchvision and timm, whose PyPI builds need a
CUDA build of torch (their own cases run on the GPU machine, ``-m gpu``).
The models are ``bench/models/real/`` (``make bench-real`` runs them at
realistic sizes) and ``tests/models_real/``.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "bench" / "models" / "real"
OWN = REPO / "tests" / "models_real"
TINY = json.loads((REAL / "tiny.json").read_text())

CPU_MODELS = ["hf_gpt2", "hf_llama", "hf_bert", "hf_vit",
              "handwritten_resnet18", "handwritten_mobilenet_v3_small", "handwritten_efficientnet_b0", "handwritten_convnext"]
# (file, library it needs): the GPU machine has torchvision and timm
GPU_MODELS = [(OWN / "tv_resnet18.py", "torchvision"), (OWN / "tv_mobilenet_v3_small.py", "torchvision"),
              (REAL / "tv_efficientnet_b0.py", "torchvision"), (REAL / "timm_convnext_tiny.py", "timm")]
SEARCH_S = "5"  # a short search: these tests prove the path, the bench measures the speed

pytestmark = pytest.mark.slow


def env() -> dict:
    return dict(os.environ, TRITON_INTERPRET="1" if os.environ.get("TRITON_INTERPRET") == "1" else "0", COLUMNS="200",
                PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")


def optimize_cli(model: Path, out: Path, device: str, dtype: str, search_s: str = SEARCH_S) -> dict:
    """``python -m lego_core optimize`` on ``model`` at its tiny sizes (``search_s`` of tree search); the report."""
    overrides = TINY.get(model.name, {})
    args = [a for k, v in overrides.items() for a in ("--set", f"{k}={v}")]
    proc = subprocess.run(
        [sys.executable, "-m", "lego_core", "optimize", str(model), *args, "--device", device, "--dtype", dtype,
         "--out", str(out), "--max-search-time", search_s, "--no-cache"],
        cwd=REPO, env=env(), capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads((out / "report.json").read_text())


# In a fresh process whose only view of LEGO is the output folder: import it as a user does, three
# calls on fresh inputs against Model, every LEGO warning an error, Triton launches counted.
AS_A_USER = textwrap.dedent('''
    import json, sys, warnings
    warnings.filterwarnings("error", message="LEGO")  # a fallback to the original forward fails the check
    import torch
    device, dtype = sys.argv[1], getattr(torch, sys.argv[2])
    launches = []
    if device == "cpu":
        from triton.runtime import interpreter
        run = interpreter.GridExecutor.__call__
        interpreter.GridExecutor.__call__ = lambda self, *a, **k: (launches.append(1), run(self, *a, **k))[1]
    else:
        from triton.runtime import jit
        run = jit.JITFunction.run
        jit.JITFunction.run = lambda self, *a, **k: (launches.append(0 if k.get("warmup") else 1), run(self, *a, **k))[1]
    from optimized_model import Model, ModelNew, get_init_inputs, get_inputs
    torch.manual_seed(0)
    model = Model(*get_init_inputs()).eval().to(device, dtype)
    new = ModelNew(*get_init_inputs()).to(device, dtype)
    new.load_state_dict(model.state_dict())
    errors, ran = [], []
    for call in range(3):
        torch.manual_seed(1000 + call)  # inputs the optimizer never saw
        inputs = [x.to(device, dtype) if x.is_floating_point() else x.to(device) for x in get_inputs()]
        with torch.no_grad():
            want, got = model(*inputs), new(*inputs)
        leaves = [(g, w) for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want))]
        assert len(leaves) == len(torch.utils._pytree.tree_leaves(want))
        errors.append(max(((g.double() - w.double()).norm() / w.double().norm().clamp_min(1e-12)).item() for g, w in leaves))
        ran.append(new.lego_last_forward)
    print(json.dumps({"errors": errors, "ran": ran, "launches": sum(launches)}))
''')


def check_as_a_user(out: Path, where: Path, device: str, dtype: str) -> dict:
    """Copy ``out`` to ``where`` and run :data:`AS_A_USER` there; its JSON."""
    shutil.copytree(out, where)
    proc = subprocess.run([sys.executable, "-c", AS_A_USER, device, {"fp32": "float32", "bf16": "bfloat16"}[dtype]],
                          cwd=where, env=env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_delivered_and_runs_its_plan(model: Path, tmp_path: Path, device: str, dtype: str, bound: float, triton: bool = True) -> None:
    """Optimized, verified, and ModelNew runs what ``LAUNCH`` says (the plan on a CPU; on a GPU the measured
    fastest of plan and original forward), matching Model within ``bound``; ``triton``: kernels must ship."""
    report = optimize_cli(model, tmp_path / "out", device, dtype)
    check = report["end_to_end"]
    assert check["passed"], check
    assert check["forward"]["ran"] == check["forward"]["requested"], check["forward"]  # what was judged is what ships
    plan_check = check.get("plan_check", check)  # the plan itself, before the launch was chosen
    assert plan_check["forward"]["ran"] == "plan", plan_check["forward"]  # the judge tested the plan, not the user's forward
    if triton:
        assert report["summary"]["triton"] >= 1, report["summary"]
    used = check_as_a_user(tmp_path / "out", tmp_path / "shipped", device, dtype)
    launch = report["launch"]["forward"]
    assert used["ran"] == [launch] * 3, used
    if launch == "plan" and report["summary"]["triton"]:
        assert used["launches"] >= 3, used  # its Triton kernels ran, every call
    assert max(used["errors"]) <= bound, used


DELIVERED: dict[str, Path] = {}  # a CPU model's output folder, for the hostile-kernel tests below


@pytest.mark.parametrize("name", CPU_MODELS)
def test_a_real_library_model_optimizes_and_modelnew_runs_its_plan_on_the_cpu(name, tmp_path):
    assert_delivered_and_runs_its_plan(REAL / f"{name}.py", tmp_path, "cpu", "fp32", bound=1e-4)
    DELIVERED[name] = tmp_path / "out"


# one line added to a generated kernel file per kind the composed model's import guard refuses
HOSTILE = {
    "writes files": ("open(__file__ + '.log', 'w').write('x')", "importing it wrote files"),
    "starts a process": ("__import__('subprocess').run(['true'])", "importing it started a process or loaded a library"),
    "loads a library": ("__import__('ctypes').CDLL(None)", "importing it started a process or loaded a library"),
    "patches torch": ("import torch\ntorch.nn.functional.gelu = lambda *a, **k: None", "importing it replaced torch.nn.functional.gelu"),
}


@pytest.fixture(scope="module")
def gpt2_output(tmp_path_factory) -> Path:
    """The CPU GPT-2 output folder (from the test above when it ran in this process, else optimized here)."""
    if "hf_gpt2" in DELIVERED and list((DELIVERED["hf_gpt2"] / "kernels").glob("*.py")):
        return DELIVERED["hf_gpt2"]
    out = tmp_path_factory.mktemp("gpt2") / "out"
    report = optimize_cli(REAL / "hf_gpt2.py", out, "cpu", "fp32", search_s="15")  # a plan with kernels to tamper with
    assert report["summary"]["triton"] >= 1 and list((out / "kernels").glob("*.py")), report["summary"]
    return out


def test_a_generated_kernel_that_misbehaves_at_import_is_refused_beside_transformers(gpt2_output, tmp_path):
    """GPT-2's own import (transformers: temporary folders, a library loaded) is not held against the generated
    files, but a kernel file of the same folder that writes, starts a process, loads a library or patches torch
    at import is refused by the judge's import (lego_core.judge.end_to_end.shipped), naming the file: one copy of the folder per
    kind, each imported in a fresh process (one process per kind would import torch and transformers four times)."""
    folders = {}
    for k, kind in enumerate(sorted(HOSTILE)):
        folder = tmp_path / f"shipped{k}"
        shutil.copytree(gpt2_output, folder)
        kernel = sorted((folder / "kernels").glob("*.py"))[0]
        kernel.write_text(kernel.read_text() + "\n" + HOSTILE[kind][0] + "\n")
        folders[kind] = (folder, kernel.name)
    code = textwrap.dedent("""
        import json, subprocess, sys
        kinds = json.loads(sys.argv[1])
        code = ("from lego_core.judge.end_to_end.shipped import import_optimized_model\\n"
                "try:\\n    import_optimized_model(sys.argv[1])\\nexcept ImportError as exc:\\n    print('refused:', exc)\\n"
                "else:\\n    print('imported')\\n")
        # a fork server that imported torch and transformers once, a fresh child per kind
        import multiprocessing as mp, io, contextlib
        def one(folder, queue):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                sys.argv = ["-", folder]
                exec(code, {"sys": sys})
            queue.put(out.getvalue())
        if __name__ == "__main__":
            import torch, transformers  # noqa: F401  (imported before the fork: each child starts warm)
            ctx = mp.get_context("fork")
            answers = {}
            for kind, folder in kinds.items():
                queue = ctx.Queue()
                proc = ctx.Process(target=one, args=(folder, queue))
                proc.start()
                answers[kind] = queue.get(timeout=240)
                proc.join(60)
            print(json.dumps(answers))
    """)
    proc = subprocess.run([sys.executable, "-c", code, json.dumps({k: str(f) for k, (f, _) in folders.items()})],
                          cwd=REPO, env=env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    answers = json.loads(proc.stdout.strip().splitlines()[-1])
    for kind, (line, message) in HOSTILE.items():
        said = answers[kind]
        assert said.startswith("refused:") and message in said and folders[kind][1] in said, (kind, said)


@pytest.mark.gpu
@pytest.mark.parametrize("model, library", GPU_MODELS, ids=[m.stem for m, _ in GPU_MODELS])
@pytest.mark.parametrize("dtype, bound", [("bf16", 2e-2), ("fp32", 5e-3)])  # fp32: cuDNN's TF32 convolutions
def test_a_torchvision_or_timm_model_optimizes_and_runs_its_plan_on_the_gpu(model, library, dtype, bound, tmp_path):
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed")
    assert_delivered_and_runs_its_plan(model, tmp_path, "cuda", dtype, bound, triton=False)
