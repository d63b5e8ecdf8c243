"""A host's RDT state as the scheduler and the driver see it.

The driver builds a :class:`HostRdtState` from resctrl (and its own pending
claims), publishes it in the compute node's ``stats`` as one JSON string,
and the scheduler filter reads it back.  Everything here is pure data, so
the filter never touches a filesystem; it parses a host's state once per
change of its content.

With the state goes the placement solver's input as the compute's claim
holds it (:class:`SolverInput`): the filter runs the claim itself on it
(:mod:`nova_rdt.scheduler.claim`), so the scheduler and the compute
decide with one model.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import json
from typing import Any

from nova_rdt import naming
from nova_rdt.allocation import placement
from nova_rdt.allocation import rdtclass
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbmrules

STATS_KEY = "rdt"
# The stat naming why a host offers no RDT now ("" when healthy): the
# driver publishes it beside an empty STATS_KEY, RDTFilter logs it.
DEGRADED_STAT = "rdt_degraded"
# The stat with the masks a destination decided for its incoming live
# migrations: the source writes them into the XML it hands libvirt, so
# the destination's hook puts the domain on them before it runs.
INCOMING_STAT = "rdt_incoming"
# 2: the compact form, with free runs, RMIDs, host cells and classes.
# 3: the PMD COS rule (its span per cache id that holds PMD cores, and
#    what a sharer can get beside what anyone else can) and sparse masks;
#    later, as an optional seventh field per cache id, the groups the
#    compute may move to make room (older readers ignore it and see the
#    room it gives in the room fields).
#    Later still, as the optional field "plan", the placement solver's
#    input itself (:class:`SolverInput`).
# 4: the solver's input is what the filter decides on: the room fields,
#    the movable groups and whether each class can be made (a scheduler
#    older than the input read them) are gone.  Older schedulers read no
#    RDT state in it, and refuse rdt: requests on the host: Nova upgrades
#    the schedulers first.
STATS_VERSION = 4
_READABLE_VERSIONS = (1, 2, 3, 4)

# Cache types as libvirt names them; a CDP host has code and data masks.
BOTH = "both"
CDP_TYPES = ("code", "data")
_RESOURCE_OF_TYPE = naming.RESOURCE_OF_KIND

TRAIT_CAT = "CUSTOM_RDT_L3_CAT"
TRAIT_CDP = "CUSTOM_RDT_L3_CDP"
TRAIT_MBA = "CUSTOM_RDT_MBA"
TRAIT_MBA_MBPS = "CUSTOM_RDT_MBA_MBPS"
TRAIT_CMT = "CUSTOM_RDT_CMT"
TRAIT_MBM = "CUSTOM_RDT_MBM"
ALL_TRAITS = (TRAIT_CAT, TRAIT_CDP, TRAIT_MBA, TRAIT_MBA_MBPS, TRAIT_CMT,
              TRAIT_MBM)

# libvirt's <monitor level='3'> reads llc_occupancy: that is CMT.
CMT_FEATURE = "llc_occupancy"
MBM_FEATURES = frozenset({"mbm_total_bytes", "mbm_local_bytes"})


@dataclasses.dataclass(frozen=True)
class CacheIdState:
    """One L3 cache instance (a socket, usually): its ways and holders.

    ``pmd`` says the PMD COS's span rule holds here (the PMD COS is on and
    this cache id's CPUs run PMD threads); ``pmd_want`` is then, per type,
    what the PMD COS must cover: its base ways and its sharers' ways (0 or
    absent: nothing yet).  The rule is the placement planner's
    (:mod:`nova_rdt.allocation.placement`): a sharer keeps the span of
    ``pmd_want`` and its own ways one run over nobody else's ways (any
    ways under sparse masks); anyone else stays out of that span.
    """

    id: int
    cpus: frozenset[int]
    cbm_len: int
    way_size: int                 # bytes; libvirt's "granularity"
    min_ways: int
    used: Mapping[str, int]       # type ("both"/"code"/"data") -> mask
    sparse: bool = False          # the kernel takes non-contiguous masks
    pmd: bool = False
    pmd_want: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def pmd_cover(self, kind: str) -> int:
        """The ways the PMD COS spans here (0 where the rule does not
        hold or nothing is shared yet)."""
        if not self.pmd:
            return 0
        return self.rules.cover(self.pmd_want.get(kind, 0))

    @property
    def rules(self) -> cbmrules.CbmRules:
        return cbmrules.CbmRules(self.cbm_len, self.min_ways, self.sparse)


# The demand's name in the placement planner's answers (and refusals,
# which reach an instance's fault).
PROBE = placement.ROOM_PROBE


def _l3_entry(c: CacheIdState, kinds: tuple[str, ...]) -> list[Any]:
    return [c.id, caps_mod.format_cpu_list(c.cpus),
            [f"{c.used[k]:x}" for k in kinds],
            [f"{c.pmd_want.get(k, 0):x}" for k in kinds] if c.pmd else None]


def incoming_stat(masks: Mapping[str, Mapping[int, Mapping[str, int]]]
                  ) -> str:
    """``INCOMING_STAT``'s value: instance uuid -> cache id -> type ->
    decided mask ("" when there are none)."""
    if not masks:
        return ""
    return json.dumps({u: [[cid, kind, f"{m:x}"]
                           for cid, per in sorted(by_id.items())
                           for kind, m in sorted(per.items())]
                       for u, by_id in sorted(masks.items())},
                      separators=(",", ":"))


def incoming_masks(stats: Mapping[str, str] | None, uuid: str
                   ) -> dict[tuple[int, str], int]:
    """What a destination published for ``uuid``: (cache id, type) ->
    mask; empty when nothing (an older destination, or a document that
    does not parse: the hook then places the domain itself)."""
    raw = (stats or {}).get(INCOMING_STAT)
    if not raw:
        return {}
    try:
        return {(int(cid), str(kind)): int(m, 16)
                for cid, kind, m in json.loads(raw).get(uuid, ())
                if kind in (BOTH, *CDP_TYPES)}
    except (ValueError, TypeError, AttributeError):
        return {}


@dataclasses.dataclass(frozen=True)
class MbState:
    units: str                    # percent, MBps or 1/8GBps
    gran: int
    min: int
    max: int | None
    ids: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class ClassState:
    """One ``[rdt] classes`` definition of this host, and its group."""

    name: str
    l3_ways: int
    mb: int | None
    exists: bool                  # the class group is there already


def class_group(name: str, l3_ways: int, host: placement.Host,
                masks: placement.PerId | None = None
                ) -> placement.ClassGroup:
    """Class ``name``'s group as the solver places it: ``l3_ways`` (at
    least the hardware's minimum) on every cache id of every resource."""
    return placement.ClassGroup(
        name, {r: {cid: max(l3_ways, host.resources[r].min_bits)
                   for cid in host.ids[r]} for r in host.resources},
        masks)


@dataclasses.dataclass(frozen=True)
class SolverInput:
    """What the compute's claim hands the placement solver on this host.

    The compute publishes it and the filter runs the solver on it, so the
    two cannot decide differently: ``host`` is what
    :func:`nova_rdt.allocation.hostplan.host_of` builds, ``reservations``
    the book with every mask where the plan holds it, ``classes`` every
    class group the claim may place or move, ``compaction`` the
    compute's ``[rdt] compaction`` and ``monitor`` its
    ``[rdt] monitor_default`` for an instance with an ``rdt:`` request.
    Reservations are published under names of their own: the scheduler
    needs no instance's uuid, and a fault must not carry one.
    """

    host: placement.Host
    reservations: Mapping[str, placement.Reservation]
    classes: Mapping[str, placement.ClassGroup]
    compaction: bool = False
    monitor: bool = False

    @property
    def pmd_cos(self) -> bool:
        return self.host.pmd_ids is not None

    def place(self, new: placement.Reservation, mb_only: bool = False
              ) -> placement.Plan:
        """The claim's plan with ``new`` added; NoPlacement says why not.
        ``mb_only``: ``new`` has a group without ways, a CLOS the solver
        does not count."""
        host = self.host
        if mb_only:
            host = dataclasses.replace(host, clos=host.clos - 1)
        return placement.place(host, self.reservations, self.classes, new,
                               compaction=self.compaction)

    def to_doc(self) -> list[Any]:
        h = self.host
        names = {u: f"r{i}" for i, u in enumerate(sorted(self.reservations))}
        return [
            [{r: [x.cbm_len, x.min_bits, int(x.sparse)]
              for r, x in sorted(h.resources.items())},
             {r: list(ids) for r, ids in sorted(h.ids.items())},
             _per_out(h.host_ways), _per_out(h.foreign),
             _per_out(h.pmd_base),
             None if h.pmd_ids is None else sorted(h.pmd_ids), h.clos],
            [[names[u], _per_out(r.ways), _per_out(r.masks),
              int(r.pmd_share), r.rdt_class, int(r.movable)]
             for u, r in sorted(self.reservations.items())],
            [[g.name, _per_out(g.ways), _per_out(g.masks)]
             for _n, g in sorted(self.classes.items())],
            int(self.compaction), int(self.monitor)]

    @classmethod
    def from_doc(cls, doc: Sequence[Any]) -> SolverInput:
        """The input :meth:`to_doc` wrote; ValueError, KeyError or
        TypeError for anything else."""
        (res, ids, host_ways, foreign, base, pmd_ids, clos), book, \
            groups, compaction, monitor = doc
        host = placement.Host(
            resources={str(r): placement.Resource(int(n), int(m), bool(sp))
                       for r, (n, m, sp) in res.items()},
            ids={str(r): tuple(int(c) for c in v) for r, v in ids.items()},
            host_ways=_per_in(host_ways), foreign=_per_in(foreign),
            pmd_base=_per_in(base),
            pmd_ids=None if pmd_ids is None
            else frozenset(int(c) for c in pmd_ids),
            clos=int(clos))
        return cls(
            host,
            {str(n): placement.Reservation(
                str(n), _per_in(ways), _per_in(masks)
                if masks is not None else None, bool(share),
                None if rc is None else str(rc), bool(mv))
             for n, ways, masks, share, rc, mv in book},
            {str(n): placement.ClassGroup(
                str(n), _per_in(ways),
                _per_in(masks) if masks is not None else None)
             for n, ways, masks in groups},
            bool(compaction), bool(monitor))


def _per_out(per: placement.PerId | None) -> dict[str, list[list[int]]] \
        | None:
    if per is None:
        return None
    return {r: sorted([cid, v] for cid, v in m.items())
            for r, m in sorted(per.items())}


def _per_in(doc: Mapping[str, Sequence[Sequence[int]]]
            ) -> dict[str, dict[int, int]]:
    return {str(r): {int(cid): int(v) for cid, v in pairs}
            for r, pairs in doc.items()}


@dataclasses.dataclass(frozen=True)
class HostRdtState:
    cache: Mapping[int, CacheIdState]
    cdp: bool
    clos_free: int
    mb: MbState | None
    monitoring: frozenset[str]    # llc_occupancy, mbm_total_bytes, ...
    rmids: int = 0                # num_rmids
    # Every group (control or monitor, the root's RMID 0 included) holds
    # one RMID on a monitoring-capable host, so a new group needs one.
    rmids_free: int = 0
    # Host NUMA cell -> its CPUs (what the compute's libvirt reports).
    cells: Mapping[int, frozenset[int]] = dataclasses.field(
        default_factory=dict)
    # None: the host did not say (a version-1 document).
    classes: Mapping[str, ClassState] | None = None
    # The solver's input as the compute's claim holds it (with_solver);
    # None where the compute did not publish it, or the state was changed
    # since by the with_* below (it would no longer be the claim's).
    solver: SolverInput | None = None

    @property
    def cache_types(self) -> tuple[str, ...]:
        return CDP_TYPES if self.cdp else (BOTH,)

    @property
    def mon_capable(self) -> bool:
        """Whether the kernel allocates an RMID for every new group."""
        return bool(self.monitoring)

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
        if CMT_FEATURE in self.monitoring:
            t.add(TRAIT_CMT)
        if self.monitoring & MBM_FEATURES:
            t.add(TRAIT_MBM)
        return t

    def class_problem(self, c: ClassState) -> str | None:
        """Why class ``c``'s group could not be made now beside its ways
        and CLOS (the solver's to place); None: nothing else stops it.

        The rule of the agent that makes it (:mod:`nova_rdt.host.agent`):
        an RMID on a monitoring host, and an MB value the kernel takes.
        """
        if self.mon_capable and self.rmids_free < 1:
            return "no free RMID to create its group"
        mb = self.mb
        if c.mb is not None and mb is not None \
                and mb.units == caps_mod.UNITS_PERCENT \
                and not mb.min <= c.mb <= (mb.max or 100):
            return (f"mb={c.mb} is outside this host's MB range "
                    f"{mb.min}-{mb.max or 100}")
        return None

    def with_solver(self, host: placement.Host,
                    reservations: Mapping[str, placement.Reservation],
                    classes: Mapping[str, placement.ClassGroup],
                    compaction: bool = False, monitor: bool = False
                    ) -> HostRdtState:
        """This state with the compute claim's own solver input.

        Every class this host defines is in the published input, so the
        scheduler places a class not in use as the claim does.
        """
        groups = dict(classes)
        for name, c in (self.classes or {}).items():
            if name not in groups:
                groups[name] = class_group(name, c.l3_ways, host)
        return dataclasses.replace(self, solver=SolverInput(
            host, dict(reservations), groups, compaction, monitor))

    def with_relocated(self, pairs: Mapping[int, Mapping[str, Sequence[
            tuple[int, int]]]]) -> HostRdtState:
        """This state with groups moved: cache id -> type -> (old mask,
        new mask).  A sharer stays one, and the PMD COS spans where the
        sharers are now (the compute writes it with the move)."""
        if not pairs:
            return self
        cache = dict(self.cache)
        for cid, by_type in pairs.items():
            c = cache.get(cid)
            if c is None:
                continue
            used, want = dict(c.used), dict(c.pmd_want)
            for kind, moves in by_type.items():
                w = want.get(kind, 0)
                # All old places go before any new one comes: a group may
                # move onto the ways another left.
                sharers = [(was, now) for was, now in moves
                           if w and was & w == was]
                for was, _now in moves:
                    used[kind] &= ~was
                for was, _now in sharers:
                    w &= ~was
                for _was, now in moves:
                    used[kind] |= now
                for _was, now in sharers:
                    w |= now
                if w:
                    want[kind] = w
            c = dataclasses.replace(c, used=used, pmd_want=want)
            if c.pmd:
                c = dataclasses.replace(c, used={
                    k: m | c.pmd_cover(k) for k, m in used.items()})
            cache[cid] = c
        return dataclasses.replace(self, cache=cache, solver=None)

    def with_allocation(self, masks: Mapping[int, Mapping[str, int]],
                        clos: int = 1, pmd_share: bool = False,
                        rmids: int | None = None) -> HostRdtState:
        """This state after an allocation of ``masks`` and ``clos`` CLOS.

        ``pmd_share``: the masks are a PMD sharer's, so the PMD COS spans
        them too on the cache ids where its rule holds.  ``rmids``: the
        RMIDs the allocation takes on a monitoring host (one per CLOS
        unless told: every new group has one).
        """
        cache = dict(self.cache)
        for cid, by_type in masks.items():
            c = cache[cid]
            used = dict(c.used)
            want = dict(c.pmd_want)
            for kind, mask in by_type.items():
                used[kind] |= mask
                if pmd_share and c.pmd:
                    want[kind] = want.get(kind, 0) | mask
            c = dataclasses.replace(
                c, used=used, pmd_want={k: m for k, m in want.items() if m})
            if pmd_share and c.pmd:
                # The PMD COS is written over its whole span: holes in it
                # are the sharers' from now on, no one else's.
                c = dataclasses.replace(c, used={
                    k: m | c.pmd_cover(k) for k, m in used.items()})
            cache[cid] = c
        taken = clos if rmids is None else rmids
        left = self.rmids_free - taken if self.mon_capable \
            else self.rmids_free
        return dataclasses.replace(self, cache=cache, solver=None,
                                   clos_free=self.clos_free - clos,
                                   rmids_free=max(left, 0))

    # -- stats encoding -------------------------------------------------
    #
    # One JSON string, compact: the state, and the solver's input the
    # filter decides on ("plan").  What only depends on the hardware
    # (CDP, MB, way geometry) travels as one inner string, "shape".  The
    # masks stay, so the whole state can be read back (live migration
    # does).

    def shape_text(self) -> str:
        """CDP, MB and every cache id's geometry, as one canonical text."""
        caches = [self.cache[cid] for cid in sorted(self.cache)]
        mb = self.mb
        return json.dumps(
            [int(self.cdp),
             [mb.units, mb.gran, mb.min, mb.max, list(mb.ids)] if mb
             else None,
             [[c.id, c.cbm_len, c.way_size, c.min_ways, int(c.sparse)]
              for c in caches]],
            separators=(",", ":"))

    def to_stats(self) -> dict[str, str]:
        kinds = self.cache_types
        doc: dict[str, object] = {
            "v": STATS_VERSION,
            "shape": self.shape_text(),
            "clos": self.clos_free,
            "rmid": [self.rmids, self.rmids_free],
            "mon": sorted(self.monitoring),
            # [id, cpus, used masks (hex), the PMD COS's wanted ways
            # (hex; null: no PMD rule here)], masks per type in
            # cache_types order.
            "l3": [_l3_entry(self.cache[cid], kinds)
                   for cid in sorted(self.cache)],
            # [cell, cpus]
            "cells": [[cell, caps_mod.format_cpu_list(cpus)]
                      for cell, cpus in sorted(self.cells.items())],
        }
        if self.classes is not None:
            # [name, ways, mb, exists]
            doc["cls"] = [[c.name, c.l3_ways, c.mb, int(c.exists)]
                          for c in sorted(self.classes.values(),
                                          key=lambda c: c.name)]
        if self.solver is not None:
            doc["plan"] = self.solver.to_doc()
        return {STATS_KEY: json.dumps(doc, separators=(",", ":"))}

    @classmethod
    def from_stats(cls, stats: Mapping[str, str] | None
                   ) -> HostRdtState | None:
        """The state a compute node published, or None for a plain host.

        A document of an unknown version, or one that does not parse,
        reads as "no RDT": the filter then refuses RDT requests for that
        host instead of guessing.
        """
        raw = (stats or {}).get(STATS_KEY)
        if not raw:
            return None
        try:
            doc = json.loads(raw)
            version = doc.get("v")
            if version == 1:
                return cls._from_v1(doc)
            if version not in _READABLE_VERSIONS:
                return None
            cdp_, mb, geo = json.loads(doc["shape"])
            cdp = bool(cdp_)
            kinds = CDP_TYPES if cdp else (BOTH,)
            cache = {}
            for g, entry in zip(geo, doc["l3"], strict=True):
                cid, n, way, mn = g[:4]
                cid2, cpus, used = entry[:3]
                if cid != cid2:
                    return None
                # Version 2 has no sparse flag and no PMD rule; version
                # 3 has the rooms before the rule (older schedulers read
                # them), version 4 the rule right after the masks.
                sparse = bool(g[4]) if version >= 3 else False
                want = entry[3] if version >= 4 else \
                    entry[5] if version == 3 else None
                cache[int(cid)] = CacheIdState(
                    id=int(cid),
                    cpus=frozenset(caps_mod.parse_cpu_list(cpus)),
                    cbm_len=int(n), way_size=int(way), min_ways=int(mn),
                    used={k: int(m, 16) for k, m in zip(kinds, used,
                                                         strict=True)},
                    sparse=sparse, pmd=want is not None,
                    pmd_want={} if want is None else {
                        k: int(m, 16) for k, m in zip(kinds, want,
                                                      strict=True)
                        if int(m, 16)})
            classes = None
            if "cls" in doc:
                # Version 3 says after these whether the class can be
                # made: the solver's to say now.
                classes = {c[0]: ClassState(c[0], int(c[1]), c[2],
                                            bool(c[3]))
                           for c in doc["cls"]}
            total, free = doc["rmid"]
            solver = None
            try:
                if "plan" in doc:
                    solver = SolverInput.from_doc(doc["plan"])
            except (ValueError, KeyError, TypeError, AttributeError):
                # Optional: a form this reader does not know (a newer
                # compute's) leaves the rest of the state readable.
                solver = None
            return cls(
                cache=cache, cdp=cdp, clos_free=int(doc["clos"]),
                mb=MbState(mb[0], int(mb[1]), int(mb[2]), mb[3],
                           tuple(mb[4])) if mb else None,
                monitoring=frozenset(doc["mon"]),
                rmids=int(total), rmids_free=int(free),
                cells={int(cell): frozenset(caps_mod.parse_cpu_list(cpus))
                       for cell, cpus, *_ids in doc["cells"]},
                classes=classes, solver=solver)
        except (ValueError, KeyError, TypeError, AttributeError,
                IndexError):
            return None

    @classmethod
    def _from_v1(cls, doc: dict[str, Any]) -> HostRdtState:
        """A compute not yet upgraded: no free RMIDs, cells or classes."""
        cache = {int(cid): CacheIdState(
            id=int(cid),
            cpus=frozenset(caps_mod.parse_cpu_list(c["cpus"])),
            cbm_len=int(c["len"]), way_size=int(c["way"]),
            min_ways=int(c["min"]),
            used={k: int(m, 16) for k, m in c["used"].items()})
            for cid, c in doc["l3"].items()}
        mb = doc.get("mb")
        rmids = int(doc.get("rmids", 0))
        return cls(cache=cache, cdp=bool(doc["cdp"]),
                   clos_free=int(doc["clos_free"]),
                   mb=MbState(mb["units"], int(mb["gran"]), int(mb["min"]),
                              mb["max"], tuple(mb["ids"])) if mb else None,
                   monitoring=frozenset(doc.get("mon", ())),
                   rmids=rmids, rmids_free=rmids)


def from_resctrl(view: Any,
                 cache_cpus: Mapping[int, frozenset[int]] | None = None,
                 way_sizes: Mapping[int, int] | None = None,
                 host_cells: Mapping[int, frozenset[int]] | None = None,
                 classes: Mapping[str, rdtclass.RdtClass] | None = None,
                 prefix: str = "", pmd_cos: bool | None = None,
                 pmd_base: Any = None) -> HostRdtState:
    """Build the state from a :class:`~nova_rdt.resctrl.hostview.HostView`.

    ``cache_cpus`` and ``way_sizes`` override what resctrl's sysfs topology
    says, so the driver can use libvirt's own view (libvirt validates sizes
    against its granularity, not ours).  Used masks are libvirt's: the
    union of every group's mask, the root's included.  ``host_cells``
    (cell -> CPUs) and ``classes`` (``[rdt] classes``, whose groups are
    named with ``prefix``) are published for the filter when given.

    The PMD COS (the group ``naming.pmd_group(prefix)``): its rule holds
    when ``pmd_cos`` says so (None: when the group exists), on the cache
    ids its CPUs use (every id while it has no CPUs).  What it must
    cover there is ``pmd_base`` (its own ways, a
    :class:`~nova_rdt.resctrl.schemata.Schemata` such as
    :func:`nova_rdt.allocation.hostlayout.plan` gives) and the groups
    inside its mask, the sharers; without ``pmd_base``, its whole mask
    (ways a departed sharer left inside it are then not offered).
    """
    caps = view.caps
    cdp = caps.cdp
    cache: dict[int, CacheIdState] = {}
    kinds = CDP_TYPES if cdp else (BOTH,)
    ctrl = {g.name: g for g in view.groups if g.kind == "ctrl"}
    pmd_group = ctrl.get(naming.pmd_group(prefix))
    rule = pmd_group is not None if pmd_cos is None else pmd_cos
    root = ctrl.get("/")
    l3 = caps.cache.get("L3CODE" if cdp else "L3")
    if l3 is not None:
        by_all = cbmrules.union(g.schemata for g in view.groups)
        by_others = cbmrules.union(g.schemata for g in view.groups
                                   if g is not pmd_group)
        for dom_id, dom in sorted(l3.domains.items()):
            ws = (way_sizes or {}).get(dom_id) or l3.way_size(dom_id) or 0
            cpus = frozenset((cache_cpus or {}).get(dom_id, dom.cpus))
            on = rule and (pmd_group is None or not pmd_group.cpus
                           or bool(cpus & set(pmd_group.cpus)))
            # Known the base, the PMD COS is what it must cover (its span,
            # added below), whatever its mask still holds: the compute
            # plans it so.  Else its mask counts, as everyone's.
            taken = by_others if on and pmd_base is not None else by_all
            used = {k: taken.get((_RESOURCE_OF_TYPE[k], dom_id), 0)
                    for k in kinds}
            want = {}
            if on:
                want = {k: _pmd_want(view, _RESOURCE_OF_TYPE[k], dom_id,
                                     pmd_group, root, pmd_base)
                        for k in kinds}
            c = CacheIdState(
                id=dom_id, cpus=cpus, cbm_len=l3.cbm_len,
                way_size=ws, min_ways=max(l3.min_cbm_bits, 1), used=used,
                sparse=l3.sparse_masks, pmd=on,
                pmd_want={k: m for k, m in want.items() if m})
            if on:
                # The span is the PMD COS's, whatever its mask says now.
                c = dataclasses.replace(c, used={
                    k: m | c.pmd_cover(k) for k, m in used.items()})
            cache[dom_id] = c
    mb = None
    bw = caps.bandwidth.get("MB")
    if bw is not None:
        mb = MbState(units=bw.units, gran=bw.bandwidth_gran,
                     min=bw.min_bandwidth, max=bw.max_bandwidth,
                     ids=tuple(bw.domain_ids))
    ctrl_groups = sum(1 for g in view.groups
                      if g.kind == "ctrl" and g.name != "/")
    mon = caps.monitoring.get("L3_MON") or caps.monitoring.get("L3")
    rmids = mon.num_rmids if mon else 0
    class_states = None
    if classes is not None:
        names = {g.name for g in view.groups if g.kind == "ctrl"}
        class_states = {
            c.name: ClassState(c.name, c.l3_ways, c.mb,
                               c.group_name(prefix) in names)
            for c in classes.values()}
    return HostRdtState(
        cache=cache, cdp=cdp,
        clos_free=max(caps.usable_clos - ctrl_groups, 0),
        mb=mb,
        monitoring=frozenset(mon.features) if mon else frozenset(),
        rmids=rmids,
        # Limbo RMIDs (freed, still dirty) are not visible here; the
        # kernel's EBUSY for them is a rare, transient refusal.
        rmids_free=max(rmids - len(view.groups), 0) if mon else 0,
        cells=dict(host_cells or {}),
        classes=class_states)


def _pmd_want(view: Any, res: str, cid: int, pmd_group: Any, root: Any,
              pmd_base: Any) -> int:
    """What the PMD COS must cover on one cache id and resource."""
    mask = pmd_group.schemata.get(res, {}).get(cid, 0) if pmd_group else 0
    host = root.schemata.get(res, {}).get(cid, 0) if root else 0
    if mask & host:
        # With nothing to span, the PMD COS holds the host's ways.
        mask = 0
    if pmd_base is None:
        return mask
    want = pmd_base.get(res, cid) or 0
    for g in view.groups:
        if g.kind != "ctrl" or g is pmd_group or g is root:
            continue
        m = g.schemata.get(res, {}).get(cid, 0)
        if m and m & mask == m:
            want |= m                   # a sharer, inside the PMD COS
    return want
