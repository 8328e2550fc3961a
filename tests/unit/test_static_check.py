"""The static check's allowlist and evasion rules (``lego_core.judge.static_check``).

Each snippet is host code added to an honest kernel file: the check must name
what it found; the honest file, and one that uses the allowed helpers
(``math``, ``triton.knobs``), must pass.  ``functools``, ``itertools`` and
``typing``, which the import denylist lets through, are refused by the
allow-list every candidate passes (``lego_core.judge.host_allowlist``; its own
tests are in ``test_kernel_allowlist.py``).
"""
import pytest

from lego_core.judge.static_check import ALLOWED_IMPORTS, calls_back_into_reference, unsafe_host_code

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
    helpers = "import math\n\nINTERPRETED = triton.knobs.runtime.interpret\nSCALE = math.sqrt(2.0)\n"
    assert calls_back_into_reference(HONEST + "\n" + helpers, OPS) is None
    for helper in ("import functools\n", "import itertools\n", "from typing import Sequence\n"):
        reason = calls_back_into_reference(HONEST + "\n" + helper, OPS)
        assert reason is not None and "a kernel file imports only torch, triton, triton.language as tl and math" in reason, reason


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


# --- routes that load or evaluate code no static check reads (attacker review of 2026-12-01)

ROUTES = [
    ("import typing\n\ndef f(x: \"__import__('os').system('id')\"):\n    pass\n\nH = typing.get_type_hints(f)\n", "string annotation"),
    ("from typing import get_type_hints\nH = get_type_hints(launch)\n", "typing.get_type_hints"),
    ("import typing\nH = typing.get_type_hints(launch)\n", "typing.get_type_hints"),
    ("import typing\nR = typing.ForwardRef('x')\n", "typing.ForwardRef"),
    ("import functools\nD = functools.singledispatch(launch)\n", "functools.singledispatch"),
    ("M = torch.hub.load('someone/repo', 'model')\n", "torch.hub"),
    ("E = torch.utils.cpp_extension.load_inline('x', 'int f() { return 0; }')\n", "torch.utils"),
    ("W = torch.load('w.pt', weights_only=False)\n", "torch.load"),
    ("from torch import load\nW = load('w.pt', weights_only=False)\n", "torch.load"),
    ("torch.ops.load_library('/tmp/x.so')\n", "torch.ops.load_library"),
    ("L = torch.library.Library('x', 'DEF')\n", "torch.library"),
    # files written or mapped from C++, where the call trace's audit hook sees no open() (a fresh-user trial, 2026-12-03)
    ("torch.save(torch.zeros(1), '/tmp/pwned.pt')\n", "torch.save"),
    ("from torch import save\nsave(torch.zeros(1), '/tmp/pwned.pt')\n", "torch.save"),
    ("S = torch.UntypedStorage.from_file('/tmp/x', True, 16)\n", "torch.UntypedStorage"),
    ("T = torch.from_file('/tmp/x', True, 16)\n", "torch.from_file"),
]


@pytest.mark.sandbox
@pytest.mark.parametrize("snippet, expected", ROUTES, ids=[
    "string-annotation", "from-typing-get-type-hints", "typing-get-type-hints", "forward-ref", "singledispatch",
    "torch-hub", "cpp-extension", "torch-load", "from-torch-import-load", "load-library", "torch-library",
    "torch-save", "from-torch-import-save", "storage-from-file", "torch-from-file"])
def test_routes_to_unseen_code_are_refused_by_both_checks(snippet, expected):
    """The candidate check names each route; the cache's allow-list refuses it too."""
    reason = calls_back_into_reference(HONEST + "\n" + snippet, OPS)
    assert reason is not None and expected in reason, reason
    assert unsafe_host_code(HONEST + "\n" + snippet) is not None


def test_a_string_annotation_in_a_jit_body_or_a_variable_is_refused():
    snippet = "X: 'open(\"/etc/passwd\")' = 1\n"
    assert "string annotation" in calls_back_into_reference(HONEST + "\n" + snippet, OPS)


# --- the kernel cache's allow-list (lego_core.judge.host_allowlist)

@pytest.mark.sandbox
@pytest.mark.parametrize("snippet, expected", [
    ("import functools\n", "import functools"),
    ("import torch as T\n", "import torch as T"),
    ("from math import exp\n", "ImportFrom"),
    ("def f():\n    import math\n    return math.pi\n", "an import inside a function"),
    ("Y = torch.nn.functional.relu\n", "torch.nn.functional.relu"),
    ("Y = torch.cuda.synchronize()\n", "torch.cuda.synchronize"),
    ("Y = triton.runtime.driver\n", "triton.runtime.driver"),
    ("Y = tl.str_to_ty('fp32')\n", "tl.str_to_ty"),
    ("Y = tl.core.builtin\n", "tl.core.builtin"),
    ("T = torch\n", "the module torch as a value"),
    ("def f():\n    return sorted([torch])\n", "the module torch as a value"),
    ("K = type(launch)\n", "the builtin type"),
    ("K = object\n", "the builtin object"),
    ("K = hasattr(launch, 'x')\n", "the builtin hasattr"),
    ("range = print\n", "builtin print"),
    ("K = __name__\n", "dunder"),
    ("K = undefined_thing\n", "neither defines nor imports"),
    ("def f(x):\n    return x._base\n", "attribute ._base"),
    ("def f(x):\n    return '{0.device}'.format(x)\n", "attribute .format"),
    ("class A:\n    pass\n", "a class definition"),
    ("def deco(f):\n    return f\n\n@deco\ndef g():\n    pass\n", "no decorator but @triton.jit"),
    ("def f(x) -> 'int':\n    return x\n", "string annotation"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None)
def test_the_cache_allow_list_refuses_what_templates_never_write(snippet, expected):
    reason = unsafe_host_code(HONEST + "\n" + snippet)
    assert reason is not None and expected in reason, reason


def test_the_cache_allow_list_takes_the_honest_file_and_what_templates_write():
    assert unsafe_host_code(HONEST) is None
    template_like = (
        "OUTPUT = ((4, 8), (8, 1), torch.float32)\nSKIP = not triton.knobs.runtime.interpret\n\n\n"
        "def _check(mask):\n"
        "    if mask.is_cuda and torch.cuda.is_current_stream_capturing():\n        return False\n"
        "    ref = torch.full((2, 2), float('-inf'), dtype=mask.dtype, device=mask.device).triu(1)\n"
        "    return all(torch.equal(mask[i], ref) for i in range(mask.shape[0])) and math.isfinite(1.0)\n"
    )
    assert unsafe_host_code(HONEST.replace("import torch\n", "import math\nimport torch\n") + "\n" + template_like) is None
