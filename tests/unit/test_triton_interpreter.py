"""``lego_core.runtime.triton_interpreter.skip_nested_repatching``: under Triton's
interpreter a kernel whose programs call ``@triton.jit`` functions
(``tl.max``, ``tl.sum``, ``tl.sigmoid``, ``tl.cdiv``, a helper of its own, a
helper calling a helper) computes bit for bit what it computes without the
shortcut, ``triton.language`` is left as Triton leaves it after the grid, a
device function that raises still raises, and the programs run faster.
Each variant runs in a fresh interpreter process (the shortcut is process-wide)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import json, sys, time
import torch, triton, triton.language as tl
installed = None
if sys.argv[1] == "on":
    from lego_core.runtime.triton_interpreter import skip_nested_repatching
    installed = skip_nested_repatching()


@triton.jit
def inner(x):
    return tl.sigmoid(x) * 0.5


@triton.jit
def outer(x):
    return inner(x) + x * 2.0


@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=m, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.where(m, tl.exp(x), 0.0)
    y = e / tl.sum(e, axis=0)
    y = outer(y) + tl.cdiv(n, 3)
    tl.store(y_ptr + row * n + offs, y, mask=m)


@triton.jit
def bad_helper(x):
    return tl.load(x)  # a tensor of values, not pointers: the interpreter raises


@triton.jit
def raising(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, bad_helper(x), mask=offs < n)


torch.manual_seed(0)
x = torch.randn(96, 13)
y = torch.empty_like(x)
kernel[(96,)](x, y, 13, BLOCK=16)  # warm-up: the AST rewrite is cached
started = time.perf_counter()
for _ in range(3):
    kernel[(96,)](x, y, 13, BLOCK=16)
seconds = time.perf_counter() - started
# the kernel's own language module is restored; Triton itself leaves tl.core patched
# after a grid whose device functions live in triton.language.standard (which sees
# tl.core): the same with and without the shortcut
restored = {name: tl.core.is_builtin(f) for name, f in (("tl.program_id", tl.program_id), ("tl.load", tl.load),
            ("tl.tensor.__add__", tl.tensor.__add__), ("tl.math.exp", tl.math.exp), ("tl.core.program_id", tl.core.program_id))}
try:
    raising[(1,)](x, 13, BLOCK=16)
    raised = ""
except Exception as exc:
    raised = type(exc).__name__
print(json.dumps({"installed": installed, "y": y.flatten().tolist(), "seconds": seconds, "restored": restored, "raised": raised}))
'''


def run(variant: str) -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, variant], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_nested_device_calls_compute_the_same_restore_the_language_and_run_faster():
    plain, fast = run("off"), run("on")
    assert fast["installed"] is True
    assert fast["y"] == plain["y"]  # bit for bit
    import torch

    x = torch.randn(96, 13, generator=torch.Generator().manual_seed(0))
    s = torch.softmax(x, -1)
    expected = torch.sigmoid(s) * 0.5 + s * 2.0 + 5
    assert torch.allclose(torch.tensor(fast["y"]).view(96, 13), expected, atol=1e-5)
    assert fast["restored"] == plain["restored"]
    assert all(fast["restored"][name] for name in ("tl.program_id", "tl.load", "tl.tensor.__add__", "tl.math.exp"))
    assert plain["raised"] and fast["raised"] == plain["raised"]
    print(f"\n96 programs x 3 launches, 4 device-function calls each: {plain['seconds']:.2f} s without, {fast['seconds']:.2f} s with")
    assert fast["seconds"] < plain["seconds"]


def test_it_is_not_installed_without_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": str(REPO)}
    code = "from lego_core.runtime.triton_interpreter import skip_nested_repatching; print(skip_nested_repatching())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr[-2000:]


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("0", False)])
def test_the_interpreter_switch_is_read_as_triton_reads_it(value, on, monkeypatch):
    from lego_core.runtime import triton_interpreter

    monkeypatch.setenv("TRITON_INTERPRET", value)
    assert triton_interpreter._interpreting() is on
