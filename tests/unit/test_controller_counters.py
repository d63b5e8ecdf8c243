"""The emulator's MBM follows the real CPU time of each group's tasks, so
the controller sees a busy neighbour high and an idle one low."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from nova_rdt.emulator import counters
from nova_rdt.emulator import profiles
from nova_rdt.emulator.kernel import ResctrlKernel


@pytest.fixture
def procs():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c",
                             "import time; time.sleep(120)"])
    yield busy, idle
    for p in (busy, idle):
        p.kill()
        p.wait()


def read(k, group, event="mbm_total_bytes"):
    return sum(int(k.read(f"{group}/mon_data/mon_L3_0{d}/{event}"))
               for d in (0, 1))


def test_cpu_seconds_reads_proc():
    start, cpu = counters.cpu_seconds("/proc", os.getpid())
    assert start > 0 and cpu > 0
    assert counters.cpu_seconds("/proc", 1 << 30) is None


def test_busy_group_reads_high_idle_group_low(procs):
    busy, idle = procs
    k = ResctrlKernel(profiles.get("gold-6252"), kernel="6.1")
    me = os.getpid()
    for name, p in (("busy", busy), ("idle", idle)):
        k.mkdir(name)
        k.write(f"{name}/tasks", f"{p.pid}\n".encode(), caller=me)
    # First sight is a baseline only, and ticks closer than TICK_MIN
    # are skipped: see both tasks once, a tick apart, before measuring.
    read(k, "busy"), read(k, "idle")
    time.sleep(0.05)
    read(k, "busy"), read(k, "idle")
    time.sleep(0.05)
    b0, i0 = read(k, "busy"), read(k, "idle")
    t0 = time.monotonic()
    cpu0 = counters.cpu_seconds("/proc", busy.pid)[1]
    time.sleep(1.0)
    b1, i1 = read(k, "busy"), read(k, "idle")
    cpu1 = counters.cpu_seconds("/proc", busy.pid)[1]
    dt = time.monotonic() - t0
    busy_rate, idle_rate = (b1 - b0) / dt, (i1 - i0) / dt
    # The busy one moved what its CPU time says (the machine is shared,
    # so it may have had less than a whole core); the idle one nothing.
    expected = (cpu1 - cpu0) * counters.TASK_BANDWIDTH / dt
    # Not an absolute rate: on a loaded 2-core machine the busy task may
    # get little CPU; what it got is what must be counted.
    assert cpu1 > cpu0
    assert 0.5 * expected < busy_rate < 1.5 * expected + 2 ** 20
    assert idle_rate < 0.02 * counters.TASK_BANDWIDTH
    assert read(k, "busy", "llc_occupancy") > \
        read(k, "idle", "llc_occupancy")


def test_throttle_scales_the_counted_bandwidth_only(procs):
    busy, _idle = procs
    k = ResctrlKernel(profiles.get("gold-6252"), kernel="6.1")
    k.mkdir("g")
    k.write("g/schemata", b"MB:0=10;1=10\n")
    k.write("g/tasks", f"{busy.pid}\n".encode(), caller=os.getpid())
    read(k, "g")
    b0 = read(k, "g")
    cpu0 = counters.cpu_seconds("/proc", busy.pid)[1]
    time.sleep(0.6)
    b1 = read(k, "g")
    cpu1 = counters.cpu_seconds("/proc", busy.pid)[1]
    # MB 10% counts a tenth of the traffic, but the task itself kept
    # running as fast as before: throttling has no effect on it here.
    used = cpu1 - cpu0
    assert used > 0.1
    assert (b1 - b0) < 0.15 * used * counters.TASK_BANDWIDTH + 2 ** 20
