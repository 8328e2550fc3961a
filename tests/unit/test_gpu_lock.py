"""lego_core.runtime.gpu_lock: timings hold the GPU alone across processes, other GPU work shares it.

No GPU needed: the locks are taken on a lock file of the test's own (``path=``)."""
import multiprocessing
import os
import time

import pytest

from lego_core.runtime import gpu_lock

CTX = multiprocessing.get_context("fork")


def _hold(kind, path, seconds, started, log):
    with getattr(gpu_lock, kind)(path=path):
        log.put((kind, "in", time.monotonic()))
        started.set()
        time.sleep(seconds)
        log.put((kind, "out", time.monotonic()))


def _spawn(kind, path, seconds, log):
    started = CTX.Event()
    proc = CTX.Process(target=_hold, args=(kind, path, seconds, started, log))
    proc.start()
    assert started.wait(10), f"the {kind} holder never got the lock"
    return proc


def _events(log, n):
    return [log.get(timeout=10) for _ in range(n)]


def test_a_timing_waits_for_shared_work_and_shared_work_waits_for_a_timing(tmp_path):
    path = str(tmp_path / "gpu.lock")
    log = CTX.Queue()
    verifying = _spawn("shared", path, 0.4, log)
    start = time.monotonic()
    with gpu_lock.exclusive(path=path):
        got = time.monotonic()
        timing = CTX.Process(target=_hold, args=("shared", path, 0.0, CTX.Event(), log))
        timing.start()
        time.sleep(0.3)
        released = time.monotonic()
    timing.join(10)
    verifying.join(10)
    events = _events(log, 4)
    first_out = next(t for kind, what, t in events[:2] if what == "out")
    assert got >= first_out, "the timing began while another process was verifying"
    assert got - start >= 0.3
    second_in = [t for kind, what, t in events[2:] if what == "in"][0]
    assert second_in >= released


def test_shared_holders_run_side_by_side(tmp_path):
    path = str(tmp_path / "gpu.lock")
    log = CTX.Queue()
    first = _spawn("shared", path, 0.5, log)
    t0 = time.monotonic()
    second = _spawn("shared", path, 0.0, log)  # would wait 0.5 s if shared holds excluded each other
    assert time.monotonic() - t0 < 0.4
    first.join(10), second.join(10)


def test_holds_nest_and_end_unlocked(tmp_path):
    path = str(tmp_path / "gpu.lock")
    with gpu_lock.shared(path=path):
        with gpu_lock.exclusive(path=path):  # a timing inside a verification converts the hold
            with gpu_lock.shared(path=path):
                pass
        with gpu_lock.held_elsewhere(), gpu_lock.exclusive(path=path):
            pass  # a no-op: the process that asked holds it
    log = CTX.Queue()
    t0 = time.monotonic()
    _spawn("exclusive", path, 0.0, log).join(10)
    assert time.monotonic() - t0 < 5, "the lock stayed held after the last hold ended"


def _stream_of_verifications(path, stop, log):
    while not stop.is_set():
        with gpu_lock.shared(path=path):
            time.sleep(0.05)


def test_a_stream_of_verifications_does_not_starve_a_timing(tmp_path):
    path = str(tmp_path / "gpu.lock")
    stop = CTX.Event()
    streams = [CTX.Process(target=_stream_of_verifications, args=(path, stop, None)) for _ in range(3)]
    for proc in streams:
        proc.start()
    time.sleep(0.3)
    try:
        t0 = time.monotonic()
        with gpu_lock.exclusive(path=path):
            waited = time.monotonic() - t0
    finally:
        stop.set()
        for proc in streams:
            proc.join(10)
    assert waited < 1.0, f"the timing waited {waited:.2f} s behind overlapping verifications"


def test_a_dead_holder_releases_the_gpu(tmp_path):
    path = str(tmp_path / "gpu.lock")
    log = CTX.Queue()
    holder = _spawn("exclusive", path, 60, log)
    holder.kill()
    holder.join(10)
    t0 = time.monotonic()
    with gpu_lock.exclusive(path=path):
        assert time.monotonic() - t0 < 5


def test_a_forked_child_does_not_inherit_this_process_hold(tmp_path):
    path = str(tmp_path / "gpu.lock")
    log = CTX.Queue()
    with gpu_lock.exclusive(path=path):
        pid = os.fork()
        if pid == 0:  # the child's holds start empty: its own exclusive hold waits for the parent's
            code = 0 if not gpu_lock._holds else 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _verify_then_time(path, both_verifying, done):
    with gpu_lock.shared(path=path):  # a verification...
        both_verifying.wait()
        with gpu_lock.exclusive(path=path):  # ...that then times its candidate
            time.sleep(0.05)
    done.put(os.getpid())


def test_two_searches_that_time_inside_a_verification_do_not_deadlock(tmp_path):
    """Two processes, each holding the GPU shared, both ask to hold it alone
    (a search times the candidate it just verified): each must give up its
    shared hold while it waits, or each waits for the other for ever."""
    path = str(tmp_path / "gpu.lock")
    both = CTX.Barrier(2, timeout=10)
    done = CTX.Queue()
    procs = [CTX.Process(target=_verify_then_time, args=(path, both, done)) for _ in range(2)]
    t0 = time.monotonic()
    for proc in procs:
        proc.start()
    finished = [done.get(timeout=20) for _ in procs]
    assert time.monotonic() - t0 < 5, "the two searches waited for each other (the lock gave way only to its time limit)"
    for proc in procs:
        proc.join(10)
    assert sorted(finished) == sorted(p.pid for p in procs)


def _random_holds(path, seed, inside, broken, done):
    import random

    rng = random.Random(seed)

    def enter(kind):
        with inside.get_lock():
            readers, writers = inside[0], inside[1]
            if writers or (kind == "exclusive" and readers):
                broken.value += 1
            inside[0 if kind == "shared" else 1] += 1

    def leave(kind):
        with inside.get_lock():
            inside[0 if kind == "shared" else 1] -= 1

    for _ in range(25):
        outer = rng.choice(["shared", "exclusive"])
        with getattr(gpu_lock, outer)(path=path):
            enter(outer)
            time.sleep(rng.random() * 0.004)
            leave(outer)
            if rng.random() < 0.5:
                inner = rng.choice(["shared", "exclusive"])
                with getattr(gpu_lock, inner)(path=path):
                    kind = "exclusive" if "exclusive" in (outer, inner) else "shared"
                    enter(kind)
                    time.sleep(rng.random() * 0.004)
                    leave(kind)
    done.put(seed)


def test_many_processes_nesting_holds_at_random_finish_and_never_share_a_timing(tmp_path):
    path = str(tmp_path / "gpu.lock")
    inside = CTX.Array("i", [0, 0])  # processes inside a shared / an exclusive hold
    broken = CTX.Value("i", 0)
    done = CTX.Queue()
    procs = [CTX.Process(target=_random_holds, args=(path, seed, inside, broken, done)) for seed in range(5)]
    for proc in procs:
        proc.start()
    finished = sorted(done.get(timeout=30) for _ in procs)
    for proc in procs:
        proc.join(10)
    assert finished == list(range(5))
    assert broken.value == 0, "a timing ran while another process held the GPU"


def test_cuda_available_asks_a_fresh_interpreter_as_a_run_would_and_makes_no_lock_files(tmp_path, monkeypatch):
    """What the web form goes by for device=cuda (webapp/runs/devices.py):
    torch.cuda.is_available() of this machine, asked without importing
    torch here and without making the GPU lock files probe() makes."""
    import torch

    from lego_core.runtime import gpu_lock, gpu_probe

    monkeypatch.setenv(gpu_lock.LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"probe-test-{tmp_path.name}")  # a fresh memo entry
    hidden = gpu_probe.cuda_available()
    assert hidden is False  # no device is visible by that name
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpu_probe.cuda_available() is torch.cuda.is_available()
    assert not (tmp_path / "locks").exists()
