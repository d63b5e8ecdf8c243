"""Monitoring counters, modelled from the real CPU time of each group's tasks.

There is no hardware to count.  Each thread in a group adds memory
traffic in proportion to the CPU time it really used since the last tick
(``utime + stime`` from ``/proc/<tid>/stat``): a thread that ran the
whole interval adds ``TASK_BANDWIDTH`` bytes/s, an idle one nothing.  So
a busy neighbour (STREAM, memtester, a spinning vCPU) reads high and an
idle one low, and a controller reading these counters sees real activity.
The traffic is then scaled by the group's MB setting, and occupancy is
pulled towards a share of the group's ways.

This is a model: the MB setting changes only the *counted* bandwidth.
Throttling has no effect on the tasks here, which run as fast as they
would without it; on this machine the controller's decisions show in the
schemata and in these counters, never in the workloads' speed.

A task space that cannot tell CPU time (the unit tests' model) counts
every live thread as busy.  rdtgroup_mondata_show() sums a control group
with its monitor groups and prints the count rounded to the occupancy
scale.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING
import weakref

from nova_rdt.emulator.state import MON_SCALE
from nova_rdt.emulator.state import Counter
from nova_rdt.emulator.state import Group

if TYPE_CHECKING:
    from nova_rdt.emulator.kernel import ResctrlKernel

# What one busy thread does to each counter.
TASK_BANDWIDTH = 256 * 1024 * 1024      # bytes/s of memory traffic
TASK_FOOTPRINT = 4 * 1024 * 1024        # bytes of LLC it wants
LOCAL_FRACTION = 0.75
OCCUPANCY_TAU = 0.5                     # seconds to settle 63% of the way
# Counters advance in steps of at least this much time: a scrape reading
# hundreds of counters then ticks a few times, not once per file.
TICK_MIN = 0.005


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# Per kernel: tid -> (thread start, CPU seconds at the last tick).
_cpu_seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cpu_seconds(proc: str, tid: int) -> tuple[int, float] | None:
    """(start time, utime + stime in seconds) of thread ``tid``, or None
    once it is gone.  /proc/<tid>/stat answers for any thread id."""
    try:
        with open(f"{proc}/{tid}/stat", "rb") as f:
            # After the parenthesised comm (which may hold spaces and
            # parentheses): state is field 3, utime 14, stime 15,
            # starttime 22.
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[19]), (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def busy_seconds(k: ResctrlKernel, dt: float) -> dict[int, float]:
    """Per RMID: CPU seconds its tasks used in the last ``dt`` seconds.

    From /proc when the kernel's task space is the host's; a model task
    space without CPU times counts each live thread as busy for ``dt``.
    The first sight of a thread counts nothing (its earlier CPU time was
    spent elsewhere).
    """
    proc = getattr(k.tasks, "proc", None)
    seen = _cpu_seen.setdefault(k, {}) if proc else None
    busy: dict[int, float] = {}
    live = set()
    for tid, (tg, _) in list(k.assigned.items()):
        if proc is None or seen is None:
            if k.tasks.alive(tid):
                busy[tg.rmid] = busy.get(tg.rmid, 0.0) + dt
            continue
        now = cpu_seconds(proc, tid)
        if now is None:
            continue
        live.add(tid)
        before = seen.get(tid)
        seen[tid] = now
        if before is None or before[0] != now[0]:
            continue        # new, or a reused tid: no interval yet
        used = min(max(now[1] - before[1], 0.0), dt)
        busy[tg.rmid] = busy.get(tg.rmid, 0.0) + used
    if seen is not None:
        for tid in [t for t in seen if t not in live]:
            del seen[tid]
    return busy


def tick(k: ResctrlKernel) -> None:
    """Advance the modelled counters to now, at the current activity."""
    now = k.clock()
    dt = now - k.last_tick
    if dt < TICK_MIN:
        return
    k.last_tick = now
    busy = busy_seconds(k, dt)
    ways = k.profile.l3.size // k.profile.l3.cbm_len
    settle = 1 - math.exp(-dt / OCCUPANCY_TAU)
    for g in k.rmid_groups():
        # Tasks are spread evenly over the domains: CPU seconds per domain.
        used = busy.get(g.rmid, 0.0) / len(k.domains)
        for d in k.domains:
            c = k.counters.setdefault((g.rmid, d), Counter())
            moved = used * TASK_BANDWIDTH * _bw_factor(k, g.ctrl, d)
            c.total += moved
            c.local += moved * LOCAL_FRACTION
            cap = ways * _cache_ways(k, g.ctrl, d)
            target = min(cap, used / dt * TASK_FOOTPRINT)
            c.occupancy += (target - c.occupancy) * settle


def _bw_factor(k: ResctrlKernel, g: Group, d: int) -> float:
    mb = next((s for s in k.schemas if not s.cache), None)
    vals = k.ctrl_val.get((mb.name, g.closid)) if mb else None
    if not vals:
        return 1.0
    v = vals[d]
    if k.profile.mba_mbps:
        return min(1.0, v * 1024 * 1024 / TASK_BANDWIDTH)
    return min(1.0, v / mb.max_bw) if mb.max_bw else 1.0


def _cache_ways(k: ResctrlKernel, g: Group, d: int) -> int:
    mask = 0
    for s in k.schemas:
        if s.cache:
            mask |= k.ctrl_val.get((s.name, g.closid), {}).get(d, 0)
    return bin(mask).count("1")


def show_event(k: ResctrlKernel, g: Group, dom: int, event: str) -> str:
    """rdtgroup_mondata_show(): a control group sums its monitor groups."""
    tick(k)
    if (k.path_of(g), dom, event) in k.unavailable:
        return "Unavailable\n"
    members = [g] + ([] if g.is_mon else list(g.mon.values()))
    total = 0
    for m in members:
        c = k.counters.get((m.rmid, dom), Counter())
        total += int({"llc_occupancy": c.occupancy,
                      "mbm_total_bytes": c.total,
                      "mbm_local_bytes": c.local}[event])
    return f"{total // MON_SCALE * MON_SCALE}\n"
