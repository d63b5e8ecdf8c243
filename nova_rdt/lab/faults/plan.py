"""Which runs the faults scenario makes: pure.

A run is one (fault, point, operation).  Failpoint faults take their
points from :data:`nova_rdt.failpoints.REGISTRY` (a point added there is
walked without a change here); the others have their own steps.  Each
failpoint is reached by one operation the lab can perform, chosen from
the name's component; a point no lab operation reaches (live migration
needs two computes with real libvirtds, this lab has one) is listed as
not reached, with why.
"""

from __future__ import annotations

import dataclasses

FAILPOINT_FAULTS = ("failpoint-raise", "failpoint-exit", "compute-restart")
HOST_FAULTS = ("libvirtd-restart", "resctrl-lost", "emulator-killed",
               "enospc", "readonly")
FAULTS = FAILPOINT_FAULTS + HOST_FAULTS

#: The lab's operations.
OPERATIONS = ("spawn", "delete", "pmd-update", "class-update", "reconcile")

#: Steps of the faults that are not failpoints: point -> operation.
HOST_STEPS = {
    "libvirtd-restart": (("vms-running", "reconcile"),
                         ("during-spawn", "spawn")),
    "resctrl-lost": (("vms-running", "reconcile"),
                     ("before-spawn", "spawn")),
    "emulator-killed": (("vms-running", "reconcile"),
                        ("during-delete", "delete")),
    "enospc": (("record-write", "spawn"), ("class-record", "class-update")),
    "readonly": (("record-write", "spawn"), ("record-remove", "delete")),
}

#: Where each component's failpoints sit, and so how they are reached.
#: (component, operation, process): process is where the point fires:
#: "compute" (nova-compute, in this process), "hook" (under libvirtd),
#: "cli" (``nova-rdt reconcile``/``pmd sync``).
_BY_NAME = {
    "driver.after_claim": ("spawn", "compute"),
    "driver.after_define": ("spawn", "compute"),
    "agent.between_schemata_and_record": ("spawn", "hook"),
    "agent.after_record": ("spawn", "hook"),
    "agent.release_before_record": ("delete", "hook"),
    "agent.pmd_update": ("pmd-update", "cli"),
    "agent.pmd_cpus": ("pmd-update", "cli"),
    "agent.class_update": ("class-update", "hook"),
    "agent.class_join": ("class-update", "hook"),
    "records.write": ("spawn", "hook"),
    "records.rename": ("spawn", "hook"),
    "records.remove": ("delete", "hook"),
    "reconcile.remove": ("reconcile", "cli"),
    "reconcile.drop_record": ("reconcile", "cli"),
}
_BY_COMPONENT = {
    "driver": ("spawn", "compute"),
    "agent": ("spawn", "hook"),
    "hook": ("spawn", "hook"),
    "records": ("spawn", "hook"),
    "reconcile": ("reconcile", "cli"),
}
NOT_REACHED = {
    "migration": "live migration needs a second compute with its own "
                 "real libvirtd; the lab has one (Nova's functional tests "
                 "cover these points)",
}

#: Single points no lab operation reaches -> why.
NOT_REACHED_POINTS = {
    "driver.before_enforce": "the lab's Nova drives a stand-in libvirt "
                             "and the real libvirtd starts each domain "
                             "later, so the hook writes the decided masks "
                             "there (agent.write_decided); Nova's "
                             "functional tests cover this point",
}


@dataclasses.dataclass(frozen=True)
class Run:
    fault: str
    point: str
    operation: str
    #: where a failpoint fires: compute, hook or cli ("" for host faults).
    process: str = ""


def reach(point: str) -> tuple[str, str] | None:
    """(operation, process) reaching a failpoint, or None."""
    if point in NOT_REACHED_POINTS:
        return None
    if point in _BY_NAME:
        return _BY_NAME[point]
    return _BY_COMPONENT.get(point.split(".", 1)[0])


def not_reached(registry) -> dict[str, str]:
    """Failpoints no lab operation reaches -> why."""
    out = {}
    for point in sorted(registry):
        if reach(point) is None:
            comp = point.split(".", 1)[0]
            out[point] = NOT_REACHED_POINTS.get(point) or NOT_REACHED.get(
                comp, f"no lab operation reaches component {comp!r}")
    return out


#: --short: failpoints walked by every failpoint fault, one of each
#: process at least, and the first step of each host fault.
SHORT_POINTS_PER_FAULT = {"failpoint-raise": 7,
                          "failpoint-exit": 3, "compute-restart": 3}


def runs(registry, short: bool = False) -> list[Run]:
    """Every run, in an order that keeps set-ups cheap (failpoints
    first, the faults that wipe the host last)."""
    reached = [(p, *reach(p)) for p in sorted(registry) if reach(p)]
    out = []
    for i, fault in enumerate(FAILPOINT_FAULTS):
        pts = reached
        if short and SHORT_POINTS_PER_FAULT[fault] is not None:
            pts = _spread(reached, SHORT_POINTS_PER_FAULT[fault], 5 * i)
        out += [Run(fault, p, op, proc) for p, op, proc in pts]
    order = ("enospc", "readonly", "libvirtd-restart", "emulator-killed",
             "resctrl-lost")
    for fault in order:
        steps = HOST_STEPS[fault]
        out += [Run(fault, p, op) for p, op in steps]
    return out


def _spread(points, n: int, offset: int = 0):
    """``n`` points: one per process (always, even past ``n``), then new
    operations, then any; each fault starts ``offset`` points further,
    so that together the faults walk more of the registry."""
    if points:
        k = offset % len(points)
        points = points[k:] + points[:k]
    chosen: list = []
    for p in points:
        if p[2] not in {c[2] for c in chosen}:
            chosen.append(p)
    for p in points:
        if len(chosen) >= n:
            break
        if p[1] not in {c[1] for c in chosen}:
            chosen.append(p)
    for p in points:
        if len(chosen) >= n:
            break
        if p not in chosen:
            chosen.append(p)
    return sorted(chosen)


def totals(results: list[dict]) -> dict:
    """The summary's totals over its runs."""
    pairs = {(r["fault"], r["point"]) for r in results}
    times = [r["seconds_to_converge"] for r in results
             if r.get("seconds_to_converge") is not None]
    return {
        "runs": len(results),
        "distinct_pairs": len(pairs),
        "faults": sorted({r["fault"] for r in results}),
        "converged": sum(1 for r in results if r["converged"]),
        "not_converged": sum(1 for r in results if not r["converged"]),
        "leaked_groups": sum(len(r["leaked_groups"]) for r in results),
        "leaked_claims": sum(len(r["leaked_claims"]) for r in results),
        "leaked_records": sum(len(r["leaked_records"]) for r in results),
        "foreign_touched": sum(1 for r in results if r["foreign_touched"]),
        "pmd_mask_invalid": sum(1 for r in results
                                if not r["pmd_mask_valid"]),
        "max_seconds_to_converge": max(times) if times else None,
    }
