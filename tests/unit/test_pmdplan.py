"""The PMD COS plan (nova_rdt.allocation.pmdplan) against the kernel model.

Random arrival and departure sequences of sharing and non-sharing VMs on
the emulator's ResctrlKernel: libvirt is modelled by its best fit, the
driver by ``pmdplan.refusal``, and now and then libvirt "does something
unpredicted" (a VM lands anywhere free).  Every mask nova-rdt writes must
be accepted by the kernel model, and the PMD mask must cover the base and
every sharing VM, and never another VM's or the host's ways.
"""

from __future__ import annotations

import errno
import random

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt.allocation import hostlayout
from nova_rdt.allocation import placement
from nova_rdt.allocation import pmdplan
from nova_rdt.emulator import profiles
from nova_rdt.emulator.kernel import KernelError
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.schemata import Schemata
from tests.kernel_fixtures import make_kernel
from tests.kernel_fixtures import materialize

PMD = "nova-rdt-pmd"


# -- plan_id, exhaustively on small caches ------------------------------


def _refusal(rules: pmdplan.CacheRules, current: int, pending: int, new: int,
            sharing: bool) -> str | None:
    """The rule the driver once used on libvirt's predicted placement (the
    model below places as libvirt does, and keeps off what broke the PMD
    COS): why a VM at ``new`` would break the PMD COS.

    ``current`` is the PMD span's wanted ways on this cache id (base plus
    sharing VMs, 0 when the PMDs only fall back to the host's ways),
    ``pending`` the ways of sharing VMs claimed but not started yet.
    A non-sharing VM may not land inside the span (libvirt never puts it
    there while the span is written, but a pending sharing VM's span is
    not written yet); a sharing VM must touch the span so the span grows
    by its ways alone, keeping one run without withholding free ways.
    None when the VM is fine.
    """
    if not new:
        return None
    want = current | pending
    if not sharing:
        if new & placement.span(want) and not rules.sparse:
            return (f"its ways {new:x} would sit inside the PMD COS "
                    f"span {placement.span(want):x}")
        return None
    if rules.sparse or not want:
        return None
    grown = want | new
    if placement.span(grown) != grown:
        return (f"its ways {new:x} are not adjacent to the PMD COS "
                f"{want:x}; the PMD mask {placement.span(grown):x} would "
                f"also cover ways no sharing VM holds")
    return None

def _masks(n):
    return [cbm.Run(s, w).mask for w in range(1, n + 1)
            for s in range(n - w + 1)]


@pytest.mark.parametrize("sparse", [False, True])
def test_plan_id_is_always_valid_and_never_covers_others(sparse):
    n = 6
    rules = pmdplan.CacheRules(n, 1, sparse)
    fallback = 0b1
    runs = _masks(n)
    for base in [0] + runs:
        for a in [0] + runs:
            for other in [0] + runs:
                if base & a or base & other or a & other:
                    continue
                others = other | fallback
                if (base | a) & fallback:
                    continue
                p = pmdplan.plan_id(rules, base, {"a": a} if a else {},
                                    others, fallback)
                cbm.check(p.mask, n, 1, sparse)
                if p.mask != fallback:
                    assert p.mask & others == 0
                    assert p.mask & base == base
                if "a" not in p.dropped:
                    assert p.mask & a == a
                if not (base | a):
                    assert p.mask == fallback
                assert p.absorbed & (base | a | others) == 0


def test_plan_id_spans_the_issue_layout():
    # Issue 17: pmd_shared_ways=2 at the top of 11 ways, a sharing VM
    # placed low by libvirt.  The union 0x63c is refused by the kernel.
    rules = pmdplan.CacheRules(11, 1, False)
    p = pmdplan.plan_id(rules, 0x600, {"vm": 0x3c}, 0x3, 0x3)
    assert p.mask == 0x7fc                  # one run, covers both
    assert p.absorbed == 0x1c0 and p.dropped == ()
    # A non-sharing VM in between: degraded, keeps the base, never
    # covers the other VM.
    p = pmdplan.plan_id(rules, 0x600, {"vm": 0x3c}, 0x3 | 0x40, 0x3)
    assert p.mask == 0x600 and p.dropped == ("vm",)


def test_plan_keeps_mb_full_and_lists_degradation():
    root = Schemata.parse("L3:0=3;1=3\nMB:0=100;1=100\n")
    base = Schemata.parse("L3:0=600;1=600\n")
    shares = {"a": Schemata.parse("L3:0=1e0;1=c\n")}
    others = {"L3": {0: 0x3, 1: 0x3 | 0x10}}
    plan = pmdplan.plan({"L3": [0, 1]}, base, root, shares, {"MB": 100},
                        {"L3": pmdplan.CacheRules(11)}, others)
    assert plan.schemata.get("MB", 1) == 100
    assert plan.schemata.get("L3", 0) == 0x7e0
    assert plan.schemata.get("L3", 1) == 0x600     # 0x10 is in the way
    assert plan.degraded and plan.dropped == ("a",) and plan.sharing == ()


# -- random sequences on the kernel model -------------------------------

class Host:
    """The kernel model, with libvirt's best fit and the driver's check."""

    def __init__(self, profile: str, reserved: int, pmd_ways: int):
        self.k, _clock, _tasks = make_kernel(profile)
        self.prof = profiles.get(profile)
        l3 = self.prof.l3
        self.cdp = self.prof.cdp
        self.res = ("L3CODE", "L3DATA") if self.cdp else ("L3",)
        self.ids = list(range(self.prof.domains))
        self.rules = pmdplan.CacheRules(l3.cbm_len, l3.min_cbm_bits,
                                        l3.sparse_masks)
        caps = self.capabilities()
        self.layout = hostlayout.plan(caps, reserved, pmd_ways)
        self.write("", self.layout.root)
        self.k.mkdir(PMD)
        self.vms: dict[str, tuple[bool, Schemata]] = {}
        self.rogue = False      # libvirt did something unpredicted
        self.sync()

    def capabilities(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            materialize(self.k, d)
            return caps_mod.discover(d)

    def write(self, group: str, s: Schemata):
        path = f"{group}/schemata" if group else "schemata"
        # Raises KernelError if the kernel would refuse it.
        self.k.write(path, s.format().encode())

    def read(self, group: str) -> Schemata:
        return Schemata.parse(self.k.read(f"{group}/schemata" if group
                                          else "schemata"))

    def used(self, res, cid, skip=()):
        u = 0
        for g in ["", PMD, *self.vms]:
            if g in skip:
                continue
            u |= self.read(g).get(res, cid) or 0
        return u

    def pmd_wanted(self, res, cid):
        cur = self.read(PMD).get(res, cid) or 0
        return 0 if cur == self.read("").get(res, cid) else cur

    def arrive(self, name, ways, sharing, rnd: random.Random, rogue: bool):
        full = cbm.full_mask(self.rules.cbm_len)
        lines = {}
        for res in self.res:
            lines[res] = {}
            for cid in self.ids:
                free = full & ~self.used(res, cid)
                if rogue:
                    spots = [cbm.Run(r.start + o, ways).mask
                             for r in cbm.runs(free) if r.length >= ways
                             for o in range(r.length - ways + 1)]
                    mask = rnd.choice(spots) if spots else None
                else:
                    mask = cbm.best_fit(free, ways)
                if mask is None:
                    return "full"
                lines[res][cid] = mask
        if not rogue:
            for res in self.res:
                for cid in self.ids:
                    if _refusal(self.rules, self.pmd_wanted(res, cid),
                                       0, lines[res][cid], sharing):
                        return "refused"
        before = {(r, c): self.pmd_wanted(r, c)
                  for r in self.res for c in self.ids}
        try:
            self.k.mkdir(name)
        except KernelError as e:
            assert e.errno == errno.ENOSPC      # out of CLOSIDs
            return "full"
        s = Schemata(lines)
        self.write(name, s)
        self.vms[name] = (sharing, s)
        self.rogue |= rogue
        plan = self.sync()
        if sharing and not rogue and not self.rogue:
            # On a predicted arrival the span grows by the VM's ways alone.
            for (r, c), was in before.items():
                assert plan.schemata.get(r, c) == was | lines[r][c]
        return "started"

    def leave(self, name):
        self.k.rmdir(name)
        del self.vms[name]
        self.sync()

    def sync(self) -> pmdplan.PmdPlan:
        shares = {n: s for n, (sh, s) in self.vms.items() if sh}
        others = {res: {cid: self.used(res, cid, skip={PMD, *shares})
                        for cid in self.ids} for res in self.res}
        plan = pmdplan.plan({r: self.ids for r in self.res},
                            self.layout.pmd, self.read(""), shares,
                            rules={r: self.rules for r in self.res},
                            others=others)
        self.write(PMD, plan.schemata.restricted(self.res))
        self.check(plan)
        return plan

    def check(self, plan):
        root = self.read("")
        pmd = self.read(PMD)
        for res in self.res:
            for cid in self.ids:
                p = pmd.get(res, cid)
                assert p == plan.schemata.get(res, cid)   # as written
                cbm.check(p, self.rules.cbm_len, self.rules.min_cbm_bits,
                          self.rules.sparse)
                fallback = p == root.get(res, cid)
                base = (self.layout.pmd.get(res, cid) or 0
                        if self.layout.pmd else 0)
                masks = []
                for n, (sh, s) in self.vms.items():
                    m = s.get(res, cid)
                    masks.append(m)
                    assert m & root.get(res, cid) == 0
                    assert m & base == 0
                    if not sh:
                        assert p & m == 0, (n, hex(p), hex(m))
                    elif not self.rogue:
                        assert p & m == m, (n, hex(p), hex(m))
                for i, a in enumerate(masks):          # VMs disjoint
                    for b in masks[i + 1:]:
                        assert a & b == 0
                if not fallback:
                    assert p & root.get(res, cid) == 0
                    assert p & base == base
                absorbed = plan.absorbed.get(res, {}).get(cid, 0)
                assert absorbed & self.used(res, cid, skip={PMD}) == 0
        if not self.rogue:
            assert not plan.degraded


PROFILES = [("gold-6252", 2, 2), ("gold-6252", 2, 0),
            ("gold-6252-cdp", 2, 2), ("e5-2658-v3", 4, 0),
            ("e5-2658-v3", 4, 2), ("amd-epyc", 2, 2)]


@settings(max_examples=60, deadline=None)
@given(setup=st.sampled_from(PROFILES),
       steps=st.lists(st.tuples(st.integers(0, 9), st.integers(1, 4),
                                st.booleans(), st.integers(0, 99)),
                      min_size=1, max_size=16),
       seed=st.integers(0, 2 ** 16), rogue_pct=st.sampled_from([0, 0, 20]))
def test_random_arrivals_and_departures(setup, steps, seed, rogue_pct):
    profile, reserved, pmd_ways = setup
    host = Host(profile, reserved, pmd_ways)
    rnd = random.Random(seed)
    n = 0
    for pick, ways, sharing, roll in steps:
        ways = max(ways, host.rules.min_cbm_bits)
        if host.vms and pick < 4:
            host.leave(sorted(host.vms)[pick % len(host.vms)])
            continue
        n += 1
        host.arrive(f"vm{n}", ways, sharing, rnd, roll < rogue_pct)


# -- the planner decides the PMD COS the writer writes --------------------


@settings(max_examples=150, deadline=None)
@given(sparse=st.booleans(),
       demands=st.lists(st.tuples(st.integers(1, 4), st.booleans()),
                        min_size=1, max_size=6))
def test_the_written_pmd_cos_is_the_planned_one(sparse, demands):
    """Issue 38: one rule for the PMD COS.  After every claim the solver
    accepts, :func:`pmdplan.plan_id` over the plan's masks (what the
    compute and the hook write) gives the PMD COS the plan decided,
    covering no one else's ways."""
    host = placement.Host(
        resources={"L3": placement.Resource(11, 1, sparse)},
        ids={"L3": (0,)}, host_ways={"L3": {0: 0x3}},
        pmd_base={"L3": {0: 0x600}}, pmd_ids=frozenset({0}), clos=15)
    rules = pmdplan.CacheRules(11, 1, sparse)
    book: dict[str, placement.Reservation] = {}
    for i, (ways, sharer) in enumerate(demands):
        new = placement.Reservation(f"u{i}", {"L3": {0: ways}},
                                    pmd_share=sharer)
        try:
            plan = placement.place(host, book, {}, new)
        except placement.NoPlacement:
            continue
        book = {u: placement.Reservation(u, r.ways, plan.instances[u],
                                         pmd_share=r.pmd_share)
                for u, r in {**book, new.uuid: new}.items()}
        shares = {u: r.masks["L3"][0] for u, r in book.items()
                  if r.pmd_share}
        others = 0x3
        for r in book.values():
            if not r.pmd_share:
                others |= r.masks["L3"][0]
        written = pmdplan.plan_id(rules, 0x600, shares, others, 0x3)
        assert written.mask == plan.pmd["L3"][0]
        assert not written.dropped and not written.mask & others
