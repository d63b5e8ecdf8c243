"""Allocation planning: from an ``rdt:`` request to ways per cache id.

Pure logic shared by the compute's claim (:mod:`nova_rdt.virt`) and the
scheduler, which runs that same claim on what the compute published
(:mod:`nova_rdt.scheduler.claim`): :func:`demand` turns a request into
ways and MB per cache id for a host and a guest placement; where they go
is the placement solver's to say (:mod:`nova_rdt.allocation.placement`).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses

from nova_rdt import exception
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import spec
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm


class CannotHonour(exception.NovaRdtError):
    """The host cannot give what the request asks; str() says why."""


@dataclasses.dataclass(frozen=True)
class GuestCell:
    """One guest NUMA node as Nova placed it on the host."""

    index: int
    vcpus: frozenset[int]
    host_cell: int | None = None            # None: no NUMA topology
    # vCPU -> the pCPUs it may run on: one each when pinned, a host cell's
    # CPUs for a live migration's floating NUMA instance.
    pinning: Mapping[int, frozenset[int]] | None = None


@dataclasses.dataclass(frozen=True)
class Demand:
    """What one instance takes from one host."""

    vcpus: frozenset[int]                         # vCPUs the groups cover
    cache: Mapping[int, Mapping[str, int]]        # cache id -> type -> ways
    mb: Mapping[int, int]                         # MB domain id -> value
    monitor: bool

    @property
    def needs_clos(self) -> bool:
        return bool(self.cache or self.mb)


def node_ways(node: spec.NodeRequest, state: hoststate.HostRdtState,
              cache_id: int) -> dict[str, int]:
    """Ways per cache type that ``node`` asks for on ``cache_id``."""
    c = state.cache[cache_id]
    if node.cache is None and node.code is None:
        return {}
    if node.cdp and not state.cdp:
        raise CannotHonour("rdt:l3_code_*/l3_data_* need a host with CDP "
                           "(resctrl mounted with -o cdp)")
    if not node.cdp and state.cdp:
        raise CannotHonour("this host runs L3 CDP; it needs separate "
                           "rdt:l3_code_* and rdt:l3_data_* sizes")
    amounts = ({"code": node.code, "data": node.data} if node.cdp
               else {hoststate.BOTH: node.cache})
    out = {}
    for kind, amount in amounts.items():
        if amount is None:          # not asked for on this node
            continue
        try:
            ways = amount.to_ways(c.way_size)
        except (ValueError, ZeroDivisionError):
            raise CannotHonour(
                f"{amount.size} bytes is not a whole number of the "
                f"{c.way_size}-byte ways of cache id {cache_id}") from None
        if ways < c.min_ways:
            raise CannotHonour(f"{ways} way(s) is below the hardware's "
                               f"minimum of {c.min_ways}")
        if ways >= c.cbm_len:
            raise CannotHonour(f"{ways} ways is the whole cache of "
                               f"{c.cbm_len} ways")
        out[kind] = ways
    return out


def mb_value(node: spec.NodeRequest, state: hoststate.HostRdtState
             ) -> int | None:
    """The MB value libvirt/resctrl will get, rounded as the kernel rounds."""
    if node.mb_percent is None and node.mb_mbps is None:
        return None
    mb = state.mb
    if mb is None:
        raise CannotHonour("memory bandwidth allocation (MBA) is not "
                           "available on this host")
    if node.mb_percent is not None:
        if mb.units != caps_mod.UNITS_PERCENT:
            raise CannotHonour(f"rdt:mb_percent needs MB in percent; this "
                               f"host's MB is in {mb.units}")
        try:
            return cbm.mb_round(node.mb_percent, mb.gran, mb.min, 100)
        except ValueError as e:
            raise CannotHonour(f"rdt:mb_percent: {e} on this host") from None
    if mb.units != caps_mod.UNITS_MBPS:
        raise CannotHonour("rdt:mb_mbps needs resctrl mounted with "
                           "-o mba_MBps")
    return node.mb_mbps


def cache_ids_for_cell(cell: GuestCell, covered: frozenset[int],
                       banks: Mapping[int, frozenset[int]],
                       host_cells: Mapping[int, frozenset[int]]
                       ) -> set[int]:
    """The cache ids the covered vCPUs of ``cell`` can run on.

    Pinned vCPUs use the L3 of their pCPUs; an unpinned NUMA cell the L3s
    of its host cell; an instance without NUMA topology every L3, since
    its vCPUs float over the whole host.
    """
    vcpus = cell.vcpus & covered
    if not vcpus:
        return set()
    if cell.pinning:
        pcpus = set().union(*(cell.pinning[v] for v in vcpus
                              if v in cell.pinning))
    elif cell.host_cell is not None and cell.host_cell in host_cells:
        pcpus = set(host_cells[cell.host_cell])
    else:
        return set(banks)
    return {cid for cid, cpus in banks.items() if cpus & pcpus}


def demand(request: spec.RdtRequest, vcpu_count: int,
           cells: Sequence[GuestCell] | None,
           state: hoststate.HostRdtState,
           host_cells: Mapping[int, frozenset[int]],
           monitor_default: bool) -> Demand:
    """Turn a request into ways and MB per id for this host and placement.

    A class only has to be defined here: whether its group can be made
    is the claim's to say (the solver, with the groups it may move)."""
    covered = request.vcpus or frozenset(range(vcpu_count))
    if not cells:
        cells = [GuestCell(0, frozenset(range(vcpu_count)))]
    banks = {cid: c.cpus for cid, c in state.cache.items()}
    monitor = request.monitor if request.monitor is not None \
        else monitor_default
    if monitor and hoststate.CMT_FEATURE not in state.monitoring:
        if request.monitor:
            raise CannotHonour("rdt:monitor=true needs L3 cache monitoring "
                               "(CMT) on the host")
        monitor = False
    if request.rdt_class is not None:
        problem = _undefined(state, request.rdt_class)
        if problem:
            raise CannotHonour(problem)
        # The class group (made by the hook) holds the vCPUs; a libvirt
        # monitor group would fight it for them.
        return Demand(covered, {}, {}, False)
    cache: dict[int, dict[str, int]] = {}
    mb: dict[int, int] = {}
    if (request.wants_cache) and not state.cache:
        raise CannotHonour("L3 cache allocation (CAT) is not available on "
                           "this host")
    for cell in cells:
        node = request.nodes[min(cell.index, len(request.nodes) - 1)]
        ids = cache_ids_for_cell(cell, covered, banks, host_cells)
        for cid in sorted(ids):
            for kind, ways in node_ways(node, state, cid).items():
                # Two guest nodes on one L3 share one group, so they add.
                per = cache.setdefault(cid, {})
                per[kind] = per.get(kind, 0) + ways
        value = mb_value(node, state)
        if value is not None and state.mb is not None:
            mb_ids = ids if ids else set(state.mb.ids)
            for mid in sorted(mb_ids & set(state.mb.ids)):
                mb[mid] = max(mb.get(mid, 0), value)
    for cid, per in cache.items():
        for _kind, ways in per.items():
            if ways >= state.cache[cid].cbm_len:
                raise CannotHonour(f"{ways} ways on cache id {cid} is the "
                                   f"whole cache")
    return Demand(covered, cache, mb, monitor)


def _undefined(state: hoststate.HostRdtState, name: str) -> str | None:
    if state.classes is not None and name not in state.classes:
        return (f"rdt:class={name} is not defined in [rdt] classes on this "
                f"host")
    return None


@dataclasses.dataclass(frozen=True)
class Placement:
    """What the scheduler knows of an instance's shape.

    ``guest`` is the vCPUs of each guest NUMA node, or None without a NUMA
    topology (the vCPUs then float over every cache id).
    """

    vcpus: int
    guest: tuple[frozenset[int], ...] | None = None

    @classmethod
    def even(cls, vcpus: int, nodes: int | None) -> Placement:
        """Nova's default split: vCPUs in order, evenly over the nodes."""
        if nodes is None:
            return cls(vcpus)
        per = max(vcpus // nodes, 1)
        return cls(vcpus, tuple(
            frozenset(range(i * per, vcpus if i == nodes - 1
                            else (i + 1) * per)) for i in range(nodes)))
