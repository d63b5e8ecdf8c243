"""Class groups: one resctrl group per ``rdt:class``, shared by its members.

A class group is nova-rdt's own (``<prefix>class-<name>``), made by the
first member's start and removed once no member lives.  Its masks are
resolved first, from what resctrl holds, by the pure functions below;
then one step writes them, in the manner of goresctrl's
``resolve()``/``configureResctrl()``.  Everything runs under the resctrl
``flock`` that libvirt's allocator also takes.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping

from nova_rdt import failpoints
from nova_rdt import naming
from nova_rdt.allocation import rdtclass
from nova_rdt.host import context
from nova_rdt.host import enforce
from nova_rdt.host.context import LOG
from nova_rdt.host.context import HostContext
from nova_rdt.host.context import IsolationError
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import Group
from nova_rdt.resctrl.schemata import Schemata

Planned = Mapping[tuple[int, str], int]     # (cache id, kind) -> mask


def l3_resources(caps: caps_mod.Capabilities
                 ) -> dict[str, caps_mod.CacheResource]:
    """The L3 resources (L3, or L3CODE and L3DATA): what classes hold."""
    return {n: r for n, r in caps.cache.items() if r.level == 3}


# -- resolve: pure ----------------------------------------------------------

def planned_schemata(cls: rdtclass.RdtClass, caps: caps_mod.Capabilities,
                     planned: Planned | None,
                     others: Mapping[str, Mapping[int, int]]
                     ) -> Schemata | None:
    """The decided class masks, when they hold the class's ways on every
    cache id, pass the kernel's rules and overlap none of ``others`` (per
    resource and cache id, every group's ways); else None."""
    if not planned:
        return None
    lines: dict[str, dict[int, int]] = {}
    for (cid, kind), mask in planned.items():
        res = enforce.RESOURCE_OF_KIND.get(kind)
        info = caps.cache.get(res or "")
        if res is None or info is None or cid not in info.domains:
            return None
        if cbm.popcount(mask) != max(cls.l3_ways, info.min_cbm_bits) \
                or mask & others.get(res, {}).get(cid, 0):
            return None
        try:
            cbm.check(mask, info.cbm_len, info.min_cbm_bits,
                      info.sparse_masks)
        except cbm.CbmError:
            return None
        lines.setdefault(res, {})[cid] = mask
    want = {n for n in ("L3CODE", "L3DATA") if caps.cdp} or {"L3"}
    for res in want & set(caps.cache):
        if set(lines.get(res, {})) != set(caps.cache[res].domains):
            return None
    _add_mb(cls, caps, lines)
    return Schemata(lines)


def free_schemata(cls: rdtclass.RdtClass, caps: caps_mod.Capabilities,
                  used: Mapping[tuple[str, int], int]) -> Schemata:
    """``cls.l3_ways`` free ways on every L3 cache id, libvirt's way (the
    smallest free run that fits, lowest ways first); ``used``: per
    (resource, cache id) the ways other groups hold.

    Only L3 lines: a class is defined in L3 ways.  Its L2 (on hosts
    with L2 CAT) stays what the kernel gives a new group, the
    shareable and unused ways (rdtgroup_init_alloc()): every way, as
    the root keeps all of L2, so no L2 way is ever looked for."""
    lines: dict[str, dict[int, int]] = {}
    for res_name, res in l3_resources(caps).items():
        lines[res_name] = {}
        for cid in sorted(res.domains):
            free = cbm.full_mask(res.cbm_len) & ~used.get((res_name, cid), 0)
            mask = cbm.best_fit(free, max(cls.l3_ways, res.min_cbm_bits))
            if mask is None:
                raise IsolationError(
                    f"class {cls.name}: no {cls.l3_ways} contiguous "
                    f"free ways on {res_name} cache id {cid}")
            lines[res_name][cid] = mask
    _add_mb(cls, caps, lines)
    return Schemata(lines)


def _add_mb(cls: rdtclass.RdtClass, caps: caps_mod.Capabilities,
            lines: dict[str, dict[int, int]]) -> None:
    if cls.mb is not None and "MB" in caps.bandwidth:
        lines["MB"] = {n: cls.mb for n in caps.bandwidth["MB"].domain_ids}


def wider_than_class(cls: rdtclass.RdtClass, caps: caps_mod.Capabilities,
                     current: Schemata) -> bool:
    """Whether a class group holds more L3 ways than its class: a group
    made but never given its ways (a crash between its mkdir and its
    schemata write) keeps the kernel's default, every way or every
    unused and shareable one."""
    want = {name: max(cls.l3_ways, res.min_cbm_bits)
            for name, res in l3_resources(caps).items()}
    return not all(cbm.popcount(mask) <= want[name]
                   for name in want
                   for mask in current.domains(name).values())


def stale_groups(prefix: str, group_names: Iterable[str],
                 live_classes: set[str]) -> list[str]:
    """The class groups among ``group_names`` whose class has no living
    member."""
    infix = prefix + naming.CLASS_INFIX
    return [n for n in group_names
            if n.startswith(infix) and n[len(infix):] not in live_classes]


# -- apply -----------------------------------------------------------------

class ClassGroups:
    """Class groups on one host: join, repair, prune."""

    def __init__(self, host: HostContext):
        self.host = host
        self.fs = host.fs

    def join(self, name: str, tids: Iterable[int],
             planned: Planned | None = None,
             held: Mapping[tuple[str, int], int] | None = None,
             snap: context.Snapshot | None = None) -> str:
        """Add ``tids`` to class ``name``'s group, making it first if need
        be: at the masks nova-rdt decided (``planned``, from the member's
        metadata) when they are safe, else at free ways found here, which
        ``held`` (per resource and cache id) also excludes: the recorded
        ways of running domains whose groups are still to be re-made."""
        cls = self.host.classes.get(name)
        if cls is None:
            raise IsolationError(f"rdt:class={name} is not defined in "
                                 f"[rdt] classes on this host")
        gname = cls.group_name(self.fs.prefix)
        with self.fs.locked():
            snap = snap or context.Snapshot(self.fs)
            try:
                g = self.fs.group(gname)
            except errors.GroupNotFound:
                g = self._create(gname,
                                 self._new_schemata(cls, planned, held,
                                                    snap))
                snap.kept(gname, g.schemata())
            else:
                self._repair(cls, g, snap)
            failpoints.hit("agent.class_join")
            self.fs.add_tasks(g, tids, ignore_missing=True)
        return gname

    def _new_schemata(self, cls: rdtclass.RdtClass,
                      planned: Planned | None,
                      held: Mapping[tuple[str, int], int] | None,
                      snap: context.Snapshot) -> Schemata:
        caps = snap.caps
        used = snap.used()
        for key, mask in (held or {}).items():
            used[key] = used.get(key, 0) | mask
        if planned:
            busy = snap.taken(set())
            for (res, cid), mask in (held or {}).items():
                per = busy.setdefault(res, {})
                per[cid] = per.get(cid, 0) | mask
            decided = planned_schemata(cls, caps, planned, busy)
            if decided is not None:
                return decided
        return free_schemata(cls, caps, used)

    def _create(self, gname: str, schemata: Schemata) -> Group:
        g = self.fs.create_group(gname)
        failpoints.hit("agent.class_update")
        try:
            self.fs.write_schemata(g, schemata)
        except errors.ResctrlError:
            self.fs.delete_group(g, missing_ok=True)
            raise
        LOG.info("created class group %s: %s", gname,
                 schemata.format().strip().replace("\n", " "))
        return g

    def _repair(self, cls: rdtclass.RdtClass, g: Group,
                snap: context.Snapshot) -> None:
        """A class group wider than its class gets its own ways now.  A
        group no wider than its class is left alone: the runtime
        controller narrows classes on purpose, and this runs on every
        member's start."""
        caps = snap.caps
        if not wider_than_class(cls, caps, snap.schemata.get(g.name)
                                or g.schemata()):
            return
        schemata = free_schemata(cls, caps, snap.used(skip=g.name))
        snap.kept(g.name, self.fs.write_schemata(g, schemata))
        LOG.warning("class group %s had no ways of its own (a write cut "
                    "short); now %s", g.name,
                    schemata.format().strip().replace("\n", " "))

    def prune(self) -> list[str]:
        """Remove class groups with no living member."""
        recs, _bad = self.host.records.all()
        live = {r.rdt_class for r in recs if r.rdt_class and r.alive()}
        with self.fs.locked():
            groups = {g.name: g for g in self.fs.groups(with_mon=False)}
            removed = stale_groups(self.fs.prefix, groups, live)
            for name in removed:
                self.fs.delete_group(groups[name], missing_ok=True)
                LOG.info("removed class group %s: no members left", name)
        return removed
