"""The final user check's runner: the composed model called as a user calls it (issue 27).

A standalone script, not a module of LEGO: ``lego_core.judge.end_to_end.user_check``
runs it by path as ``python -I -B user_runner.py FOLDER`` (a fresh interpreter
started from ``sys.executable``, never forked from the judge's fork server),
with ``FOLDER`` a private temporary folder holding ``request.pt``.  It imports
the standard library and torch, then the output folder the way a user does
(``import optimized_model`` with the folder first on ``sys.path``), and
through it triton and the kernel files; nothing of ``lego_core`` (a finder
refuses it, as where LEGO is not installed, and the reply lists any
``lego_core`` module loaded at the end).

What it does (the request names the input sets and the order of the calls):

* builds ``ModelNew(*get_init_inputs())`` under ``torch.manual_seed(0)``, moves
  it to the run's device and dtype, loads the original model's weights (sent
  as a state dict) and calls ``.eval()``; a stateful forward gets a freshly
  built model before the first call of each input set, so that call starts
  from the state eager starts from;
* calls it, under ``torch.no_grad()``, once per entry of the schedule, each
  time on fresh private copies of that set's inputs (plain tensors read from
  a file: never in shared memory);
* after every call, before touching a returned value: every leaf of the
  output (tensors in tuples, lists and dicts) must be exactly ``torch.Tensor``
  (or ``torch.nn.Parameter``), or a plain Python number, string or None: a
  tensor subclass may defer its computation to the first touch;
* keeps every call's outputs and a clone of them: no output may share memory
  with an output of an earlier call (a module-level buffer handed out again),
  and no earlier output may change afterwards (bitwise, NaN-aware; checked
  after every call while the kept outputs are small, always at the end);
  outputs that are the model's own tensors (its state, a parameter) are
  exempt, as in eager;
* sends back, per input set, the first call's outputs (and, for a stateful
  forward, the state after it) and every later call's outputs that differ
  bitwise from the first call's (a stateless forward only; a stateful one
  legitimately differs), all cloned and on the CPU.  The optimizer judges
  them against eager (``user_check``).

The reply (``reply.pt``, written by ``torch.save`` and read by the optimizer
with ``torch.load(weights_only=True)``): ``pid``, ``calls`` (made),
``import_s`` / ``build_s`` / ``forward_s`` / ``wall_s`` (seconds),
``memory_peak`` (bytes of CUDA memory at the peak, when CUDA was used),
``sets`` (``[{"name", "outputs": [{"call", "leaves"}]}]``, calls numbered
from 1), ``problem`` (None, or ``{"check", "message", "call"}``: the first
per-call check that failed, or the exception the model raised, with the
``stage`` it raised in: ``import``, ``build`` or ``call``), ``checks``
(each per-call check's verdict), ``forward`` (what ModelNew's calls ran:
``lego_runtime``'s ``lego_last_forward``), ``lego_modules`` (``lego_core``
modules in ``sys.modules`` at the end: none expected).
"""
import ctypes
import os
import signal
import sys
import time
import traceback

PLAIN_VALUES = (bool, int, float, complex, str, type(None))
JUDGE_PACKAGE = "lego_core"
SENT_PER_SET_MAX = 48  # differing outputs sent per input set (every call, with the schedules of user_check)


class _NotInstalled:
    """A ``sys.meta_path`` finder for which LEGO is not installed: an output
    folder must run where only torch and triton are (it ships its runtime)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == JUDGE_PACKAGE or name.startswith(JUDGE_PACKAGE + "."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def _die_with_parent() -> None:
    """SIGKILL this process when the optimizer dies (Linux; a no-op elsewhere)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv) -> int:
    """Read ``argv[0]/request.pt``, run the calls, write ``argv[0]/reply.pt``.
    Returns 0 when a reply was written (whatever its verdict), 2 on bad usage."""
    if len(argv) != 1:
        print("usage: python -I -B user_runner.py FOLDER", file=sys.stderr)
        return 2
    started = time.monotonic()
    _die_with_parent()
    sys.meta_path.insert(0, _NotInstalled())
    sys.dont_write_bytecode = True
    folder = argv[0]
    import torch

    request = torch.load(os.path.join(folder, "request.pt"), weights_only=True)
    sys.path[:0] = [request["out_dir"], *request.get("import_paths", [])]
    reply = {"pid": os.getpid(), "calls": 0, "sets": [{"name": s["name"], "outputs": []} for s in request["sets"]],
             "problem": None, "checks": {}, "forward": None, "lego_modules": [], "import_s": None, "build_s": 0.0,
             "forward_s": 0.0}
    try:
        _run(torch, request, reply)
    except BaseException as exc:  # noqa: BLE001 - the model's exception is the verdict, reported whole
        reply["problem"] = {"check": "raised", "stage": reply.get("stage"), "call": reply["calls"] + 1,
                            "message": f"{type(exc).__name__}: {str(exc).strip()[:2000]}",
                            "traceback": "".join(traceback.format_exception(exc))[-6000:]}
        for name, verdict in reply["checks"].items():
            if verdict == "passed":
                reply["checks"][name] = f"stopped at call {reply['calls'] + 1}"
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
        reply["memory_peak"] = int(sys.modules["torch"].cuda.max_memory_allocated())  # bytes, for the run's memory bound
    reply["lego_modules"] = sorted(n for n in sys.modules if n == JUDGE_PACKAGE or n.startswith(JUDGE_PACKAGE + "."))
    reply["wall_s"] = time.monotonic() - started
    partial = os.path.join(folder, "reply.partial")
    torch.save(reply, partial)
    os.replace(partial, os.path.join(folder, "reply.pt"))
    return 0


def _run(torch, request: dict, reply: dict) -> None:
    """The calls and their checks (module docstring); fills ``reply``."""
    tree_flatten = torch.utils._pytree.tree_flatten
    tree_map = torch.utils._pytree.tree_map
    device = torch.device(request["device"])
    dtype = getattr(torch, request["dtype"])
    targets = list(request.get("state_targets") or [])
    names = [s["name"] for s in request["sets"]]
    schedule = list(request["schedule"])
    check_all_bytes = int(request.get("check_all_bytes", 64 << 20))
    kept_bytes_max = int(request.get("kept_bytes_max", 2 << 30))

    t = time.monotonic()
    reply["stage"] = "import"
    import optimized_model  # as a user imports it: the output folder is first on sys.path

    reply["import_s"] = time.monotonic() - t
    state_dict = request["state_dict"]

    def build():
        begun = time.monotonic()
        torch.manual_seed(0)
        model = optimized_model.ModelNew(*optimized_model.get_init_inputs())
        model = model.to(device=device, dtype=dtype).eval()
        _move_plain_tensor_attributes(torch, model, device)
        model.load_state_dict(state_dict)
        reply["build_s"] += time.monotonic() - begun
        return model

    def on_device(value):
        return value.to(device) if isinstance(value, torch.Tensor) else value

    sets = [tree_map(on_device, s["inputs"]) for s in request["sets"]]
    reply["stage"] = "build"
    model = build()
    reply["stage"] = "call"
    own = _own_storages(torch, model)
    checks = reply["checks"]
    checks.update(exact_tensor_type="passed", no_memory_shared_across_calls="passed", earlier_outputs_unchanged="passed",
                  plan_ran="passed")
    kept = []  # [call, set index, leaves, clones, exempt]: outputs kept alive, so no later one may take their memory
    owner = {}  # storage data_ptr -> (call, leaf): every kept output's memory
    first = {}  # set index -> clones of its first call's leaves
    sent = {k: 0 for k in range(len(sets))}

    def fail(check: str, call: int, message: str) -> None:
        for name in checks:
            if checks[name] == "passed" and name != check:
                checks[name] = f"stopped at call {call}"
        checks[check] = "failed"
        reply["problem"] = {"check": check, "call": call, "message": message}

    for index, s in enumerate(schedule):
        call = index + 1
        if targets and s not in first and index:
            reply["stage"] = "build"
            model = build()  # a stateful forward: each set's first call starts from the initial state, as eager's does
            reply["stage"] = "call"
        inputs = tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, sets[s])  # private, fresh every call
        begun = time.monotonic()
        with torch.no_grad():
            output = model(*inputs)
        leaves, _ = tree_flatten(output)
        for k, leaf in enumerate(leaves):  # before anything touches a value: a subclass may compute on first touch
            if isinstance(leaf, torch.Tensor):
                if type(leaf) is not torch.Tensor and type(leaf) is not torch.nn.Parameter:
                    fail("exact_tensor_type", call, f"call {call} ({names[s]} inputs) returned a {type(leaf).__module__}."
                                                    f"{type(leaf).__qualname__} as output {k}, not a torch.Tensor: a user's code "
                                                    "gets an object that computes later, or differently, than the judge saw")
                    return
            elif not isinstance(leaf, PLAIN_VALUES):
                fail("exact_tensor_type", call, f"call {call} ({names[s]} inputs) returned a {type(leaf).__qualname__} "
                                                f"as output {k}, not a tensor or a plain Python value")
                return
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        reply["forward_s"] += time.monotonic() - begun
        reply["calls"] = call
        forward = {"requested": str(getattr(model, "lego_forward", "plan")),
                   "ran": model.__dict__.get("lego_last_forward", None if hasattr(model, "lego_forward") else "plan"),
                   "why": model.__dict__.get("lego_fallback")}
        if reply["forward"] is None or forward["ran"] != "plan":
            reply["forward"] = dict(forward, call=call)
        if forward["requested"] == "plan" and forward["ran"] != "plan":
            checks["plan_ran"] = "failed"
        if targets:
            own = _own_storages(torch, model)  # the state written back may be new tensors
        exempt = [isinstance(x, torch.Tensor) and x.numel() > 0 and _storage(x) in own for x in leaves]
        for k, leaf in enumerate(leaves):
            if not isinstance(leaf, torch.Tensor) or exempt[k] or leaf.numel() == 0:
                continue
            earlier = owner.get(_storage(leaf))
            if earlier is not None and earlier[0] != call:
                fail("no_memory_shared_across_calls", call,
                     f"output {k} of call {call} ({names[s]} inputs) is in the memory of output {earlier[1]} of call "
                     f"{earlier[0]}, which the caller still holds: each call must return new tensors (a buffer kept "
                     "by the kernel and handed out again overwrites earlier results)")
                return
        for k, leaf in enumerate(leaves):
            if isinstance(leaf, torch.Tensor) and not exempt[k] and leaf.numel() > 0:
                owner[_storage(leaf)] = (call, k)
        clones = [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in leaves]
        if s not in first:
            first[s] = clones
            state = [_read(model, name).detach().clone().cpu() for name in targets]
            reply["sets"][s]["outputs"].append({"call": call, "leaves": [_cpu(torch, x) for x in clones] + state})
        elif not targets and not _same(torch, clones, first[s]) and sent[s] < SENT_PER_SET_MAX:
            reply["sets"][s]["outputs"].append({"call": call, "leaves": [_cpu(torch, x) for x in clones]})
            sent[s] += 1
        kept.append([call, s, leaves, clones, exempt])
        size = sum(_nbytes(torch, x) for entry in kept for x in entry[2])
        changed = _changed(torch, kept if size <= check_all_bytes else kept[-2:-1])
        if changed is not None:
            fail("earlier_outputs_unchanged", call, _changed_message(changed, call, names))
            return
        while len(kept) > 1 and 2 * size > kept_bytes_max:  # bounded memory: the oldest is checked and let go
            gone = kept.pop(0)
            changed = _changed(torch, [gone])
            if changed is not None:
                fail("earlier_outputs_unchanged", call, _changed_message(changed, call, names))
                return
            for k, leaf in enumerate(gone[2]):
                if isinstance(leaf, torch.Tensor) and owner.get(_storage(leaf)) == (gone[0], k):
                    del owner[_storage(leaf)]
            size = sum(_nbytes(torch, x) for entry in kept for x in entry[2])
    changed = _changed(torch, kept)
    if changed is not None:
        fail("earlier_outputs_unchanged", reply["calls"], _changed_message(changed, reply["calls"], names, final=True))


def _changed(torch, kept: list):
    """The first ``(call, set index, output index)`` of ``kept`` whose output no longer equals its clone, else None."""
    for call, s, leaves, clones, exempt in kept:
        for k, (leaf, clone) in enumerate(zip(leaves, clones)):
            if isinstance(leaf, torch.Tensor) and not exempt[k] and not _same_tensor(torch, leaf, clone):
                return call, s, k
    return None


def _changed_message(changed, call: int, names: list, final: bool = False) -> str:
    earlier, s, k = changed
    when = f"by the end of the {call} calls" if final else f"between calls {earlier} and {call}"
    return (f"the composed model's output changed {when} on {names[s]} inputs (output {k} of call {earlier}): "
            "a result the caller holds was overwritten by a later call (a buffer reused across calls)")


def _same(torch, leaves: list, others: list) -> bool:
    """Whether two calls' leaves are equal, tensors bitwise (NaN-aware)."""
    if len(leaves) != len(others):
        return False
    for a, b in zip(leaves, others):
        if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
            return False
        if isinstance(a, torch.Tensor):
            if not _same_tensor(torch, a, b):
                return False
        elif not (a == b or (a != a and b != b)):
            return False
    return True


def _same_tensor(torch, a, b) -> bool:
    """Bitwise equality of two tensors (a NaN equals the same NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if a.is_floating_point():
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(a.element_size())
        if bits is not None:
            return torch.equal(a.view(bits), b.view(bits))
        return torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0)) and torch.equal(a.isnan(), b.isnan())
    return torch.equal(a, b)


def _storage(x) -> int:
    return x.untyped_storage().data_ptr()


def _nbytes(torch, x) -> int:
    return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0


def _cpu(torch, x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


def _own_storages(torch, model) -> set:
    """Memory of the model's own tensors (parameters, buffers, plain tensor
    attributes): an output that is one of them (a state the forward returns)
    is the model's, as in eager, not a buffer of a kernel's."""
    found = set()
    for module in model.modules():
        for value in (*module._parameters.values(), *module._buffers.values(), *vars(module).values()):
            if isinstance(value, torch.Tensor) and value.numel() > 0:
                found.add(_storage(value))
    return found


def _read(model, target: str):
    """The tensor ``target`` (dotted) of ``model``: a registered buffer or a plain tensor attribute."""
    path, _, name = target.rpartition(".")
    module = model.get_submodule(path) if path else model
    return module._buffers[name] if name in module._buffers else vars(module)[name]


def _move_plain_tensor_attributes(torch, model, device) -> None:
    """Plain tensor attributes (``self.mask = torch.tril(...)``) moved to
    ``device`` as LEGO's loader moved the original model's (``Module.to``
    moves parameters and buffers only)."""
    for module in model.modules():
        owned = set(module._parameters) | set(module._buffers)
        for name, value in list(vars(module).items()):
            if name in owned or not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter):
                continue
            if value.device != device and not (device.index is None and value.device.type == device.type):
                setattr(module, name, value.to(device))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
