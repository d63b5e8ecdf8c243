"""A host's RDT state as the scheduler and the driver see it.

The driver builds a :class:`HostRdtState` from resctrl (and its own pending
claims), publishes it in the compute node's ``stats`` as one JSON string,
and the scheduler filter reads it back.  Everything here is pure data, so
the filter never touches a filesystem and parses a host's state once per
stats update.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm

STATS_KEY = "rdt"
STATS_VERSION = 1

# Cache types as libvirt names them; a CDP host has code and data masks.
BOTH = "both"
CDP_TYPES = ("code", "data")
_RESOURCE_OF_TYPE = {BOTH: "L3", "code": "L3CODE", "data": "L3DATA"}

TRAIT_CAT = "CUSTOM_RDT_L3_CAT"
TRAIT_CDP = "CUSTOM_RDT_L3_CDP"
TRAIT_MBA = "CUSTOM_RDT_MBA"
TRAIT_MBA_MBPS = "CUSTOM_RDT_MBA_MBPS"
TRAIT_CMT = "CUSTOM_RDT_CMT"
TRAIT_MBM = "CUSTOM_RDT_MBM"
ALL_TRAITS = (TRAIT_CAT, TRAIT_CDP, TRAIT_MBA, TRAIT_MBA_MBPS, TRAIT_CMT,
              TRAIT_MBM)


@dataclasses.dataclass(frozen=True)
class CacheIdState:
    """One L3 cache instance (a socket, usually): its ways and who holds them."""

    id: int
    cpus: frozenset[int]
    cbm_len: int
    way_size: int                 # bytes; libvirt's "granularity"
    min_ways: int
    used: Mapping[str, int]       # type ("both"/"code"/"data") -> mask

    def free_mask(self, kind: str) -> int:
        return ~self.used[kind] & cbm.full_mask(self.cbm_len)

    def largest_free_run(self, kind: str) -> int:
        return cbm.largest_free_run(self.used[kind], self.cbm_len)


@dataclasses.dataclass(frozen=True)
class MbState:
    units: str                    # percent, MBps or 1/8GBps
    gran: int
    min: int
    max: int | None
    ids: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class HostRdtState:
    cache: Mapping[int, CacheIdState]
    cdp: bool
    clos_free: int
    mb: MbState | None
    monitoring: frozenset[str]    # llc_occupancy, mbm_total_bytes, ...
    rmids: int = 0

    @property
    def cache_types(self) -> tuple[str, ...]:
        return CDP_TYPES if self.cdp else (BOTH,)

    def traits(self) -> set[str]:
        t = set()
        if self.cache:
            t.add(TRAIT_CAT)
        if self.cdp:
            t.add(TRAIT_CDP)
        if self.mb:
            t.add(TRAIT_MBA)
            if self.mb.units == caps_mod.UNITS_MBPS:
                t.add(TRAIT_MBA_MBPS)
        if "llc_occupancy" in self.monitoring:
            t.add(TRAIT_CMT)
        if self.monitoring & {"mbm_total_bytes", "mbm_local_bytes"}:
            t.add(TRAIT_MBM)
        return t

    def with_allocation(self, masks: Mapping[int, Mapping[str, int]],
                        clos: int = 1) -> HostRdtState:
        """This state after an allocation of ``masks`` and ``clos`` CLOS."""
        cache = dict(self.cache)
        for cid, by_type in masks.items():
            c = cache[cid]
            used = dict(c.used)
            for kind, mask in by_type.items():
                used[kind] |= mask
            cache[cid] = dataclasses.replace(c, used=used)
        return dataclasses.replace(self, cache=cache,
                                   clos_free=self.clos_free - clos)

    # -- stats encoding -------------------------------------------------

    def to_stats(self) -> dict[str, str]:
        doc = {
            "v": STATS_VERSION,
            "cdp": self.cdp,
            "clos_free": self.clos_free,
            "rmids": self.rmids,
            "mon": sorted(self.monitoring),
            "l3": {str(c.id): {
                "cpus": caps_mod.format_cpu_list(c.cpus),
                "len": c.cbm_len, "way": c.way_size, "min": c.min_ways,
                "used": {k: f"{m:x}" for k, m in sorted(c.used.items())},
            } for c in self.cache.values()},
            "mb": dataclasses.asdict(self.mb) if self.mb else None,
        }
        return {STATS_KEY: json.dumps(doc, sort_keys=True,
                                      separators=(",", ":"))}

    @classmethod
    def from_stats(cls, stats: Mapping[str, str] | None
                   ) -> HostRdtState | None:
        """The state a compute node published, or None for a plain host.

        A document of another version, or one that does not parse, reads
        as "no RDT": the filter then refuses RDT requests for that host
        instead of guessing.
        """
        raw = (stats or {}).get(STATS_KEY)
        if not raw:
            return None
        try:
            doc = json.loads(raw)
            if doc.get("v") != STATS_VERSION:
                return None
            cache = {int(cid): CacheIdState(
                id=int(cid),
                cpus=frozenset(caps_mod.parse_cpu_list(c["cpus"])),
                cbm_len=int(c["len"]), way_size=int(c["way"]),
                min_ways=int(c["min"]),
                used={k: int(m, 16) for k, m in c["used"].items()})
                for cid, c in doc["l3"].items()}
            mb = doc.get("mb")
            return cls(cache=cache, cdp=bool(doc["cdp"]),
                       clos_free=int(doc["clos_free"]),
                       mb=MbState(mb["units"], int(mb["gran"]),
                                  int(mb["min"]), mb["max"],
                                  tuple(mb["ids"])) if mb else None,
                       monitoring=frozenset(doc.get("mon", ())),
                       rmids=int(doc.get("rmids", 0)))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def from_resctrl(view, cache_cpus: Mapping[int, frozenset[int]] | None = None,
                 way_sizes: Mapping[int, int] | None = None) -> HostRdtState:
    """Build the state from a :class:`~nova_rdt.resctrl.hostview.HostView`.

    ``cache_cpus`` and ``way_sizes`` override what resctrl's sysfs topology
    says, so the driver can use libvirt's own view (libvirt validates sizes
    against its granularity, not ours).  Used masks are libvirt's: the
    union of every group's mask, the root's included.
    """
    caps = view.caps
    cdp = caps.cdp
    cache: dict[int, CacheIdState] = {}
    l3 = caps.cache.get("L3CODE" if cdp else "L3")
    if l3 is not None:
        for dom_id, dom in sorted(l3.domains.items()):
            ws = (way_sizes or {}).get(dom_id) or l3.way_size(dom_id) or 0
            cpus = (cache_cpus or {}).get(dom_id, frozenset(dom.cpus))
            used = {kind: view.used_mask(_RESOURCE_OF_TYPE[kind], dom_id)
                    for kind in (CDP_TYPES if cdp else (BOTH,))}
            cache[dom_id] = CacheIdState(
                id=dom_id, cpus=frozenset(cpus), cbm_len=l3.cbm_len,
                way_size=ws, min_ways=max(l3.min_cbm_bits, 1), used=used)
    mb = None
    bw = caps.bandwidth.get("MB")
    if bw is not None:
        mb = MbState(units=bw.units, gran=bw.bandwidth_gran,
                     min=bw.min_bandwidth, max=bw.max_bandwidth,
                     ids=tuple(bw.domain_ids))
    ctrl_groups = sum(1 for g in view.groups
                      if g.kind == "ctrl" and g.name != "/")
    mon = caps.monitoring.get("L3_MON") or caps.monitoring.get("L3")
    return HostRdtState(
        cache=cache, cdp=cdp,
        clos_free=max(caps.usable_clos - ctrl_groups, 0),
        mb=mb,
        monitoring=frozenset(mon.features) if mon else frozenset(),
        rmids=mon.num_rmids if mon else 0)
