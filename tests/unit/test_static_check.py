"""The static check's allowlist and evasion rules (``lego_core.static_check``).

Each snippet is host code added to an honest kernel file: the check must name
what it found; the honest file, and one that uses the allowed helpers
(``math``, ``functools``, ``triton.knobs``), must pass.
"""
import pytest

from lego_core.static_check import ALLOWED_IMPORTS, calls_back_into_reference

HONEST = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def launch(x, out=None):
    y = torch.empty_like(x) if out is None else out[0]
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return [y]
'''
OPS = ("aten.add.Tensor",)


def test_the_honest_file_and_the_allowed_helpers_pass():
    assert calls_back_into_reference(HONEST, OPS) is None
    helpers = "import math\nimport functools\nimport itertools\nfrom typing import Sequence\n\nINTERPRETED = triton.knobs.runtime.interpret\n"
    assert calls_back_into_reference(HONEST + "\n" + helpers, OPS) is None


@pytest.mark.parametrize("snippet, expected", [
    ("import time\n", "imports time"),
    ("import datetime\n", "imports datetime"),
    ("import random\n", "imports random"),
    ("import os\n", "imports os"),
    ("from sys import modules\n", "imports sys"),
    ("import torch.multiprocessing\n", "imports torch.multiprocessing"),
    ("from torch.utils import hooks\n", "imports torch.utils"),
    ("FLAG = torch.sys.modules\n", "uses the attribute .modules"),
    ("FRAME = torch.sys._getframe\n", "uses the attribute ._getframe"),
    ("ENV = torch.os.environ\n", "uses the attribute .environ"),
    ("THREADING = torch.multiprocessing.reductions.threading\n", "uses the attribute .threading"),
    ("D = torch.nn.functional.__dict__\n", "uses the attribute .__dict__"),
    ("G = launch.__globals__\n", "uses the attribute .__globals__"),
    ("S = object.__subclasses__()\n", "uses the attribute .__subclasses__"),
    ("F = vars(torch)\n", "uses vars"),
    ("F = getattr(torch, 'soft' + 'max')\n", "getattr"),
    ("F = getattr(launch, 'x')\n", "uses getattr"),
    ("setattr(launch, 'x', 1)\n", "uses setattr"),
    ("G = globals()\n", "uses globals"),
    ("OPEN = open\n", "uses open"),
    ("cls = torch.nn.Softmax\ncls.forward = None\n", "assigns to torch.nn.Softmax.forward"),
    ("t = torch\nt.softmax = None\n", "assigns to torch.softmax"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None)
def test_evasive_host_code_is_refused(snippet, expected):
    reason = calls_back_into_reference(HONEST + "\n" + snippet, OPS)
    assert reason is not None and expected in reason, reason


def test_the_allowlist_is_small():
    """PyTorch, Triton and pure helpers only: nothing that reads the clock,
    the process, the file system or the call stack."""
    assert {"torch", "triton", "math"} <= ALLOWED_IMPORTS
    assert not ALLOWED_IMPORTS & {"os", "sys", "time", "datetime", "random", "threading", "inspect", "numpy", "importlib", "gc", "ctypes"}
