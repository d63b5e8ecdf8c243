"""Host shapes, a reservation book and an independent rule checker for the
placement planner's tests (nova_rdt.allocation.placement).

The checker restates the rules from the module's docstring without using
its code, so a test that passes through it judges the planner rather than
repeating it.  The brute force enumerates every valid mask of a demand.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Mapping
import dataclasses
import itertools

from nova_rdt.allocation import placement as pl
from nova_rdt.emulator import profiles
from nova_rdt.resctrl import cbm


def top(cbm_len, n):
    return cbm.Run(cbm_len - n, n).mask if n else 0


def shape(cbm_len, ids=(0, 1), reserved=2, pmd_ways=0, pmd_ids="all",
          clos=14, min_bits=1, sparse=False, resources=("L3",),
          foreign=None):
    """A host: ``reserved`` ways at the bottom for the host, ``pmd_ways``
    at the top for the PMD base, the PMD COS on ``pmd_ids`` ("all", a
    set, or None for off)."""
    if pmd_ids == "all":
        pmd_ids = frozenset(ids)
    elif pmd_ids is not None:
        pmd_ids = frozenset(pmd_ids)
    rule = pl.Resource(cbm_len, min_bits, sparse)
    return pl.Host(
        resources={r: rule for r in resources},
        ids={r: tuple(ids) for r in resources},
        host_ways={r: {i: cbm.full_mask(reserved) for i in ids}
                   for r in resources},
        foreign=foreign or {},
        pmd_base={r: {i: top(cbm_len, pmd_ways) for i in ids}
                  for r in resources} if pmd_ways else {},
        pmd_ids=pmd_ids, clos=clos)


def gold_6252(pmd_ways=2, pmd_ids="all", **kw):
    """gold-6252 with reserved_host_ways=2: 11 ways, 2 cache ids, 16 CLOS
    (less the root's and the PMD group's)."""
    p = profiles.get("gold-6252")
    kw.setdefault("clos", p.l3.num_closids - 2)
    return shape(p.l3.cbm_len, ids=range(p.domains), pmd_ways=pmd_ways,
                 pmd_ids=pmd_ids, min_bits=max(p.l3.min_cbm_bits, 1), **kw)


def e5_2658_v3(pmd_ways=2, **kw):
    """e5-2658-v3 as the ONP scenario lays it out: 20 ways, min 2 bits,
    4 CLOS (2 left after the root and the PMD group), 4 host ways."""
    p = profiles.get("e5-2658-v3")
    kw.setdefault("clos", p.l3.num_closids - 2)
    kw.setdefault("reserved", 4)
    return shape(p.l3.cbm_len, ids=range(p.domains), pmd_ways=pmd_ways,
                 min_bits=p.l3.min_cbm_bits, **kw)


def gold_6252_cdp(pmd_ways=2, **kw):
    """gold-6252 mounted with -o cdp: L3CODE and L3DATA, 8 CLOS."""
    p = profiles.get("gold-6252-cdp")
    kw.setdefault("clos", p.l3.num_closids // 2 - 2)
    return shape(p.l3.cbm_len, ids=range(p.domains), pmd_ways=pmd_ways,
                 resources=("L3CODE", "L3DATA"), **kw)


def amd_epyc(pmd_ways=2, **kw):
    """amd-epyc: 16 ways, sparse masks, min_cbm_bits 0, 4 CCDs, 16 CLOS."""
    p = profiles.get("amd-epyc")
    kw.setdefault("clos", p.l3.num_closids - 2)
    return shape(p.l3.cbm_len, ids=range(p.domains), pmd_ways=pmd_ways,
                 min_bits=p.l3.min_cbm_bits, sparse=p.l3.sparse_masks, **kw)


def xeon_w_11865mre(pmd_ways=2, **kw):
    """xeon-w-11865mre, the profile with L2 CAT: one 12-way L3 (nova-rdt
    places L3 only; L2 keeps the kernel's default in every group), 4
    CLOS as the minimum over L3 and L2 (2 left after the root and the
    PMD group)."""
    p = profiles.get("xeon-w-11865mre")
    kw.setdefault("clos", p.l3.num_closids - 2)
    return shape(p.l3.cbm_len, ids=range(p.domains), pmd_ways=pmd_ways,
                 min_bits=max(p.l3.min_cbm_bits, 1), **kw)


def managed(host, res, cid):
    """Ways of (res, cid) that are neither the host's, foreign nor base."""
    rule = host.resources[res]
    used = (host.host_ways.get(res, {}).get(cid, 0)
            | host.foreign.get(res, {}).get(cid, 0)
            | _base(host, res, cid))
    return cbm.popcount(cbm.full_mask(rule.cbm_len) & ~used)


def _base(host, res, cid):
    if host.pmd_ids is None or cid not in host.pmd_ids:
        return 0
    return host.pmd_base.get(res, {}).get(cid, 0)


def span(mask):
    if not mask:
        return 0
    low = (mask & -mask).bit_length() - 1
    return cbm.Run(low, mask.bit_length() - low).mask


def per(ways, resources, ids):
    return {r: {i: ways for i in ids} for r in resources}


# -- a book of reservations, kept as the driver would ---------------------

@dataclasses.dataclass
class Book:
    host: pl.Host
    classes: dict[str, pl.ClassGroup] = dataclasses.field(
        default_factory=dict)
    reservations: dict[str, pl.Reservation] = dataclasses.field(
        default_factory=dict)
    plan: pl.Plan | None = None

    def __post_init__(self):
        self.plan = pl.release(self.host, self.reservations, self.classes,
                               "")

    def define(self, name, ways):
        self.classes[name] = pl.ClassGroup(name, ways)

    def boot(self, uuid, ways, share=False, cls=None, movable=True,
             compaction=False):
        new = pl.Reservation(uuid, ways, pmd_share=share, rdt_class=cls,
                             movable=movable)
        return self.apply(pl.place(self.host, self.reservations,
                                   self.classes, new, compaction), new)

    def start(self, uuid, compaction=False):
        """Re-place a kept reservation, as a power-on does."""
        r = dataclasses.replace(self.reservations[uuid], masks=None)
        return self.apply(pl.place(self.host, self.reservations,
                                   self.classes, r, compaction), r)

    def delete(self, uuid):
        plan = pl.release(self.host, self.reservations, self.classes, uuid)
        del self.reservations[uuid]
        return self.apply(plan)

    def apply(self, plan, new=None):
        if new is not None:
            self.reservations[new.uuid] = new
        for uuid, r in list(self.reservations.items()):
            self.reservations[uuid] = dataclasses.replace(
                r, masks=plan.instances[uuid])
        for name, g in list(self.classes.items()):
            self.classes[name] = dataclasses.replace(
                g, masks=plan.classes.get(name))
        check_plan(self.host, self.reservations, self.classes, plan)
        self.plan = plan
        return plan

    def masks(self, uuid, res="L3"):
        return dict(self.plan.instances[uuid].get(res, {}))


# -- the rules, restated --------------------------------------------------

def _valid(mask, rule):
    try:
        cbm.check(mask, rule.cbm_len, rule.min_bits, rule.sparse)
    except cbm.CbmError:
        return False
    return mask != 0


def cache_ok(host, res, cid, groups):
    """Whether ``groups`` [(mask, ways, sharer)] obey every rule on one
    (res, cid); sharer means bound by the span rule (pmd_share on a PMD
    cache id)."""
    rule = host.resources[res]
    blocked = (host.host_ways.get(res, {}).get(cid, 0)
               | host.foreign.get(res, {}).get(cid, 0))
    base = _base(host, res, cid)
    held = blocked | base
    want = base
    excl = blocked & ~base
    for mask, ways, sharer in groups:
        if not _valid(mask, rule) or cbm.popcount(mask) != ways:
            return False
        if mask & held:
            return False
        held |= mask
        if sharer:
            want |= mask
        else:
            excl |= mask
    if want:
        cover = want if rule.sparse else span(want)
        if cover & excl:
            return False
    return True


def _groups(host, reservations, classes, plan, res, cid, skip=None):
    on = host.pmd_ids is not None and cid in host.pmd_ids
    out = []
    for uuid, r in reservations.items():
        if uuid == skip or r.rdt_class is not None:
            continue
        n = r.ways.get(res, {}).get(cid, 0)
        if n:
            out.append((plan.instances[uuid][res][cid], n,
                        r.pmd_share and on))
    for name, masks in plan.classes.items():
        n = classes[name].ways.get(res, {}).get(cid, 0)
        if n:
            out.append((masks[res][cid], n, False))
    return out


def clos_used(plan):
    """CLOS a plan's groups take: instances with ways of their own and
    the classes in use (the PMD group is the host's)."""
    return sum(1 for m in plan.instances.values()
               if any(per for per in m.values())) + len(plan.classes)


def check_plan(host, reservations, classes, plan):
    """Assert every rule of the planner's docstring on ``plan``."""
    assert set(plan.instances) == set(reservations)
    in_use = {r.rdt_class for r in reservations.values() if r.rdt_class}
    assert set(plan.classes) == in_use
    for uuid, r in reservations.items():
        got = {res: dict(m) for res, m in plan.instances[uuid].items() if m}
        if r.rdt_class is not None:
            assert got == {}, (uuid, got)
            continue
        asked = {res: {c: n for c, n in m.items() if n}
                 for res, m in r.ways.items()}
        asked = {res: m for res, m in asked.items() if m}
        assert {res: set(m) for res, m in got.items()} == \
            {res: set(m) for res, m in asked.items()}, (uuid, got, asked)
        for res, m in got.items():
            for cid, mask in m.items():
                assert cbm.popcount(mask) == asked[res][cid]
                # libvirt makes an instance's group from its size, on a
                # contiguous free run only, even where masks may be
                # sparse.
                assert cbm.is_contiguous(mask), (uuid, res, cid, mask)
    for name in in_use:
        for res, m in classes[name].ways.items():
            for cid, n in m.items():
                if n:
                    assert cbm.popcount(plan.classes[name][res][cid]) == n
    for res, rule in host.resources.items():
        for cid in host.ids[res]:
            groups = _groups(host, reservations, classes, plan, res, cid)
            assert cache_ok(host, res, cid, groups), (res, cid, groups)
            if host.pmd_ids is None:
                continue
            want = _base(host, res, cid)
            for mask, _n, sharer in groups:
                if sharer:
                    want |= mask
            expect = (want if rule.sparse else span(want)) if want else \
                host.host_ways[res][cid]
            assert plan.pmd[res][cid] == expect, (res, cid)
            assert cbm.check(expect, rule.cbm_len, rule.min_bits,
                             rule.sparse) is None
    if host.pmd_ids is None:
        assert not plan.pmd
    need = sum(1 for r in reservations.values() if r.needs_clos) \
        + len(in_use)
    assert clos_used(plan) == need <= host.clos


# -- the brute force ------------------------------------------------------

def _all_masks(rule, n, free, scattered=True) -> Iterator[int]:
    """Every mask of ``n`` ways within ``free`` the kernel accepts.  On a
    non-sparse resource those are the windows (cbm.check refuses any
    other); on a sparse one, every combination of the free ways, unless
    not ``scattered``: an instance's group is libvirt's, which allocates
    only contiguous runs."""
    if rule.sparse and scattered:
        ways = [i for i in range(rule.cbm_len) if free >> i & 1]
        for combo in itertools.combinations(ways, n):
            yield sum(1 << i for i in combo)
        return
    for s in range(rule.cbm_len - n + 1):
        m = cbm.Run(s, n).mask
        if m & free == m:
            yield m


def placeable(host, reservations, classes, plan, new):
    """Whether ``new`` has a valid position on every (res, cid) it needs,
    everything in ``plan`` staying where it is (compaction off), and the
    CLOS to spare."""
    book = dict(reservations)
    book[new.uuid] = new
    in_use = {r.rdt_class for r in book.values() if r.rdt_class}
    if sum(1 for r in book.values() if r.needs_clos) + len(in_use) \
            > host.clos:
        return False
    if new.rdt_class is not None:
        if new.rdt_class in plan.classes:
            return True
        ways, sharer = classes[new.rdt_class].ways, False
    else:
        ways, sharer = new.ways, new.pmd_share
    for res, m in ways.items():
        for cid, n in m.items():
            if not n:
                continue
            rule = host.resources[res]
            on = host.pmd_ids is not None and cid in host.pmd_ids
            others = _groups(host, reservations, classes, plan, res, cid,
                             skip=new.uuid)
            # A mask over a held way is refused by cache_ok anyway; not
            # enumerating those keeps sparse caches quick.
            held = host.host_ways.get(res, {}).get(cid, 0) \
                | host.foreign.get(res, {}).get(cid, 0) \
                | _base(host, res, cid)
            for mask, _n, _s in others:
                held |= mask
            free = cbm.full_mask(rule.cbm_len) & ~held
            if not any(cache_ok(host, res, cid,
                                others + [(x, n, sharer and on)])
                       for x in _all_masks(rule, n, free,
                                           new.rdt_class is not None)):
                return False
    return True


def same_masks(a: Mapping, b: Mapping) -> bool:
    def norm(m):
        return {r: dict(p) for r, p in m.items() if p}
    return norm(a) == norm(b)


def repackable(host, reservations, classes, plan, new, moving=None):
    """Whether ``new`` fits once some placed reservations move (compaction
    on): those in ``moving`` (default: every movable one), class groups
    and the rest staying put.  Exhaustive over every valid mask of every
    moving group, one (res, cid) at a time."""
    book = dict(reservations)
    book[new.uuid] = new
    in_use = {r.rdt_class for r in book.values() if r.rdt_class}
    if sum(1 for r in book.values() if r.needs_clos) + len(in_use) \
            > host.clos:
        return False
    if new.rdt_class is not None:
        return new.rdt_class in plan.classes or placeable(
            host, reservations, classes, plan, new)
    if moving is None:
        moving = {u for u, r in reservations.items() if r.movable}
    for res, m in new.ways.items():
        for cid, n in m.items():
            if n and not _repack_cache(host, reservations, classes, plan,
                                       new, moving, res, cid, n):
                return False
    return True


def _repack_cache(host, reservations, classes, plan, new, moving, res, cid,
                  n):
    on = host.pmd_ids is not None and cid in host.pmd_ids
    rule = host.resources[res]
    fixed, loose = [], [(n, new.pmd_share and on)]
    for uuid, r in reservations.items():
        if uuid == new.uuid or r.rdt_class is not None:
            continue
        k = r.ways.get(res, {}).get(cid, 0)
        if not k:
            continue
        if uuid in moving:
            loose.append((k, r.pmd_share and on))
        else:
            fixed.append((plan.instances[uuid][res][cid], k,
                          r.pmd_share and on))
    for name, masks in plan.classes.items():
        k = classes[name].ways.get(res, {}).get(cid, 0)
        if k:
            fixed.append((masks[res][cid], k, False))
    full = cbm.full_mask(rule.cbm_len)
    seen = set()

    def go(i, groups):
        if not cache_ok(host, res, cid, groups):
            return False
        if i == len(loose):
            return True
        key = (i, frozenset(groups[len(fixed):]))
        if key in seen:
            return False
        seen.add(key)
        k, sharer = loose[i]
        held = 0
        for mask, _k, _s in groups:
            held |= mask
        return any(go(i + 1, groups + [(x, k, sharer)])
                   for x in _all_masks(rule, k, full & ~held, False))

    return go(0, list(fixed))
