"""Allocation planning: from an ``rdt:`` request to ways per cache id.

Pure logic shared by the scheduler filter (which knows only how many guest
NUMA nodes there are) and the driver (which knows the exact pinning).
:func:`demand` turns a request into ways per cache id; :func:`decide`
places them by the compute's own rules
(:mod:`nova_rdt.allocation.placement`: PMD sharers next to the PMD COS,
everyone else away from it), which :func:`fits_anywhere` and
:class:`HostSummary` answer for the filter.  Nothing here predicts
libvirt's own choice: the compute writes what :func:`decide` decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import itertools
import json
from typing import Any
from typing import Literal

from nova_rdt import exception
from nova_rdt import naming
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import placement as placement_mod
from nova_rdt.allocation import spec
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm

# The published document is compact: no leading blanks to strip.
_decode = json.JSONDecoder().raw_decode


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
    return _node_ways(node, state.cdp, cache_id, c.way_size, c.min_ways,
                      c.cbm_len)


def _node_ways(node: spec.NodeRequest, cdp: bool, cache_id: int,
               way_size: int, min_ways: int, cbm_len: int) -> dict[str, int]:
    if node.cache is None and node.code is None:
        return {}
    if node.cdp and not cdp:
        raise CannotHonour("rdt:l3_code_*/l3_data_* need a host with CDP "
                           "(resctrl mounted with -o cdp)")
    if not node.cdp and cdp:
        raise CannotHonour("this host runs L3 CDP; it needs separate "
                           "rdt:l3_code_* and rdt:l3_data_* sizes")
    amounts = ({"code": node.code, "data": node.data} if node.cdp
               else {hoststate.BOTH: node.cache})
    out = {}
    for kind, amount in amounts.items():
        if amount is None:          # not asked for on this node
            continue
        try:
            ways = amount.to_ways(way_size)
        except (ValueError, ZeroDivisionError):
            raise CannotHonour(
                f"{amount.size} bytes is not a whole number of the "
                f"{way_size}-byte ways of cache id {cache_id}") from None
        if ways < min_ways:
            raise CannotHonour(f"{ways} way(s) is below the hardware's "
                               f"minimum of {min_ways}")
        if ways >= cbm_len:
            raise CannotHonour(f"{ways} ways is the whole cache of "
                               f"{cbm_len} ways")
        out[kind] = ways
    return out


def mb_value(node: spec.NodeRequest, state: hoststate.HostRdtState
             ) -> int | None:
    """The MB value libvirt/resctrl will get, rounded as the kernel rounds."""
    return _mb_value(node, state.mb)


def _mb_value(node: spec.NodeRequest, mb: hoststate.MbState | None
              ) -> int | None:
    if node.mb_percent is None and node.mb_mbps is None:
        return None
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
           monitor_default: bool, check_class: bool = True) -> Demand:
    """Turn a request into ways and MB per id for this host and placement.

    ``check_class`` False: a class only has to be defined here; whether
    its group can be made is the compute's planner's to say, with the
    groups it may move (the compute's own claim)."""
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
        problem = class_problem(state, request.rdt_class) if check_class \
            else _undefined(state, request.rdt_class)
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


def decide(state: hoststate.HostRdtState, d: Demand,
           pmd_share: bool = False) -> dict[int, dict[str, int]]:
    """The masks the compute decides for ``d`` on ``state``.

    The placement planner's own choice, with everything already on the
    host held where it is but the groups the compute may move (its class
    groups; instances under ``[rdt] compaction``), which move only when
    the demand needs their place.  Raises CannotHonour, saying why, when
    no valid placement exists, or no CLOS or (on a monitoring host) no
    RMID is left: the kernel gives every new group one.
    """
    return _decide(state, d, pmd_share)[0]


def _decide(state: hoststate.HostRdtState, d: Demand, pmd_share: bool
            ) -> tuple[dict[int, dict[str, int]],
                       dict[int, dict[str, tuple[int, ...]]]]:
    """:func:`decide`, and where the movable groups are after it (cache
    id -> type -> their masks, in ``CacheIdState.movable``'s order)."""
    if d.needs_clos and state.clos_free < 1:
        raise CannotHonour("no free CLOS (class of service) left on this "
                           "host")
    if (d.needs_clos or d.monitor) and state.mon_capable \
            and state.rmids_free < 1:
        raise CannotHonour("no free RMID (monitoring ID) left on this host")
    masks: dict[int, dict[str, int]] = {}
    moved: dict[int, dict[str, tuple[int, ...]]] = {}
    for cid, per in sorted(d.cache.items()):
        c = state.cache[cid]
        for kind, ways in sorted(per.items()):
            res = _RESOURCE_OF_KIND[kind]
            host, book = c.planner_input(kind, state.clos_free)
            new = placement_mod.Reservation(
                hoststate.PROBE, {res: {cid: ways}}, pmd_share=pmd_share)
            try:
                plan = placement_mod.place(host, book, {}, new,
                                           compaction=bool(book))
            except placement_mod.NoPlacement as e:
                raise CannotHonour(str(e)) from None
            masks.setdefault(cid, {})[kind] = \
                plan.instances[hoststate.PROBE][res][cid]
            if plan.moved:
                moved.setdefault(cid, {})[kind] = tuple(
                    plan.instances[hoststate.movable_name(i)][res][cid]
                    if hoststate.movable_name(i) in book else m
                    for i, m in enumerate(c.movable[kind]))
    return masks, moved


_RESOURCE_OF_KIND = naming.RESOURCE_OF_KIND


def _undefined(state: hoststate.HostRdtState, name: str) -> str | None:
    if state.classes is not None and name not in state.classes:
        return (f"rdt:class={name} is not defined in [rdt] classes on this "
                f"host")
    return None


def class_problem(state: hoststate.HostRdtState, name: str) -> str | None:
    """Why ``rdt:class=name`` cannot be honoured here; None: it can.

    A host that does not publish its classes (a version-1 document) is
    not second-guessed: its hook decides.
    """
    if state.classes is None:
        return None
    c = state.classes.get(name)
    if c is None:
        return (f"rdt:class={name} is not defined in [rdt] classes on this "
                f"host")
    if c.exists:
        return None
    why = state.class_problem(c)
    return None if why is None else \
        f"rdt:class={name}: its group cannot be made: {why}"


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


# Host cells per guest node that Nova could choose; None: any.
Eligible = tuple[frozenset[int] | None, ...] | None


def fits_anywhere(state: hoststate.HostRdtState, request: spec.RdtRequest,
                  placement: Placement, eligible: Eligible = None
                  ) -> str | None:
    """The filter's question, answered the slow, exact way.

    Could some placement that Nova may choose on this host be planned by
    the driver (:func:`demand` then :func:`decide`)?  Guest NUMA nodes go to
    distinct host cells (only those in ``eligible``, when given) and take
    ways on every cache id their cell uses.  Returns None when it fits,
    else the reason it does not.  :class:`HostSummary` gives the same
    answer fast.
    """
    try:
        if request.monitor and hoststate.CMT_FEATURE not in state.monitoring:
            return ("rdt:monitor=true needs L3 cache monitoring (CMT) on "
                    "the host")
        if request.rdt_class is not None:
            return class_problem(state, request.rdt_class)
        if not request.wants_allocation and not request.monitor:
            return None
        if request.wants_allocation and state.clos_free < 1:
            return "no free CLOS left"
        if state.mon_capable and state.rmids_free < 1:
            return "no free RMID left"
        share = request.pmd_share
        if placement.guest is None:
            decide(state, demand(request, placement.vcpus, None, state, {},
                                 False), share)
            return None
        cells = dict(state.cells) or {cid: c.cpus
                                      for cid, c in state.cache.items()}
        k = len(placement.guest)
        if k > len(cells):
            # NUMATopologyFilter's refusal, not ours; capabilities still
            # count, so a pass without it does not let a non-RDT host in.
            if request.wants_cache and not state.cache:
                raise CannotHonour("L3 cache allocation (CAT) is not "
                                   "available on this host")
            for node in request.nodes:
                mb_value(node, state)
            return None
        why = "no host cell Nova may choose has room"
        for perm in itertools.permutations(sorted(cells), k):
            if eligible is not None and any(
                    e is not None and cell not in e
                    for cell, e in zip(perm, eligible)):
                continue
            guest = [GuestCell(i, placement.guest[i], cell)
                     for i, cell in enumerate(perm)]
            try:
                decide(state, demand(request, placement.vcpus, guest, state,
                                     cells, False), share)
                return None
            except CannotHonour as e:
                why = f"guest nodes on host cells {list(perm)}: {e}"
        return why
    except CannotHonour as e:
        return str(e)


def taken(state: hoststate.HostRdtState, request: spec.RdtRequest,
          placement: Placement, host_cells: Sequence[int] | None = None
          ) -> hoststate.HostRdtState:
    """``state`` after one more instance of ``request``, placed as the
    compute places it (:func:`demand`, then :func:`decide`).

    ``host_cells``: the host cell of each guest node, where Nova put it;
    None (or no NUMA topology): the instance may use every cache id.  A
    class member makes its class's group if it is not there yet.  Raises
    CannotHonour when the compute would refuse it.
    """
    if request.rdt_class is not None:
        problem = class_problem(state, request.rdt_class)
        if problem:
            raise CannotHonour(problem)
        c = (state.classes or {}).get(request.rdt_class)
        if c is None or c.exists:
            return state                    # its group holds it already
        # Its first member makes its group (a CLOS, an RMID); the later
        # members of the same request join it, so where its ways go is
        # nothing to them.
        made = state.with_allocation({})
        return dataclasses.replace(made, classes={
            **(state.classes or {}),
            c.name: dataclasses.replace(c, exists=True)})
    cells = None
    if placement.guest is not None:
        cells = [GuestCell(i, vcpus, host_cells[i] if host_cells else None)
                 for i, vcpus in enumerate(placement.guest)]
    host_cell_cpus = dict(state.cells) or {cid: c.cpus for cid, c
                                           in state.cache.items()}
    d = demand(request, placement.vcpus, cells, state, host_cell_cpus,
               False)
    masks, moved = _decide(state, d, request.pmd_share)
    return state.with_moves(moved).with_allocation(
        masks, clos=1 if d.needs_clos else 0, pmd_share=request.pmd_share,
        rmids=1 if d.needs_clos or d.monitor else 0)


class HostSummary:
    """A host's published state as the filter needs it, parsed once.

    Built straight from the compact stats document (no sets, no masks),
    so even a changed host costs one ``json.loads`` and a few lists.
    ``verdict`` must agree with :func:`fits_anywhere` on the full state (a
    property test holds them together).
    """

    __slots__ = ("raw", "shape", "clos_free", "need_rmid", "cmt",
                 "l3", "cells", "disjoint", "classes", "last", "l3_cpus",
                 "several")
    raw: str
    shape: str                     # the hardware: the memo's key
    clos_free: int
    need_rmid: bool                # monitoring host without a free RMID
    cmt: bool
    l3: list[Any]                  # [id, cpus, used, room, sharer's room,
                                   #  PMD want] per cache id
    cells: list[Any]               # [cell, cpus, cache indexes]
    disjoint: bool | None          # no cache id in two cells (lazy)
    l3_cpus: list[frozenset[int]] | None   # CPUs per cache index (lazy)
    several: bool | None           # a cell with several cache ids (lazy)
    classes: list[Any] | None      # [name, ways, mb, exists, can make]
    last: tuple[int, int] | None   # (request key, verdict)

    # What :meth:`verdict` says: no; yes on some host cells only; yes on
    # whichever cells Nova picks.
    NO, SOME, ALL = 0, 1, 2

    @classmethod
    def parse(cls, raw: str) -> HostSummary | None:
        """The summary of one ``rdt`` stats value; None: not readable."""
        try:
            doc = _decode(raw)[0]
            if doc.get("v") != hoststate.STATS_VERSION:
                old = hoststate.HostRdtState.from_stats(
                    {hoststate.STATS_KEY: raw})
                return cls.of(old) if old is not None else None
            self = cls()
            self.raw = raw
            self.shape = doc["shape"]
            self.clos_free = doc["clos"]
            mon = doc["mon"]
            self.need_rmid = bool(mon) and doc["rmid"][1] < 1
            self.cmt = hoststate.CMT_FEATURE in mon
            # Kept as parsed: [id, cpus, used, room, sharer's room, PMD
            # want] and [cell, cpus, cache indexes]; read where needed.
            self.l3 = l3 = doc["l3"]
            self.cells = doc["cells"] or \
                [[c[0], "", [i]] for i, c in enumerate(l3)]
            self.disjoint = None
            self.l3_cpus = None
            self.several = None
            self.classes = doc.get("cls")
            self.last = None
            return self
        except (ValueError, KeyError, TypeError, IndexError,
                AttributeError):
            return None

    @classmethod
    def of(cls, state: hoststate.HostRdtState) -> HostSummary:
        summary = cls.parse(state.to_stats()[hoststate.STATS_KEY])
        assert summary is not None       # our own document always reads
        return summary

    def fits(self, request: spec.RdtRequest, placement: Placement,
             memo: dict[str, Any], eligible: Eligible = None) -> bool:
        """:func:`fits_anywhere` is None, in a few comparisons."""
        return self.verdict(request, placement, memo, eligible) != self.NO

    def verdict(self, request: spec.RdtRequest, placement: Placement,
                memo: dict[str, Any], eligible: Eligible = None,
                pinned_l3: Sequence[Sequence[int] | None] | None = None
                ) -> int:
        """NO, SOME (only some host cell choices fit) or ALL.

        ``memo`` is per request: what depends only on the host's shape
        (way sizes, CDP, MB) is worked out once per distinct shape.
        ``pinned_l3``: per guest node, the cache indexes Nova's pinning
        gives it (see :meth:`pinned_indexes`); the answer is then for
        that fit alone.
        """
        if request.monitor and not self.cmt:
            return self.NO
        if request.rdt_class is not None:
            if self.classes is None:
                return self.ALL
            for name, _ways, _mb, exists, can_make in self.classes:
                if name == request.rdt_class:
                    return self.ALL if exists or can_make else self.NO
            return self.NO
        wants = request.wants_allocation
        if not wants and not request.monitor:
            return self.ALL
        if (wants and self.clos_free < 1) or self.need_rmid:
            return self.NO
        plan = memo.get(self.shape)
        if plan is None:
            plan = memo[self.shape] = _asks(self.shape, request, placement)
        if plan is False:
            return self.NO
        asks, lens = plan
        # What a PMD sharer can get, or anyone else.
        col = 4 if request.pmd_share else 3
        if pinned_l3 is not None:
            # Nova pinned each guest node's vCPUs: only their pCPUs' cache
            # ids count, as the compute's demand reads them.
            return self.ALL if self._fits_indexes(
                asks, pinned_l3, lens, col) else self.NO
        if placement.guest is None:
            return self.ALL if self._on(asks[0], range(len(lens)), lens,
                                        col) else self.NO
        cells = self.cells
        k = len(asks)
        if k > len(cells):
            return self.ALL
        if k == 1:
            # The common NUMA request: one guest node, any one cell.
            a = asks[0]
            if a is None:
                return self.ALL
            only = eligible[0] if eligible is not None else None
            results = [self._on(a, cell[2], lens, col) for cell in cells
                       if only is None or cell[0] in only]
        else:
            perms = [p for p in itertools.permutations(range(len(cells)), k)
                     if eligible is None or all(
                         e is None or cells[c][0] in e
                         for c, e in zip(p, eligible))]
            if self.disjoint is None:
                seen = [ci for cell in cells for ci in cell[2]]
                self.disjoint = len(seen) == len(set(seen))
            if self.disjoint:
                # No two cells share a cache id: each node on its own.
                ok = [[a is None or self._on(a, cell[2], lens, col)
                       for cell in cells] for a in asks]
                results = [all(ok[i][c] for i, c in enumerate(p))
                           for p in perms]
            else:
                results = [self._fits_cells(asks, p, lens, col)
                           for p in perms]
        if not any(results):
            return self.NO
        return self.ALL if all(results) else self.SOME

    def pinned_indexes(self, pcpus: frozenset[int]) -> list[int]:
        """The cache indexes whose CPUs hold any of ``pcpus``."""
        cpus = self.l3_cpus
        if cpus is None:
            cpus = self.l3_cpus = [frozenset(caps_mod.parse_cpu_list(c[1]))
                                   for c in self.l3]
        return [i for i, c in enumerate(cpus) if c & pcpus]

    def cell_indexes(self, cell: int) -> list[int]:
        """The cache indexes of host cell ``cell`` (none: unknown)."""
        return next((c[2] for c in self.cells if c[0] == cell), [])

    @property
    def several_per_cell(self) -> bool:
        """Whether a host cell holds more than one cache id (AMD's NPS1
        and NPS2): then which CPUs Nova pins matters."""
        several = self.several
        if several is None:
            several = self.several = any(len(c[2]) > 1 for c in self.cells)
        return several

    def _fits_indexes(self, asks: Sequence[Any],
                      per_node: Sequence[Sequence[int] | None],
                      lens: Sequence[int], col: int) -> bool:
        """Guest node i on cache indexes per_node[i]: ways summed per
        cache index fit (two nodes on one L3 share one group)."""
        sums: dict[tuple[int, int], int] = {}
        for node_asks, indexes in zip(asks, per_node):
            if node_asks is None or indexes is None:
                continue
            for ci in indexes:
                per = node_asks[ci]
                if per is None:
                    return False
                for ki, ways in enumerate(per):
                    sums[ci, ki] = sums.get((ci, ki), 0) + ways
        return all(ways <= self.l3[ci][col][ki] and ways < lens[ci]
                   for (ci, ki), ways in sums.items())

    def _on(self, per_id: Sequence[tuple[int, ...] | None],
            indexes: Iterable[int], lens: Sequence[int], col: int) -> bool:
        """One guest node's asks fit on these cache indexes."""
        l3 = self.l3
        for ci in indexes:
            per = per_id[ci]
            if per is None:
                return False
            have = l3[ci][col]
            for ki, ways in enumerate(per):
                if ways > have[ki] or ways >= lens[ci]:
                    return False
        return True

    def _fits_cells(self, asks: Sequence[Any], perm: tuple[int, ...],
                    lens: Sequence[int], col: int) -> bool:
        """Guest node i on cell perm[i]: ways summed per cache id fit."""
        sums: dict[tuple[int, int], int] = {}
        for node_asks, c in zip(asks, perm):
            if node_asks is None:
                continue                # no covered vCPU on this node
            for ci in self.cells[c][2]:
                per = node_asks[ci]
                if per is None:
                    return False
                for ki, ways in enumerate(per):
                    sums[ci, ki] = sums.get((ci, ki), 0) + ways
        for (ci, ki), ways in sums.items():
            if ways > self.l3[ci][col][ki] or ways >= lens[ci]:
                return False
        return True


def _asks(shape: str, request: spec.RdtRequest, placement: Placement
          ) -> tuple[list[Any], list[int]] | Literal[False]:
    """(asks, cbm_len per cache index) for one kind of host, or False when
    such a host can never fit.

    asks: per guest node (one without NUMA), per cache index, the ways per
    type it needs; None where that cache id cannot take it, and None for
    a whole node that covers no vCPU.
    """
    cdp_, mb_, geo = json.loads(shape)
    cdp = bool(cdp_)
    mb = hoststate.MbState(mb_[0], mb_[1], mb_[2], mb_[3], tuple(mb_[4])) \
        if mb_ else None
    kinds = hoststate.CDP_TYPES if cdp else (hoststate.BOTH,)
    try:
        if request.wants_cache and not geo:
            return False
        covered = request.vcpus or frozenset(range(placement.vcpus))
        if placement.guest is None:
            nodes = [(request.nodes[0], True)]
        else:
            nodes = [(request.nodes[min(i, len(request.nodes) - 1)],
                      bool(vcpus & covered))
                     for i, vcpus in enumerate(placement.guest)]
        out: list[list[tuple[int, ...] | None] | None] = []
        for node, has_vcpus in nodes:
            _mb_value(node, mb)
            if not has_vcpus:
                out.append(None)
                continue
            per_id: list[tuple[int, ...] | None] = []
            for cid, n, way, mn, *_ in geo:
                try:
                    w = _node_ways(node, cdp, cid, way, mn, n)
                    per_id.append(tuple(w.get(k, 0) for k in kinds))
                except CannotHonour:
                    if placement.guest is None:
                        return False
                    per_id.append(None)
            out.append(per_id)
        return out, [g[1] for g in geo]
    except CannotHonour:
        return False
