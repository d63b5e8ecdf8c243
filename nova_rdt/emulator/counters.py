"""Monitoring counters, simulated from the tasks in each group.

There is no hardware to count, so each busy thread adds bandwidth (scaled
by its control group's MB setting) and pulls occupancy towards a share of
the group's ways.  rdtgroup_mondata_show() sums a control group with its
monitor groups and prints the count rounded to the occupancy scale.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

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


def tick(k: ResctrlKernel) -> None:
    """Advance the simulated counters to now, at the current activity."""
    now = k.clock()
    dt = now - k.last_tick
    if dt < TICK_MIN:
        return
    k.last_tick = now
    busy: dict[int, int] = {}
    for tid, (tg, _) in list(k.assigned.items()):
        if not k.tasks.alive(tid):
            continue
        busy[tg.rmid] = busy.get(tg.rmid, 0) + 1
    ways = k.profile.l3.size // k.profile.l3.cbm_len
    settle = 1 - math.exp(-dt / OCCUPANCY_TAU)
    for g in k.rmid_groups():
        n = busy.get(g.rmid, 0)
        for d in k.domains:
            c = k.counters.setdefault((g.rmid, d), Counter())
            share = n / len(k.domains)
            rate = share * TASK_BANDWIDTH * _bw_factor(k, g.ctrl, d)
            c.total += rate * dt
            c.local += rate * dt * LOCAL_FRACTION
            cap = ways * _cache_ways(k, g.ctrl, d)
            target = min(cap, share * TASK_FOOTPRINT)
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
