"""Cache banks and MBA nodes from libvirt's host capabilities XML.

libvirt validates ``<cachetune>`` sizes against *its* granularity and
cache ids, so the driver plans with what libvirt reports, not only with
what resctrl says.  Nova's LibvirtConfigCaps does not parse these parts.
"""

from __future__ import annotations

import dataclasses

from lxml import etree

from nova_rdt.resctrl import capabilities as caps_mod

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


@dataclasses.dataclass(frozen=True)
class CacheBank:
    id: int
    level: int
    type: str
    size: int                       # bytes
    cpus: frozenset[int]
    granularity: int | None         # bytes per way, None: no CAT control
    min: int | None                 # bytes
    max_allocs: int | None
    control_types: tuple[str, ...]  # both, or code+data under CDP


@dataclasses.dataclass(frozen=True)
class MbNode:
    id: int
    cpus: frozenset[int]
    granularity: int
    min: int
    max_allocs: int | None


@dataclasses.dataclass(frozen=True)
class LibvirtRdtCaps:
    banks: dict[int, CacheBank]          # L3 banks by id
    mb_nodes: dict[int, MbNode]

    @property
    def cache_cpus(self) -> dict[int, frozenset[int]]:
        return {b.id: b.cpus for b in self.banks.values()}

    @property
    def way_sizes(self) -> dict[int, int]:
        return {b.id: b.granularity for b in self.banks.values()
                if b.granularity}


def parse(caps_xml: str) -> LibvirtRdtCaps:
    root = etree.fromstring(caps_xml.encode())
    banks: dict[int, CacheBank] = {}
    for bank in root.iterfind("./host/cache/bank"):
        if bank.get("level") != "3":
            continue
        unit = _UNITS.get(bank.get("unit", "B"), 1)
        controls = bank.findall("control")
        gran = mn = maxa = None
        if controls:
            c = controls[0]
            cunit = _UNITS.get(c.get("unit", "B"), 1)
            gran = int(c.get("granularity")) * cunit
            mn = int(c.get("min", c.get("granularity"))) * cunit
            maxa = int(c.get("maxAllocs")) if c.get("maxAllocs") else None
        bid = int(bank.get("id"))
        banks[bid] = CacheBank(
            id=bid, level=3, type=bank.get("type", "both"),
            size=int(bank.get("size")) * unit,
            cpus=frozenset(caps_mod.parse_cpu_list(bank.get("cpus", ""))),
            granularity=gran, min=mn, max_allocs=maxa,
            control_types=tuple(c.get("type", "both") for c in controls))
    nodes: dict[int, MbNode] = {}
    for node in root.iterfind("./host/memory_bandwidth/node"):
        c = node.find("control")
        if c is None:
            continue
        nid = int(node.get("id"))
        nodes[nid] = MbNode(
            id=nid,
            cpus=frozenset(caps_mod.parse_cpu_list(node.get("cpus", ""))),
            granularity=int(c.get("granularity")),
            min=int(c.get("min", c.get("granularity"))),
            max_allocs=int(c.get("maxAllocs")) if c.get("maxAllocs")
            else None)
    return LibvirtRdtCaps(banks, nodes)
