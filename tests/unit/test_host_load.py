"""lego_core.runtime.host_load: the load average and the CPUs' busy share while a timing runs."""
import os
import time

import pytest

from lego_core.runtime import host_load

WINDOW_KEYS = {"load_avg_1m", "load_avg_1m_before", "load_avg_1m_after", "cpus", "cpus_usable", "busy", "window_s",
               "cpu_busy_fraction", "others_cpu_busy_fraction", "steal_fraction", "timing_cpus"}


def _stat_line(user, nice, system, idle, iowait, irq=0, softirq=0, steal=0, guest=0, guest_nice=0):
    return f"cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} {guest} {guest_nice}\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 12345\n"


def test_sample_says_load_cpus_and_load_per_cpu():
    now = host_load.sample()
    assert set(now) == {"load_avg_1m", "cpus", "busy"}
    assert now["cpus"] == os.cpu_count() and now["cpus"] >= 1
    assert now["load_avg_1m"] >= 0.0 and now["busy"] == pytest.approx(now["load_avg_1m"] / now["cpus"])


def test_current_cpu_is_one_this_process_may_run_on():
    cpu = host_load.current_cpu()
    if cpu is None:
        pytest.skip("no /proc/thread-self here")
    assert cpu in os.sched_getaffinity(0)


def test_cpu_jiffies_reads_the_aggregate_line(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(_stat_line(100, 10, 50, 800, 40, 5, 5, 0, 30, 0))
    # total = user..steal (guest is inside user); busy = total - idle - iowait
    assert host_load.cpu_jiffies(str(stat)) == (170, 1010)
    stat.write_text("intr 1 2 3\n")
    assert host_load.cpu_jiffies(str(stat)) is None
    assert host_load.cpu_jiffies(str(tmp_path / "missing")) is None


def test_watch_reports_the_busy_share_of_the_window(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(_stat_line(1000, 0, 0, 9000, 0))
    with host_load.watch(str(stat)) as window:
        assert window == {}  # filled when the block ends
        # 1000 ticks of all CPUs passed, 300 of them busy (150 user, 100 system, 50 stolen), 100 in iowait
        stat.write_text(_stat_line(1150, 0, 100, 9600, 100, steal=50))
    assert set(window) == WINDOW_KEYS
    assert window["cpu_busy_fraction"] == pytest.approx(0.3) and window["steal_fraction"] == pytest.approx(0.05)
    # this process used next to no CPU in the block: the others took nearly all of it
    assert 0.25 < window["others_cpu_busy_fraction"] <= 0.3
    assert window["window_s"] >= 0.0 and window["cpus"] == os.cpu_count()
    loads = [window["load_avg_1m_before"], window["load_avg_1m_after"]]
    assert window["load_avg_1m"] == max(loads) and window["busy"] == pytest.approx(max(loads) / window["cpus"])


def test_watch_on_the_real_proc_stat_sees_this_process_working():
    if host_load.cpu_jiffies() is None:
        pytest.skip("no /proc/stat here")
    with host_load.watch() as window:
        end = time.monotonic() + 0.3
        while time.monotonic() < end:  # one CPU kept busy for 0.3 s
            pass
    assert 0.3 <= window["window_s"] < 5.0
    assert window["cpu_busy_fraction"] is not None and 0.0 < window["cpu_busy_fraction"] <= 1.0
    assert 0.0 <= window["others_cpu_busy_fraction"] <= window["cpu_busy_fraction"]
    assert window["timing_cpus"] and set(window["timing_cpus"]) <= os.sched_getaffinity(0)


def test_watch_without_proc_stat_still_gives_the_load_average(tmp_path):
    with host_load.watch(str(tmp_path / "missing")) as window:
        pass
    assert window["cpu_busy_fraction"] is None and window["others_cpu_busy_fraction"] is None and window["steal_fraction"] is None
    assert window["load_avg_1m"] is not None and window["busy"] is not None


def test_watch_fills_the_window_when_the_block_raises(tmp_path):
    with pytest.raises(RuntimeError):
        with host_load.watch(str(tmp_path / "missing")) as window:
            raise RuntimeError("timing failed")
    assert set(window) == WINDOW_KEYS
