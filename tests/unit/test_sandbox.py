"""lego_core.runtime.sandbox: run_in_child, event forwarding, errors, crashes, timeouts.

Targets live in ``sandbox_targets.py`` beside this file: spawn pickles them
by reference, so they must be importable module-level functions.
"""
import os
import sys
import time
from pathlib import Path

import pytest

# pytest's default "prepend" import mode already puts this folder on sys.path;
# make sure of it under other import modes too.  Spawned children inherit
# sys.path, so they can import the targets by reference.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import sandbox_targets as targets  # noqa: E402
from lego_core.events import Progress, StageStarted  # noqa: E402
from lego_core.runtime.sandbox import ChildCrashed, run_in_child  # noqa: E402
from lego_core.load.spec import ProblemError  # noqa: E402


def _collect():
    events = []
    return events, events.append


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_returns_the_childs_value_computed_in_another_process():
    result = run_in_child(targets.add_and_report_pid, (2, 40))
    assert result["sum"] == 42
    assert result["pid"] != os.getpid()


def test_events_reach_the_sink_in_order():
    events, sink = _collect()
    assert run_in_child(targets.emit_sequence, (25,), sink) == 25
    assert isinstance(events[0], StageStarted) and events[0].stage == "load" and events[0].total == 25
    progress = events[1:]
    assert all(isinstance(e, Progress) for e in progress)
    assert [e.done for e in progress] == list(range(1, 26))
    assert [e.message for e in progress] == [f"step {i}" for i in range(1, 26)]


def test_without_a_sink_events_are_dropped():
    assert run_in_child(targets.emit_sequence, (3,)) == 3


def test_problem_error_keeps_path_line_and_hint():
    events, sink = _collect()
    with pytest.raises(ProblemError) as info:
        run_in_child(targets.raise_problem_error, ("/uploads/model.py", 17), sink)
    err = info.value
    assert err.path == "/uploads/model.py"
    assert err.line == 17
    assert err.hint == "define class Model(nn.Module)."
    assert str(err).startswith("model.py:17: the file defines no `Model`.")
    assert [e.type for e in events] == ["stage_started"]  # the event before the error arrived


def test_picklable_exception_keeps_its_type():
    with pytest.raises(ValueError, match="plain failure in the child"):
        run_in_child(targets.raise_value_error, ())


def test_unpicklable_exception_becomes_runtime_error_with_traceback():
    with pytest.raises(RuntimeError) as info:
        run_in_child(targets.raise_unpicklable, ())
    err = info.value
    assert type(err) is RuntimeError  # not ChildCrashed, not the original class
    text = str(err)
    assert text.startswith("NeedsTwoArgs: weird failure (code 42)")
    assert "Traceback (most recent call last)" in text
    assert "_deep_helper_that_fails" in text and "sandbox_targets.py" in text


def test_os_exit_becomes_child_crashed_with_exit_code():
    with pytest.raises(ChildCrashed) as info:
        run_in_child(targets.exit_hard, (7,))
    assert "exited with code 7 without a result" in str(info.value)


def test_sigkill_becomes_child_crashed_naming_the_signal():
    with pytest.raises(ChildCrashed) as info:
        run_in_child(targets.kill_self, ())
    assert "killed by SIGKILL" in str(info.value)
    assert "out of memory" in str(info.value)


def test_events_sent_before_a_crash_still_arrive():
    events, sink = _collect()
    with pytest.raises(ChildCrashed, match="code 5"):
        run_in_child(targets.emit_then_exit_hard, (4,), sink)
    assert [e.done for e in events] == [1, 2, 3, 4]


def test_timeout_kills_a_sleeping_child():
    events, sink = _collect()
    start = time.monotonic()
    with pytest.raises(ChildCrashed) as info:
        run_in_child(targets.sleep_forever, (), sink, timeout_s=1.0)
    elapsed = time.monotonic() - start
    assert "time limit" in str(info.value)
    assert elapsed < 15
    child_pid = int(events[0].message)
    assert _gone(child_pid), "the timed-out child is still running"


def test_child_crashed_is_a_runtime_error():
    assert issubclass(ChildCrashed, RuntimeError)


def test_result_that_is_not_json_data_is_an_error_not_a_hang():
    # the child talks to the parent in JSON only (the parent never unpickles
    # what a process running uploaded code wrote): a result that is not JSON
    # data never reaches the parent, which raises a clear error, not waits
    start = time.monotonic()
    with pytest.raises(TypeError) as info:
        run_in_child(targets.return_unpicklable, (), timeout_s=30)
    assert "cannot be sent to the parent as JSON data" in str(info.value)
    assert time.monotonic() - start < 20


def test_child_runs_without_core_dumps():
    limits = run_in_child(targets.read_limits, ())
    assert tuple(limits["core"]) == (0, 0)
    assert limits["nofile"][0] <= 4096


def _parent_netns() -> str:
    return os.readlink("/proc/self/ns/net")


@pytest.mark.skipif(not os.path.exists("/proc/self/ns/net"), reason="needs Linux network namespaces")
def test_child_is_cut_off_the_network_where_the_os_allows_it(monkeypatch):
    monkeypatch.delenv("LEGO_SANDBOX_NETWORK", raising=False)
    view = run_in_child(targets.network_view, ())
    if view["netns"] == _parent_netns():
        pytest.skip("this machine does not permit a new network namespace (not root, no user namespaces)")
    assert view["interfaces"] == ["lo"]


@pytest.mark.skipif(not os.path.exists("/proc/self/ns/net"), reason="needs Linux network namespaces")
def test_lego_sandbox_network_1_keeps_the_network(monkeypatch):
    monkeypatch.setenv("LEGO_SANDBOX_NETWORK", "1")
    view = run_in_child(targets.network_view, ())
    assert view["netns"] == _parent_netns()


def test_timeout_applies_to_a_child_that_keeps_emitting_events():
    # a child that sends an event every 50 ms must still be stopped in time
    start = time.monotonic()
    with pytest.raises(ChildCrashed, match="time limit"):
        run_in_child(targets.chatty_sleeper, (2.0,), timeout_s=0.5)
    assert time.monotonic() - start < 1.8


def test_the_parent_never_unpickles_what_the_child_sends(tmp_path):
    # the child runs uploaded code: a pickle it writes on the pipe must not
    # run in the parent (it would create the file); it is refused as not JSON
    planted = tmp_path / "ran-in-the-parent"
    with pytest.raises(ChildCrashed, match="not JSON"):
        run_in_child(targets.send_a_pickle_bomb, (str(planted),), timeout_s=60)
    assert not planted.exists()


def test_a_message_over_the_size_limit_stops_the_child(monkeypatch):
    from lego_core.runtime import sandbox

    monkeypatch.setattr(sandbox, "MAX_MESSAGE_BYTES", 1 << 20)
    with pytest.raises(ChildCrashed, match="over 1 MiB"):
        run_in_child(targets.send_a_huge_event, (), timeout_s=60)


@pytest.mark.sandbox
@pytest.mark.parametrize("data, expected", [
    (b'{"kind": "event", "event": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested deeper than 100"),
    (b'{"kind": "event", "event": ' + b"[" * 101 + b"]" * 101 + b"}", "nested deeper than 100"),
    (b'{"kind": "done", "result": [' + b"[]," * 2_000_000 + b"[]]}", "more than 1,000,000 JSON values"),
], ids=["deep-beyond-recursion", "deep", "many-values"])
def test_a_message_too_deep_or_too_large_in_values_is_a_crash_of_that_run(data, expected):
    # bounded before parsing (values) and after (depth): a RecursionError
    # must not escape, and 2 million empty lists must never be built
    with pytest.raises(ChildCrashed, match=expected):
        run_in_child(targets.send_raw_message, (data,), timeout_s=60)


def test_a_message_of_many_commas_inside_strings_is_accepted():
    # strings are blanked before values are counted: text is not structure
    text = "a," * 1_500_000
    data = b'{"kind": "done", "result": {"text": "' + text.encode() + b'\\"\\\\, [{"}}'
    assert run_in_child(targets.send_raw_message, (data,), timeout_s=60) == {"text": text + '"\\, [{'}


def test_resource_limits_from_the_config_apply_in_the_child():
    from lego_core.config import SandboxLimits

    limits = SandboxLimits(memory_mb=8192, cpu_s=600, processes=2048, file_mb=64)
    seen = run_in_child(targets.read_all_limits, (), limits=limits.as_dict())
    assert seen == {"data": [8192 << 20] * 2, "cpu": [600, 600], "nproc": [2048, 2048], "fsize": [64 << 20] * 2}


def test_a_file_over_the_size_limit_fails_in_the_child(tmp_path):
    from lego_core.config import SandboxLimits

    with pytest.raises(Exception, match="File too large|SIGXFSZ|Errno 27"):
        run_in_child(targets.write_bytes, (str(tmp_path / "big"), 3 << 20), limits=SandboxLimits(file_mb=1).as_dict(), timeout_s=60)


def test_sandbox_limits_refuse_nonsense():
    from lego_core.config import SandboxLimits

    with pytest.raises(ValueError, match="memory_mb must be a positive whole number"):
        SandboxLimits(memory_mb=0)


def test_the_childs_output_reaches_the_parent_bounded_saying_how_much_was_cut(capfd):
    # an upload that printed 128 MB filled the worker's log: its first and last
    # 64 KiB are kept, with a line that says how much was cut between
    from lego_core.runtime import sandbox

    assert run_in_child(targets.print_a_lot, (16,), timeout_s=120) == 16
    out, err = capfd.readouterr()
    written = out + err
    assert len(written) <= sandbox.MAX_OUTPUT_HEAD + sandbox.MAX_OUTPUT_TAIL + 1000
    assert "FIRST-LINE" in written and written.rstrip().endswith("LAST-LINE")
    cut = 32 * (1 << 20) + len("FIRST-LINE\n\nLAST-LINE\n") - sandbox.MAX_OUTPUT_HEAD - sandbox.MAX_OUTPUT_TAIL
    assert f"[lego: {cut:,} bytes of the optimizer process's output cut here" in written


def test_a_quiet_childs_output_is_forwarded_whole(capfd):
    assert run_in_child(targets.print_a_lot, (0,), timeout_s=60) == 0
    out, err = capfd.readouterr()
    assert (out + err) == "FIRST-LINE\n\nLAST-LINE\n"
