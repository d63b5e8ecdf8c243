"""The RDT compute's nova-rdt exporter, read by the whitebox tests.

``/api/layout`` (the way map: each cache's ways and their owners, the
CLOS in use, each group's kind and instance) and ``/metrics`` (each
group's ways per cache and MB per node) say what resctrl holds, with no
SSH to the compute.
"""

from __future__ import annotations

import json
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


class Exporter:
    def __init__(self, url: str, timeout: float = 10.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path,
                                    timeout=self.timeout) as r:
            return r.read()

    def layout(self) -> dict:
        return json.loads(self._get("/api/layout"))

    def samples(self, name: str) -> list:
        """Every sample of metric ``name`` (the family name without a
        _total suffix), as prometheus_client parses them."""
        text = self._get("/metrics").decode()
        return [s for fam in text_string_to_metric_families(text)
                for s in fam.samples if s.name == name]

    def feature(self, feature: str) -> bool:
        return any(s.value == 1 for s in self.samples(
            "nova_rdt_feature_available")
            if s.labels.get("feature") == feature)

    def clos_used(self) -> int:
        return int(self.layout()["clos"]["used"])

    def total_ways(self) -> int:
        return max(c["ways"] for c in self.layout()["caches"])

    def instance_ways(self, uuid: str) -> dict[str, int]:
        """cache id -> L3 ways of the instance's own group."""
        return {s.labels["cache_id"]: int(s.value)
                for s in self.samples("nova_rdt_group_l3_ways")
                if s.labels.get("instance_uuid") == uuid}

    def instance_mb(self, uuid: str) -> dict[str, float]:
        """node -> the MB throttle (fraction) of the instance's group."""
        return {s.labels["node"]: s.value
                for s in self.samples("nova_rdt_group_mb_ratio")
                if s.labels.get("instance_uuid") == uuid}

    def wait_for(self, what, check, timeout: float = 60.0,
                 interval: float = 1.0):
        """``check()`` until truthy; its last value either way."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value or time.monotonic() > deadline:
                return value
            time.sleep(interval)


def way_sets(layout: dict) -> dict[str, dict[str, set[int]]]:
    """group -> cache ("L3:0", "L3DATA:1"...) -> the ways it holds
    there, from ``/api/layout``'s way map (L3 only)."""
    out: dict[str, dict[str, set[int]]] = {}
    for cache in layout.get("caches", []):
        if not cache["resource"].startswith("L3"):
            continue
        key = f"{cache['resource']}:{cache['cache_id']}"
        for cell in cache["cells"]:
            for owner in cell["owners"]:
                out.setdefault(owner["group"], {}).setdefault(
                    key, set()).add(cell["way"])
    return out


def _groups_of(layout: dict, uuid: str) -> list[str]:
    return [g["group"] for g in layout.get("groups", [])
            if g.get("instance_uuid") == uuid and g["kind"] == "instance"]


def _show(ways: dict[str, set[int]]) -> str:
    return "; ".join(f"{k}={sorted(v)}" for k, v in sorted(ways.items()))


def pmd_sharing_problems(layout: dict, sharer: str, sharer_ways: int,
                         neighbour: str,
                         neighbour_class: str | None = None) -> list[str]:
    """What is wrong, read from one ``/api/layout``, with a PMD-sharing
    server (``rdt:pmd_share=true``, ``sharer_ways`` ways) beside a
    neighbour on ways of its own: the sharer's group holds exactly its
    flavor's ways on every cache it is on, and shares ways with the PMD
    COS on the PMD cores' caches (where the PMD COS holds ways beyond
    the host's); the neighbour's group touches neither.  Empty: all
    holds.  ``neighbour_class``: the neighbour is a member of that
    ``rdt:class``, whose group is then the one looked at."""
    sets = way_sets(layout)
    problems = []

    def of_kind(kind):
        out: dict[str, set[int]] = {}
        for g in layout.get("groups", []):
            if g["kind"] == kind:
                for key, ways in sets.get(g["group"], {}).items():
                    out.setdefault(key, set()).update(ways)
        return out
    # On a cache whose CPUs run no PMD thread the PMD COS holds the
    # host's ways (a mask may not be empty): its own ways, beyond the
    # host's, are on the PMD cores' caches only.
    host = of_kind("host")
    pmd = {key: ways - host.get(key, set())
           for key, ways in of_kind("pmd").items()}
    pmd = {key: ways for key, ways in pmd.items() if ways}
    if not pmd:
        problems.append("the PMD COS holds no ways beyond the host's on "
                        "any cache")

    def one(uuid, what, rdt_class=None):
        groups = (_groups_of(layout, uuid) if rdt_class is None else
                  [g["group"] for g in layout.get("groups", [])
                   if g["kind"] == "class"
                   and g["group"].endswith("class-" + rdt_class)])
        if len(groups) != 1:
            problems.append(f"the {what} ({uuid}) has {len(groups)} "
                            f"groups of its own: {groups}")
            return groups[0] if groups else None, {}
        return groups[0], sets.get(groups[0], {})

    fgroup, fways = one(sharer, "PMD-sharing server")
    ngroup, nways = one(neighbour, "neighbour", neighbour_class)
    if fgroup and not fways:
        problems.append(f"the PMD-sharing server's group {fgroup} holds "
                        f"no L3 ways")
    for key, ways in sorted(fways.items()):
        if len(ways) != sharer_ways:
            problems.append(f"{fgroup} holds {len(ways)} ways on {key}, "
                            f"not its flavor's {sharer_ways}: {sorted(ways)}")
    for key, ways in sorted(pmd.items()):
        if not ways & fways.get(key, set()):
            problems.append(f"{fgroup} shares no way with the PMD COS on "
                            f"{key} (PMD {sorted(ways)}, "
                            f"{sorted(fways.get(key, ()))})")
    if ngroup and not nways:
        problems.append(f"the neighbour's group {ngroup} holds no L3 ways")
    for key, ways in sorted(nways.items()):
        for other, what in ((fways, fgroup), (pmd, "the PMD COS")):
            both = ways & other.get(key, set())
            if both:
                problems.append(f"the neighbour's group {ngroup} shares "
                                f"ways {sorted(both)} with {what} on {key}")
    if problems:
        problems.append(f"(sharer {_show(fways)}; PMD {_show(pmd)}; "
                        f"neighbour {_show(nways)})")
    return problems


# -- Moves between computes: both ends, each from its own /api/layout. --

def instance_groups(layout: dict, uuid: str) -> list[str]:
    """The groups of the instance ``uuid`` (control or monitor), by the
    owner the exporter resolved from the hook's records."""
    return sorted(g["group"] for g in layout.get("groups", [])
                  if g.get("instance_uuid") == uuid)


def _class_groups(layout: dict, rdt_class: str) -> list[dict]:
    return [g for g in layout.get("groups", []) if g["kind"] == "class"
            and g["group"].endswith("class-" + rdt_class)]


def placement_problems(layout: dict, uuid: str, ways: int | None = None,
                       rdt_class: str | None = None,
                       pmd_share: bool = False) -> list[str]:
    """What is wrong with the instance ``uuid`` on the host whose
    ``/api/layout`` is ``layout``.  Empty: all holds.

    ``ways`` (an ``rdt:l3_cache_ways`` flavor): exactly one group of its
    own, of kind instance, holding exactly ``ways`` ways on every L3
    cache (or CDP code/data cache) it holds any on, and holding some.
    ``pmd_share``: that group also shares a way with the PMD COS on
    each cache where the PMD COS holds ways beyond the host's.
    ``rdt_class`` (an ``rdt:class`` member): no group of its own, and
    the class group is there, holding L3 ways (a class group lives
    while a member does on that host).  Its ``tasks`` count is not
    read: the exporter counts only the tasks its PID namespace sees."""
    if not layout.get("available", True):
        return [f"the exporter of {layout.get('host')} has no RDT to "
                f"show: {layout.get('error')}"]
    sets = way_sets(layout)
    own = [g for g in layout.get("groups", [])
           if g.get("instance_uuid") == uuid]
    host = layout.get("host")
    problems = []
    if rdt_class is not None:
        if own:
            problems.append(f"class member {uuid} has groups of its own on "
                            f"{host}: {sorted(g['group'] for g in own)}")
        groups = _class_groups(layout, rdt_class)
        if len(groups) != 1:
            problems.append(f"{host} has {len(groups)} groups of class "
                            f"{rdt_class}: "
                            f"{[g['group'] for g in groups]}")
        for g in groups:
            if not sets.get(g["group"]):
                problems.append(f"the class group {g['group']} on {host} "
                                f"holds no L3 ways")
        return problems
    ctrl = [g for g in own if g["kind"] == "instance"
            and g["group"] in sets]
    if len(own) != 1 or len(ctrl) != 1:
        problems.append(f"instance {uuid} has {len(own)} groups on {host}, "
                        f"{len(ctrl)} of them holding ways; one of its "
                        f"own was expected: "
                        f"{sorted(g['group'] for g in own)}")
        if len(ctrl) != 1:
            return problems
    group = ctrl[0]["group"]
    held = sets.get(group, {})
    for key, got in sorted(held.items()):
        if ways is not None and len(got) != ways:
            problems.append(f"{group} holds {len(got)} ways on {key} of "
                            f"{host}, not its flavor's {ways}: "
                            f"{sorted(got)}")
    if pmd_share:
        def of_kind(kind):
            out: dict[str, set[int]] = {}
            for g in layout.get("groups", []):
                if g["kind"] == kind:
                    for key, w in sets.get(g["group"], {}).items():
                        out.setdefault(key, set()).update(w)
            return out
        base = of_kind("host")
        pmd = {k: w - base.get(k, set()) for k, w in of_kind("pmd").items()}
        pmd = {k: w for k, w in pmd.items() if w}
        if not pmd:
            problems.append(f"the PMD COS on {host} holds no ways beyond "
                            f"the host's on any cache")
        for key, w in sorted(pmd.items()):
            if not w & held.get(key, set()):
                problems.append(f"{group} shares no way with the PMD COS "
                                f"on {key} of {host} (PMD {sorted(w)}, "
                                f"{sorted(held.get(key, ()))})")
    if problems:
        problems.append(f"({group} on {host}: {_show(held)})")
    return problems


def leftover_problems(layout: dict, uuid: str,
                      groups: tuple[str, ...] | list[str] = ()) -> list[str]:
    """What of the instance ``uuid`` is still on the host whose
    ``/api/layout`` is ``layout``, after it left: a group the exporter
    names as its own, or one of ``groups`` (the names its groups had
    there before it left: a group whose record is gone shows as
    foreign, not as the instance's), or a way any of those hold.
    Empty: nothing is left."""
    host = layout.get("host")
    names = set(groups)
    problems = []
    for g in layout.get("groups", []):
        if g.get("instance_uuid") == uuid or g["group"] in names:
            problems.append(f"{host} still has group {g['group']} (kind "
                            f"{g['kind']}) of instance {uuid}")
            names.add(g["group"])
    for group, held in sorted(way_sets(layout).items()):
        if group in names:
            problems.append(f"{group} still holds ways on {host}: "
                            f"{_show(held)}")
    return problems
