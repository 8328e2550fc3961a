"""The allow-list every kernel file passes (``lego_core.judge.host_allowlist``, issue 27).

Refusals: each construct a hostile kernel author could use to tell the judge
from a user's program, keep state between calls or patch the judge is
refused with its line.  Acceptance: realistic honest files (a softmax whose
launcher allocates ``out``, a GEMM with ``CONFIG``/``TUNE_CONFIGS``, before and
after the tuner rewrites ``CONFIG``), the LLM prompt's example, and every
kernel file the template agent writes for the sub-problems of the reference
models (and the attention model of ``test_attention``, whose additive mask
takes the causal-mask check).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

from conftest import SHARED_MODELS  # ../shared/models, or $LEGO_MODELS_DIR where they were carried
from lego_core.judge.host_allowlist import CANDIDATE_TL_MODULES, CANDIDATE_TL_NAMES, refusal
from lego_core.judge.static_check import calls_back_into_reference, unsafe_host_code

SOFTMAX = '''"""A softmax over the last dimension, one program per row."""
import math
import torch
import triton
import triton.language as tl

OUTPUTS = [((4, 4096), (4096, 1), torch.float32)]  # (shape, strides, dtype), as captured
CONFIG = {"num_warps": 4}
LOG2E = 1.0 / math.log(2.0)
INTERPRETED = tl.constexpr(bool(triton.knobs.runtime.interpret))


@triton.jit
def _max(a, b):
    return tl.maximum(a, b)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=mask, other=-float("inf"))
    z = (x - tl.reduce(x, 0, _max)) * LOG2E
    num = tl.math.exp2(z)
    if INTERPRETED:
        num = tl.where(mask, num, 0.0)
    tl.store(y_ptr + row * y_stride + offs, num / tl.sum(num, axis=0), mask=mask)


def _rows(x):
    """(rows, columns) of ``x`` seen as a matrix over its last dimension."""
    return math.prod(x.shape[:-1]), x.shape[-1]


def launch(x: torch.Tensor, out=None) -> list:
    """Softmax of ``x``; ``out`` optionally gives the preallocated output."""
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"expected a tensor, got {str(x)[:20]}")
    x = x.contiguous()
    if out is None:
        out = [torch.empty_strided(shape, strides, dtype=dtype, device=x.device) for shape, strides, dtype in OUTPUTS]
    assert out[0].is_contiguous(), "out[0] must be contiguous (%d)" % out[0].dim()
    n_rows, n_cols = _rows(x)
    cfg = dict(CONFIG)
    if (block := triton.next_power_of_2(n_cols)) > 65536:
        raise ValueError("rows too long")
    grid = lambda meta: (n_rows,)  # noqa: E731
    softmax_kernel[grid](x, out[0], n_cols, x.stride(-2) if x.dim() > 1 else n_cols, n_cols, BLOCK=block, **cfg)
    return out
'''

GEMM = '''"""C = relu(A @ B), tiled (after the Triton tutorial 03)."""
import torch
import triton
import triton.language as tl

# launch configurations: TUNE_CONFIGS are timed at search time (lego_core.judge.tuning),
# which rewrites the CONFIG line below; launch always uses CONFIG
TUNE_CONFIGS = [
    {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4},
    {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3},
]
CONFIG = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 4}


@triton.jit
def gemm_relu_kernel(a_ptr, b_ptr, c_ptr, M, N, K: tl.constexpr, sam, sak, sbk, sbn, scm, scn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * sam + kk[None, :] * sak, mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + offs_n[None, :] * sbn, mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    acc = tl.where(acc < 0, 0.0, acc)
    tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def launch(a, b, out=None):
    M, K = a.shape
    N = b.shape[1]
    if out is None:
        out = [torch.empty((M, N), dtype=a.dtype, device=a.device)]
    c = out[0]
    cfg = dict(CONFIG)
    grid = (triton.cdiv(M, cfg["BLOCK_M"]), triton.cdiv(N, cfg["BLOCK_N"]))
    gemm_relu_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), **cfg)
    return out
'''

SOFTMAX_OPS = ("aten._softmax.default",)
GEMM_OPS = ("aten.mm.default", "aten.relu.default")


def with_launch(body: str, source: str = SOFTMAX) -> str:
    """``source`` with ``launch``'s body replaced by ``body`` (indented four spaces)."""
    head = source[: source.index("def launch(")]
    return head + "def launch(x, out=None):\n" + "\n".join("    " + line if line else "" for line in body.strip("\n").split("\n")) + "\n"


HONEST_BODY = '''x = x.contiguous()
if out is None:
    out = [torch.empty_like(x)]
softmax_kernel[(x.shape[0],)](x, out[0], x.shape[1], x.stride(0), out[0].stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
return out'''


def line_of(source: str, fragment: str) -> int:
    """The 1-based number of the first line of ``source`` holding ``fragment``."""
    return next(k for k, line in enumerate(source.splitlines(), 1) if fragment in line)


# --------------------------------------------------------------------------- acceptance


def test_realistic_honest_files_pass_every_check():
    for source, ops in ((SOFTMAX, SOFTMAX_OPS), (GEMM, GEMM_OPS)):
        assert refusal(source, profile="candidate") is None
        assert calls_back_into_reference(source, ops) is None
    assert refusal(with_launch(HONEST_BODY), profile="candidate") is None
    # what the cache stores is narrower: torch.Tensor and the walrus file are a candidate's only
    assert "torch.Tensor" in refusal(SOFTMAX, profile="cache")
    assert unsafe_host_code(GEMM) is None


def test_the_tuned_gemm_still_passes():
    """The tuner rewrites the CONFIG line (lego_core.judge.tuning); the file stays allowed."""
    from lego_core.judge.tuning import tunable, with_config

    assert tunable(GEMM)
    tuned = with_config(GEMM, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3}, "0.0100 ms")
    assert "# tuned" in tuned and refusal(tuned, profile="candidate") is None and unsafe_host_code(tuned) is None


def test_the_llm_prompt_states_the_rules_and_its_example_passes():
    from lego_core.agents.llm.prompt import system_prompt

    text = system_prompt()
    for rule in ("no class", "no decorator but `@triton.jit`", "keep no state between calls", "never assign an attribute"):
        assert rule in text
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert refusal(example, profile="candidate") is None and refusal(example, profile="cache") is None
    assert calls_back_into_reference(example, ("aten.mul.Tensor",)) is None


def test_candidate_triton_names_exist():
    """Every tl name a candidate may use is Triton's (the lists have no typo to hide behind)."""
    import importlib

    import triton.language as tl

    for name in CANDIDATE_TL_NAMES:
        value = tl
        for part in name.split("."):
            value = getattr(value, part)
    for module in CANDIDATE_TL_MODULES:
        importlib.import_module("triton.language." + module)


def _template_sources():
    """(label, sub, source) of every file the template agent writes for the
    reference models' sub-problems (tree nodes and mutation's fusions) and for
    test_attention's model in its three modes."""
    import tempfile

    from lego_core.agents.template.agent import TemplateAgent
    from lego_core.load.capture import capture_graph
    from lego_core.load.problem import ProblemSpec, load_problem
    from lego_core.search.mutation import propose_fusions
    from lego_core.tree.fusion_tree import build_tree

    if not SHARED_MODELS.is_dir():
        pytest.skip(f"reference models not found at {SHARED_MODELS}")
    tiny = json.loads((SHARED_MODELS / "tiny.json").read_text())
    problems = [(name, load_problem(ProblemSpec(str(SHARED_MODELS / name), dict(tiny[name])))) for name in sorted(tiny)]
    from test_attention import CUSTOM

    folder = Path(tempfile.mkdtemp(prefix="lego-allowlist-"))
    (folder / "attn_model.py").write_text(CUSTOM)
    problems += [(f"attention mode {mode}", load_problem(ProblemSpec(str(folder / "attn_model.py"), {"mode": mode}))) for mode in (0, 1, 2)]
    agent = TemplateAgent()
    for label, problem in problems:
        graph = capture_graph(problem)
        tree = build_tree(graph)
        fusions, _ = propose_fusions(tree.leaves(), graph.output_nodes, set())
        for sub in [n.sub for n in tree.or_nodes()] + [f.sub for f in fusions]:
            if agent.can_attempt(sub):
                source = agent.propose(sub, []).source
                if source:
                    yield label, sub, source


def test_every_template_agent_file_passes_the_allow_list():
    kinds: dict[str, int] = {}
    causal_checks = 0
    for label, sub, source in _template_sources():
        for profile in ("candidate", "cache"):
            assert refusal(source, profile=profile) is None, (label, sub.id, sub.kind, profile, refusal(source, profile=profile))
        assert calls_back_into_reference(source, sub.ops, getattr(sub.group, "library_ops", ())) is None, (label, sub.id)
        kinds[sub.kind] = kinds.get(sub.kind, 0) + 1
        causal_checks += "def _is_causal(" in source
    assert set(kinds) >= {"pointwise", "row_reduction", "gemm_epilogue", "attention", "conv_bn", "depthwise_conv1d", "scan"}, kinds
    assert causal_checks, "no attention file with the causal-mask check was rendered"


# --------------------------------------------------------------------------- refusals

# (source, fragment of the reason, fragment of the line it names)
REFUSED = [
    (with_launch("match torch:\n    case object(sys=s):\n        pass\n" + HONEST_BODY), "a match statement", "match torch:"),
    (SOFTMAX.replace("import math\n", "import math\nimport functools\n").replace("def _rows(x):", "@functools.lru_cache\ndef _rows(x):"),
     "import functools: a kernel file imports only", "import functools"),
    (SOFTMAX.replace("def _rows(x):", "@_max\ndef _rows(x):"), "the decorator @_max: a kernel file has no decorator but @triton.jit", "@_max"),
    (SOFTMAX.replace("@triton.jit\ndef _max", "@triton.autotune(configs=[], key=[])\n@triton.jit\ndef _max"), "the decorator @triton.autotune", "@triton.autotune"),
    (SOFTMAX.replace("CONFIG = {", "_BUF = torch.empty(4, 4096)\nCONFIG = {"), "a module-level value calls torch.empty", "_BUF = torch.empty"),
    (SOFTMAX + "\n\nclass X:\n    pass\n", "a class definition", "class X:"),
    (with_launch("global _n\n" + HONEST_BODY), "a global statement", "global _n"),
    (with_launch("def inner():\n    nonlocal x\n    return x\n" + HONEST_BODY), "a nonlocal statement", "nonlocal x"),
    (with_launch("k = x.__class__\n" + HONEST_BODY), "uses the attribute .__class__", "x.__class__"),
    (with_launch("f = getattr(torch, 'soft' + 'max')\n" + HONEST_BODY), "uses the builtin getattr", "getattr(torch"),
    (SOFTMAX.replace("def launch(x: torch.Tensor, out=None)", "def launch(x: torch.Tensor, out=None, _calls=[0])"), "a mutable default argument [0]", "_calls=[0]"),
    (SOFTMAX.replace("CONFIG = {", "_CACHE = {}\nCONFIG = {").replace("    cfg = dict(CONFIG)\n", "    cfg = dict(CONFIG)\n    _CACHE[n_cols] = n_rows\n"),
     "stores into the module-level _CACHE other than reading it", "_CACHE[n_cols] = n_rows"),
    (SOFTMAX.replace("CONFIG = {", "_CACHE = {}\nCONFIG = {").replace("    cfg = dict(CONFIG)\n", "    cfg = dict(CONFIG)\n    _CACHE.setdefault('n', []).append(1)\n"),
     "calls .setdefault on the module-level _CACHE", "_CACHE.setdefault"),
    (SOFTMAX.replace("    cfg = dict(CONFIG)\n", "    cfg = CONFIG\n    cfg['calls'] = cfg.get('calls', 0) + 1\n"), "uses the module-level CONFIG other than reading it", "cfg = CONFIG"),
    (SOFTMAX.replace("    cfg = dict(CONFIG)\n", "    cfg = dict(CONFIG)\n    _rows(CONFIG)\n"), "uses the module-level CONFIG other than reading it", "_rows(CONFIG)"),
    (GEMM.replace("    cfg = dict(CONFIG)\n", "    cfg = TUNE_CONFIGS[0]\n    cfg['n'] = 1\n"), "TUNE_CONFIGS other than reading it (it holds dicts or lists", "cfg = TUNE_CONFIGS[0]"),
    (GEMM.replace("    cfg = dict(CONFIG)\n", "    cfg = dict(CONFIG)\n    for c in TUNE_CONFIGS:\n        c['n'] = 1\n"), "uses the module-level TUNE_CONFIGS", "for c in TUNE_CONFIGS"),
    (GEMM.replace("    cfg = dict(CONFIG)\n", "    cfg = dict(CONFIG)\n    TUNE_CONFIGS[0].update(cfg)\n"), "calls .update on the module-level TUNE_CONFIGS", "TUNE_CONFIGS[0].update"),
    (with_launch("x.calls = 1\n" + HONEST_BODY), "assigns or deletes the attribute .calls", "x.calls = 1"),
    (with_launch("k = softmax_kernel\n" + HONEST_BODY), "uses the function softmax_kernel as a value", "k = softmax_kernel"),
    (with_launch(HONEST_BODY.replace("softmax_kernel[(x.shape[0],)](", "h = softmax_kernel[(x.shape[0],)](")), "keeps or reads the launch of softmax_kernel", "h = softmax_kernel"),
    (SOFTMAX + "\n_honest = launch\n", "names the function launch", "_honest = launch"),
    (SOFTMAX + "\n\ndef launch(x, out=None):\n    return out\n", "binds launch twice at module level", "def launch(x, out=None):"),
    (SOFTMAX.replace("CONFIG = {", "_COUNT = (i for i in range(100))\nCONFIG = {"), "a module-level generator", "_COUNT = (i for i"),
    (SOFTMAX.replace("CONFIG = {", "_F = lambda: 0\nCONFIG = {"), "a module-level lambda", "_F = lambda"),
    (SOFTMAX.replace("CONFIG = {", "_N = (_M := 3)\nCONFIG = {"), "a module-level walrus", "_N = (_M := 3)"),
    (SOFTMAX.replace("CONFIG = {", "torch.manual_seed(0)\nCONFIG = {"), "a module-level expression statement", "torch.manual_seed(0)"),
    (with_launch("def _make():\n    yield 1\n" + HONEST_BODY), "a yield (a generator function)", "yield 1"),
    (SOFTMAX + "\n\nasync def helper():\n    return 1\n", "async code", "async def helper"),
    (with_launch("with torch.no_grad():\n    pass\n" + HONEST_BODY), "a with statement", "with torch.no_grad"),
    (with_launch("try:\n    pass\nexcept Exception:\n    pass\n" + HONEST_BODY), "a try statement", "try:"),
    (with_launch("import math\n" + HONEST_BODY), "an import inside a function", "    import math"),
    (SOFTMAX.replace("import math\n", "import sys\n"), "import sys: a kernel file imports only", "import sys"),
    (SOFTMAX.replace("import math\n", "import gc\n"), "import gc: a kernel file imports only", "import gc"),
    (SOFTMAX.replace("import math\n", "import inspect\n"), "import inspect: a kernel file imports only", "import inspect"),
    (SOFTMAX.replace("import math\n", "import importlib\n"), "import importlib: a kernel file imports only", "import importlib"),
    (SOFTMAX.replace("import math\n", "import builtins\n"), "import builtins: a kernel file imports only", "import builtins"),
    (SOFTMAX.replace("import math\n", "import torch.nn.functional as F\n"), "import torch.nn.functional as F", "import torch.nn.functional"),
    (SOFTMAX.replace("import triton.language as tl\n", "from triton import language as tl\n"), "a from-import (ImportFrom)", "from triton import"),
    (with_launch("m = __import__('sys')\n" + HONEST_BODY), "uses __import__", "__import__"),
    (with_launch("setattr(x, 'n', 1)\n" + HONEST_BODY), "uses the builtin setattr", "setattr("),
    (with_launch("g = vars(torch)\n" + HONEST_BODY), "uses the builtin vars", "vars(torch)"),
    (with_launch("g = globals()\n" + HONEST_BODY), "uses the builtin globals", "globals()"),
    (with_launch("g = locals()\n" + HONEST_BODY), "uses the builtin locals", "locals()"),
    (with_launch("t = type(x)\n" + HONEST_BODY), "uses the builtin type", "type(x)"),
    (with_launch("o = object()\n" + HONEST_BODY), "uses the builtin object", "object()"),
    (with_launch("n = id(x)\n" + HONEST_BODY), "uses the builtin id", "id(x)"),
    (with_launch("f = open('/tmp/x')\n" + HONEST_BODY), "uses the builtin open", "open("),
    (with_launch("f = eval('1')\n" + HONEST_BODY), "uses the builtin eval", "eval("),
    (with_launch("exec('1')\n" + HONEST_BODY), "uses the builtin exec", "exec("),
    (with_launch("c = compile('1', 'f', 'eval')\n" + HONEST_BODY), "uses the builtin compile", "compile("),
    (with_launch("print(x)\n" + HONEST_BODY), "uses the builtin print", "print(x)"),
    (SOFTMAX.replace("def _rows(x):", "def _rows(x: 'int'):"), "a string annotation", "def _rows"),
    (SOFTMAX.replace("def _rows(x):", "def _rows(x: print('hi')):"), "an annotation print('hi')", "def _rows"),
    (with_launch("y = x._base\n" + HONEST_BODY), "uses the attribute ._base", "x._base"),
    (with_launch("n = x._version\n" + HONEST_BODY), "uses the attribute ._version", "x._version"),
    (with_launch("p = x.data_ptr()\n" + HONEST_BODY), "uses the attribute .data_ptr", "x.data_ptr()"),
    (with_launch("if x.requires_grad:\n    x = x * 2\n" + HONEST_BODY), "uses the attribute .requires_grad", "x.requires_grad"),
    (with_launch("x.unsqueeze_(0)\n" + HONEST_BODY), "uses the attribute .unsqueeze_", "unsqueeze_"),
    (with_launch("torch.Tensor.requires_grad_(x)\n" + HONEST_BODY), "uses torch.Tensor.requires_grad_", "torch.Tensor.requires_grad_"),
    (with_launch("s = '{0.grad_fn}'.format(x)\n" + HONEST_BODY), "uses the attribute .format", ".format(x)"),
    (with_launch("if 'Parameter' in str(x):\n    x = x * 2\n" + HONEST_BODY), "str() outside a raise or assert message", "str(x)"),
    (with_launch("if 'grad' in f'{x!r}':\n    x = x * 2\n" + HONEST_BODY), "an f-string outside a raise or assert message", "f'{x!r}'"),
    (with_launch("fmt = '%r'\n" + HONEST_BODY), "a %-format string outside a raise or assert message", "fmt = '%r'"),
    (with_launch("torch.cuda.synchronize()\n" + HONEST_BODY), "uses torch.cuda.synchronize, which is not on the allow-list", "synchronize"),
    (with_launch("s = torch.cuda.Stream()\n" + HONEST_BODY), "uses torch.cuda.Stream", "Stream"),
    (SOFTMAX.replace("num = tl.math.exp2(z)", "num = tl.inline_asm_elementwise('ex2.approx.f32 $0, $1;', '=r,r', [z], dtype=tl.float32, is_pure=True, pack=1)"),
     "uses tl.inline_asm_elementwise", "inline_asm"),
    (SOFTMAX.replace("num = tl.math.exp2(z)", "num = tl.extra.cuda.libdevice.core.builtin(z)"), "uses tl.extra.cuda.libdevice.core.builtin", "libdevice.core"),
    (with_launch("for name in ('a',):\n    t = triton.runtime.driver\n" + HONEST_BODY), "uses triton.runtime.driver", "triton.runtime.driver"),
    (with_launch("t = torch\n" + HONEST_BODY), "uses the module torch as a value", "t = torch"),
    (with_launch("torch = 1\n" + HONEST_BODY), "rebinds the module name torch", "torch = 1"),
    (with_launch("k = __name__\n" + HONEST_BODY), "uses __name__", "__name__"),
    (SOFTMAX.replace("_rows(x)\n    cfg", "_rows(x)\n    del CONFIG['num_warps']\n    cfg"), "the module-level CONFIG other than reading it", "del CONFIG"),
]


@pytest.mark.parametrize("source, expected, where", REFUSED, ids=[r[1][:40] for r in REFUSED])
def test_each_construct_is_refused_with_its_line(source, expected, where):
    reason = refusal(source, profile="candidate")
    assert reason is not None and expected in reason, reason
    assert reason.startswith(f"line {line_of(source, where)}: "), reason
    assert "\n" not in reason and len(reason) < 500, reason
    assert refusal(source, profile="cache") is not None  # the cache's profile is the narrower
    assert calls_back_into_reference(source, SOFTMAX_OPS) is not None  # every candidate passes it


def test_the_denylist_names_the_common_roads_first():
    """``calls_back_into_reference`` gives its own, more precise reason first;
    the allow-list closes what it does not list (the issue's audit)."""
    match = with_launch("match torch:\n    case object(sys=s):\n        pass\n" + HONEST_BODY)
    assert "a match statement" in calls_back_into_reference(match, SOFTMAX_OPS)
    lru = SOFTMAX.replace("import math\n", "import math\nimport functools\n").replace("def _rows(x):", "@functools.lru_cache\ndef _rows(x):")
    assert "import functools" in calls_back_into_reference(lru, SOFTMAX_OPS)
    getattr_ = with_launch("f = getattr(torch, 'softmax')\n" + HONEST_BODY)
    assert "getattr()" in calls_back_into_reference(getattr_, SOFTMAX_OPS)
    assert "a match statement" in unsafe_host_code(match)


def test_reading_module_tables_and_locals_is_allowed():
    """What the rules leave open: reading literal tables, a local dict or list
    written freely, closures and lambdas of one call, a kernel handed to
    tl.reduce, text in error messages."""
    body = '''table = {"a": 1}
table["b"] = 2
rows = [k for k in OUTPUTS]
rows.append(len(CONFIG))
if "num_warps" in CONFIG and CONFIG.get("num_warps") and not OUTPUTS:
    raise ValueError("no outputs: %d" % len(rows))
for key, value in CONFIG.items():
    table[key] = value

def scale(v, factor=2):
    return v * factor

total = sum(scale(v) for v in table.values())
assert total > 0, f"bad config {table}"
''' + HONEST_BODY
    assert refusal(with_launch(body), profile="candidate") is None


def test_a_name_is_judged_in_the_scope_it_is_bound():
    """A parameter or local that shadows a module-level name is a local of its
    call (the sequence template's ``BLOCK_T`` parameters); a comprehension
    variable does not hide the module-level name it iterates."""
    shadow = SOFTMAX.replace("def _rows(x):\n", "def _rows(x, CONFIG=None):\n    CONFIG = {}\n    CONFIG['a'] = 1\n")
    assert refusal(shadow, profile="candidate") is None
    hidden = GEMM.replace("    cfg = dict(CONFIG)\n", "    cfg = dict(CONFIG)\n    n = [TUNE_CONFIGS.update() for TUNE_CONFIGS in TUNE_CONFIGS]\n")
    assert "TUNE_CONFIGS" in refusal(hidden, profile="candidate")


# the attacker's second look: roads to state and to the judge the first rules left open
SMALL = '''import torch
import triton
import triton.language as tl
{module}


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x, out=None):
{body}
    k[(1,)](x, x.numel(), BLOCK=16)
    return out
'''

SECOND_LOOK = [
    ("X = tl.constexpr([0])", "    X.value.append(1)", "reads .value of the module-level X"),  # a constexpr holding a list
    ("X = ([0],)", "    X[0].append(1)", "calls .append on the module-level X"),  # a list inside a tuple
    ("X = tuple([[0]])", "    X[0].append(1)", "calls .append on the module-level X"),
    ("X = (([0],),)", "    y = X[0]", "uses the module-level X other than reading it (it holds dicts or lists"),
    ("L = [[0]]", "    L[:][0].append(1)", "calls .append on the module-level L"),  # a slice shares what it holds
    ("L = [[0]]", "    M = [*L]", "uses the module-level L"),
    ("L = [0]", "    list.append(L, 1)", "uses the module-level L"),  # an unbound method
    ("D = {}", "    dict.update(D, a=1)", "uses the module-level D"),
    ("D = {}", "    f = lambda c=D: c.update(a=1)", "uses the module-level D"),
    ("L = [0]", "    M = L or []", "uses the module-level L"),  # a BoolOp gives an operand back
    ("L = [0]", "    if (M := L):\n        M.append(1)", "uses the module-level L"),
    ("L = [0]\nM = L", "    M.append(1)", "calls .append on the module-level M"),
    ("", "    g = (i for i in range(3))\n    f = g.gi_frame.f_back", "generator internals reach the call stack"),
    ("", "    s = sorted([x], key=str)", "str() outside a raise or assert message"),
    ("", "    s = ('%' + 'r') % (x,)", "a %-format string outside"),
    ("", "    s = b'%a' % x", "a %-format string outside"),
    ("", "    c = k.cache", "uses the function k as a value"),
    ("", "    n = x.storage_offset()", "uses the attribute .storage_offset"),
    ("", "    s = x.is_shared()", "uses the attribute .is_shared"),
    ("", "    torch.float32.data", "uses torch.float32.data"),
]


@pytest.mark.parametrize("module, body, expected", SECOND_LOOK, ids=[b.strip()[:30] for _, b, _ in SECOND_LOOK])
def test_roads_found_on_a_second_look_are_closed(module, body, expected):
    source = SMALL.format(module=module, body=body)
    reason = refusal(source, profile="candidate")
    assert reason is not None and expected in reason, reason


def test_what_stays_open_on_a_second_look():
    """Reads that keep nothing: a flat table sliced (a copy), tested, iterated
    by items; a local generator; a builtin name shadowed by a local."""
    for module, body in [("L = [0, 1]", "    y = L[:1]\n    y.append(2)"), ("L = [0]", "    if L and x is not None:\n        pass"),
                         ("D = {'a': 1}", "    for key, v in D.items():\n        pass"), ("", "    g = (i for i in range(3))\n    n = sum(g)"),
                         ("", "    id = 3\n    y = id + 1"), ("OUT = ((2, 3), (3, 1), torch.float32)", "    shape, strides, dtype = OUT"),
                         ("", "    if isinstance(x, (str, int)):\n        raise TypeError('not a tensor: ' + str(x))")]:
        assert refusal(SMALL.format(module=module, body=body), profile="candidate") is None, body
