"""Allocation planning: from an ``rdt:`` request to ways per cache id.

Pure logic shared by the scheduler filter (which knows only how many guest
NUMA nodes there are) and the driver (which knows the exact pinning).  The
simulation of placement uses libvirt's own policy (:func:`cbm.best_fit`),
so what is planned here is what libvirt will allocate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from nova_rdt.allocation import hoststate
from nova_rdt.allocation import spec
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm


class CannotHonour(Exception):
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
        try:
            ways = amount.to_ways(c.way_size)
        except ValueError:
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
    """Turn a request into ways and MB per id for this host and placement."""
    covered = request.vcpus or frozenset(range(vcpu_count))
    if not cells:
        cells = [GuestCell(0, frozenset(range(vcpu_count)))]
    banks = {cid: c.cpus for cid, c in state.cache.items()}
    monitor = request.monitor if request.monitor is not None \
        else monitor_default
    if monitor and "llc_occupancy" not in state.monitoring:
        if request.monitor:
            raise CannotHonour("rdt:monitor=true needs L3 cache monitoring "
                               "(CMT) on the host")
        monitor = False
    if request.rdt_class is not None:
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
        if value is not None:
            mb_ids = ids if ids else set(state.mb.ids)
            for mid in sorted(mb_ids & set(state.mb.ids)):
                mb[mid] = max(mb.get(mid, 0), value)
    for cid, per in cache.items():
        for kind, ways in per.items():
            if ways >= state.cache[cid].cbm_len:
                raise CannotHonour(f"{ways} ways on cache id {cid} is the "
                                   f"whole cache")
    return Demand(covered, cache, mb, monitor)


def place(state: hoststate.HostRdtState, d: Demand
          ) -> dict[int, dict[str, int]]:
    """The masks libvirt will choose for ``d`` on ``state``.

    Raises CannotHonour, naming the cache id and its free runs, when the
    free ways are too few or too fragmented, or no CLOS is left.
    """
    if d.needs_clos and state.clos_free < 1:
        raise CannotHonour("no free CLOS (class of service) left on this "
                           "host")
    masks: dict[int, dict[str, int]] = {}
    for cid, per in sorted(d.cache.items()):
        c = state.cache[cid]
        for kind, ways in sorted(per.items()):
            mask = cbm.best_fit(c.free_mask(kind), ways)
            if mask is None:
                runs = [r.length for r in
                        cbm.free_runs(c.used[kind], c.cbm_len)]
                raise CannotHonour(
                    f"not enough contiguous free L3 ways on cache id {cid}"
                    f"{'' if kind == hoststate.BOTH else ' (' + kind + ')'}"
                    f": {ways} needed, free runs "
                    f"{', '.join(map(str, runs)) or 'none'}")
            masks.setdefault(cid, {})[kind] = mask
    return masks


def fits_anywhere(state: hoststate.HostRdtState, request: spec.RdtRequest,
                  guest_nodes: int | None) -> str | None:
    """The filter's question: could some placement on this host work?

    ``guest_nodes`` is the instance's NUMA node count, or None when it has
    no NUMA topology (then it needs room on every cache id).  Returns None
    when it fits, else the reason it does not.
    """
    try:
        if request.rdt_class is not None:
            return None
        if request.wants_allocation and state.clos_free < 1:
            return "no free CLOS left"
        if request.wants_cache and not state.cache:
            return "no L3 CAT"
        for node in request.nodes:
            mb_value(node, state)
        if not request.wants_cache:
            return None
        any_id = next(iter(state.cache))
        if guest_nodes is None:
            need = node_ways(request.nodes[0], state, any_id)
            for cid, c in state.cache.items():
                for kind, ways in need.items():
                    if c.largest_free_run(kind) < ways:
                        return (f"cache id {cid}: largest free run "
                                f"{c.largest_free_run(kind)} < {ways} ways")
            return None
        # Guest nodes land on distinct host cells; match the biggest asks
        # to the roomiest cache ids (greedy is exact for nested capacities).
        nodes = [request.nodes[min(i, len(request.nodes) - 1)]
                 for i in range(guest_nodes)]
        for kind in state.cache_types:
            asks = sorted((node_ways(n, state, any_id).get(kind, 0)
                           for n in nodes), reverse=True)
            room = sorted((c.largest_free_run(kind)
                           for c in state.cache.values()), reverse=True)
            if len(asks) > len(room):
                asks = asks[:len(room)]   # NUMA filter decides the rest
            for ask, have in zip(asks, room):
                if ask > have:
                    return (f"needs {ask} contiguous ways, best cache id "
                            f"left has {have}")
        return None
    except CannotHonour as e:
        return str(e)


@dataclasses.dataclass(frozen=True)
class HostSummary:
    """What :func:`fits_anywhere` needs from a host, precomputed once.

    The scheduler keeps one per host-state update, so each request costs
    a few comparisons per host.  ``fits`` must agree with
    :func:`fits_anywhere` (a property test holds them together).
    """

    state: hoststate.HostRdtState
    largest: Mapping[str, tuple[int, ...]]    # per type, desc, per cache id
    shape: tuple                              # what per-request memos key on

    @classmethod
    def of(cls, state: hoststate.HostRdtState) -> HostSummary:
        largest = {k: tuple(sorted((c.largest_free_run(k)
                                    for c in state.cache.values()),
                                   reverse=True))
                   for k in state.cache_types}
        shape = (state.cdp, state.mb,
                 tuple((c.way_size, c.cbm_len, c.min_ways)
                       for c in state.cache.values()))
        return cls(state, largest, shape)

    def fits(self, request: spec.RdtRequest, guest_nodes: int | None,
             memo: dict) -> bool:
        if request.rdt_class is not None:
            return True
        if request.wants_allocation and self.state.clos_free < 1:
            return False
        key = (self.shape, guest_nodes)
        asks = memo.get(key)
        if asks is None:
            asks = memo[key] = _asks(self.state, request, guest_nodes)
        if asks is False:
            return False
        for kind, need in asks.items():
            room = self.largest[kind]
            if guest_nodes is None:
                if room and room[-1] < need[0]:
                    return False
            else:
                for ask, have in zip(need, room):
                    if ask > have:
                        return False
        return True


def _asks(state, request, guest_nodes):
    """Per type, the ways each placement unit needs (desc); False: never."""
    try:
        if request.wants_cache and not state.cache:
            return False
        for node in request.nodes:
            mb_value(node, state)
        if not request.wants_cache:
            return {}
        any_id = next(iter(state.cache))
        if guest_nodes is None:
            return {k: (w,) for k, w in
                    node_ways(request.nodes[0], state, any_id).items()}
        nodes = [request.nodes[min(i, len(request.nodes) - 1)]
                 for i in range(guest_nodes)]
        per = [node_ways(n, state, any_id) for n in nodes]
        return {k: tuple(sorted((p.get(k, 0) for p in per), reverse=True))
                for k in state.cache_types}
    except CannotHonour:
        return False
