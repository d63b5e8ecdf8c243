"""Turn a planned :class:`~nova_rdt.allocation.planner.Demand` into XML.

Shared by spawn-like paths (which extend Nova's config objects) and live
migration (which rewrites the source's XML for the destination).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence

from lxml import etree

from nova_rdt import naming
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import metadata as meta_mod
from nova_rdt.allocation import planner
from nova_rdt.allocation import spec
from nova_rdt.virt import config as rdt_config


def instance_cells(numa_topology) -> list[planner.GuestCell] | None:
    """Guest cells of an InstanceNUMATopology (None without one)."""
    if numa_topology is None or not numa_topology.cells:
        return None
    cells = []
    for i, cell in enumerate(numa_topology.cells):
        vcpus = set(getattr(cell, "cpuset", ()) or ()) | set(
            getattr(cell, "pcpuset", ()) or ())
        pinning = None
        if "cpu_pinning_raw" in cell and cell.cpu_pinning_raw:
            pinning = {int(v): frozenset([int(p)])
                       for v, p in cell.cpu_pinning_raw.items()}
        cells.append(planner.GuestCell(i, frozenset(vcpus), cell.id,
                                       pinning))
    return cells


def demand(request: spec.RdtRequest | None, flavor_vcpus: int,
           numa_topology, state: hoststate.HostRdtState,
           host_cells: Mapping[int, frozenset[int]],
           monitor_default: bool) -> planner.Demand:
    """Plan an instance on ``state``: one place for every path (build,
    live-migration claim, destination XML).  No request means a
    monitoring-only demand under ``[rdt] monitor_default``.  Whether a
    class's group can be made is the claim's to say (the planner, with
    the groups it may move), not this live state's."""
    return planner.demand(
        request or spec.RdtRequest((spec.NodeRequest(),), None, None),
        flavor_vcpus, instance_cells(numa_topology), state, host_cells,
        monitor_default)


def request_for(instance) -> spec.RdtRequest | None:
    """The instance's rdt: request; SpecError for a bad flavor."""
    flavor = instance.flavor
    nodes = 1
    if instance.numa_topology is not None and instance.numa_topology.cells:
        nodes = len(instance.numa_topology.cells)
    return spec.parse(flavor.extra_specs or {}, flavor.vcpus, nodes)


def tunes(d: planner.Demand, state: hoststate.HostRdtState
          ) -> tuple[list[rdt_config.LibvirtConfigGuestCacheTune],
                     list[rdt_config.LibvirtConfigGuestRdtMemoryTune]]:
    """One cachetune and one memorytune over the same vCPUs: one CLOS.

    libvirt merges a cachetune and a memorytune with equal vCPU sets into
    one resctrl group, and every covered vCPU takes its own socket's mask
    from that group, so a multi-socket guest still costs a single CLOS.
    """
    caches, mems = [], []
    if d.cache or d.monitor:
        ct = rdt_config.LibvirtConfigGuestCacheTune(d.vcpus)
        for cid, per in sorted(d.cache.items()):
            way = state.cache[cid].way_size
            for kind, ways in sorted(per.items()):
                ct.caches.append(rdt_config.LibvirtConfigGuestCacheTuneCache(
                    cid, 3, kind, ways * way // 1024))
        if d.monitor:
            ct.monitors.append(
                rdt_config.LibvirtConfigGuestRdtMonitor(d.vcpus, level=3))
        caches.append(ct)
    # libvirt 9.0 takes percent only; MBps values travel in the metadata.
    if d.mb and state.mb and state.mb.units == "percent":
        mt = rdt_config.LibvirtConfigGuestRdtMemoryTune(d.vcpus)
        for mid, value in sorted(d.mb.items()):
            mt.nodes.append(
                rdt_config.LibvirtConfigGuestMemoryTuneNode(mid, value))
        mems.append(mt)
    return caches, mems


def metadata(request: spec.RdtRequest | None, d: planner.Demand,
             state: hoststate.HostRdtState
             ) -> rdt_config.LibvirtConfigGuestMetaNovaRdt:
    meta = rdt_config.LibvirtConfigGuestMetaNovaRdt()
    meta.vcpus = set(d.vcpus)
    meta.monitor = d.monitor
    if request is not None:
        meta.pmd_share = request.pmd_share
        meta.rdt_class = request.rdt_class
        meta.slo = request.slo
    meta.cache = [(cid, kind, ways) for cid, per in sorted(d.cache.items())
                  for kind, ways in sorted(per.items())]
    unit = state.mb.units if state.mb else "percent"
    meta.mb = [(mid, value, unit) for mid, value in sorted(d.mb.items())]
    return meta


def read_metadata(xml: str) -> meta_mod.RdtMetadata | None:
    """nova-rdt's record in a domain XML (None: not nova-rdt's); raises
    MetadataError when it is not one this version reads."""
    dom = etree.fromstring(xml.encode())
    el = dom.find(f"metadata/{{{naming.METADATA_NS}}}instance")
    return None if el is None else meta_mod.RdtMetadata.parse_dom(el)


def rewrite_xml(xml: str, parts: Sequence, meta) -> str:
    """Replace the RDT parts of a domain XML (live migration)."""
    dom = etree.fromstring(xml.encode())
    rdt_config.strip_rdt(dom)
    if parts:
        cputune = dom.find("cputune")
        if cputune is None:
            cputune = etree.SubElement(dom, "cputune")
        for p in parts:
            cputune.append(p.format_dom())
    if meta is not None:
        md = dom.find("metadata")
        if md is None:
            md = etree.SubElement(dom, "metadata")
        md.append(meta.format_dom())
    return etree.tostring(dom, encoding="unicode", pretty_print=True)
