"""The way map, free ways and CLOS of one sample: pure."""

from __future__ import annotations

import dataclasses

from nova_rdt.exporter.sample import GroupSample
from nova_rdt.exporter.sample import HostSample
from nova_rdt.resctrl import cbm

# resctrl's cache resource names and the <cache type> libvirt calls them.
CACHE_TYPES = {"L3": "both", "L3CODE": "code", "L3DATA": "data",
               "L2": "both", "L2CODE": "code", "L2DATA": "data"}


def label(g: GroupSample) -> str:
    """What a person calls the group's owner."""
    i = g.identity
    if i.kind == "instance":
        return i.instance_name or g.name
    if i.kind == "class":
        return f"class {i.rdt_class}"
    return {"pmd": "OVS PMD", "host": "host (reserved)"}.get(i.kind, g.name)


@dataclasses.dataclass(frozen=True)
class CacheMap:
    resource: str
    cache_id: int
    ways: int
    holders: tuple[tuple[GroupSample, ...], ...]    # per way, low first
    free: int
    largest_free_run: int

    @property
    def cache_type(self) -> str:
        return CACHE_TYPES.get(self.resource, "both")


def cache_maps(s: HostSample) -> list[CacheMap]:
    out = []
    if s.caps is None:
        return out
    ctrl = [g for g in s.groups if g.ctrl]
    for res_name, res in sorted(s.caps.cache.items()):
        n = res.cbm_len
        for cid in sorted(res.domains):
            per_way: list[list[GroupSample]] = [[] for _ in range(n)]
            used = 0
            for g in ctrl:
                mask = g.schemata.get(res_name, {}).get(cid)
                if mask is None:
                    continue
                used |= mask
                for way in range(n):
                    if mask >> way & 1:
                        per_way[way].append(g)
            free = n - cbm.popcount(used & cbm.full_mask(n))
            out.append(CacheMap(res_name, cid, n,
                                tuple(tuple(h) for h in per_way), free,
                                cbm.largest_free_run(used, n)))
    return out


def clos_used(s: HostSample) -> int:
    """CLOSIDs in use, the root's included."""
    return sum(1 for g in s.groups if g.ctrl)
