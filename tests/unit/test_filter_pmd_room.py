"""The PMD COS rule in what a host publishes, and in the claim on it.

The state carries the rule as resctrl holds it (the PMD COS's wanted
ways per cache id where its cores run); the claim the filter runs asks
the solver, whose room for a sharer and for anyone else must follow the
rule: sharers next to the span or in its holes, anyone else outside it.
"""

import json

import pytest

from nova_rdt import naming
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import placement
from nova_rdt.allocation import planner
from nova_rdt.allocation import spec
from nova_rdt.emulator import topology
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.resctrl.schemata import Schemata
from tests.kernel_fixtures import make_kernel
from tests.kernel_fixtures import materialize
from tests.unit.test_planner import judge
from tests.unit.test_planner import published
from tests.unit.test_planner import state


def room(s, sharer=False, cid=0):
    """The solver's room for one new instance on ``s`` as published."""
    solver = published(s).solver
    return placement.room(solver.host, solver.reservations, solver.classes,
                          "L3", cid, sharer=sharer and solver.pmd_cos,
                          compaction=solver.compaction)


def test_a_sharer_goes_next_to_the_span_or_into_a_hole():
    # gold-6252, pmd_shared_ways=2: root 0x3, base 0x600.  A plain VM at
    # ways 2-5 leaves runs 6-8 (next to the span: 3 ways) for sharers.
    s = state(used=(0x3 | 0x3c | 0x600,), pmd=(0x600,))
    assert (room(s), room(s, sharer=True)) == (3, 3)
    # A class group at way 7 cuts the sharers off at way 8, while a
    # plain VM still has ways 5-6.
    s = state(used=(0x3 | 0x1c | 0x80 | 0x600,), pmd=(0x600,))
    assert (room(s), room(s, sharer=True)) == (2, 1)
    # A sharer at ways 2-3 and the base at 9-10: the span 2-10 holds a
    # hole at 4-8 (sharers there left).  A sharer gets the hole, nobody
    # else gets anything.
    s = state(used=(0x3 | 0x7fc,), pmd=(0x60c,))
    assert s.cache[0].pmd_cover("both") == 0x7fc
    assert (room(s), room(s, sharer=True)) == (0, 5)
    # No rule on this cache id (no PMD cores here): sharers are anyone.
    s = state(used=(0x3 | 0x600,), pmd=(None,))
    assert room(s, sharer=True) == room(s) == 7
    # Sparse masks: the span is the wanted ways; an instance still needs
    # one run, since libvirt allocates only contiguous runs.
    s = state(used=(0x3 | 0x24 | 0x600,), pmd=(0x600,), sparse=True,
              min_ways=2)
    assert room(s) == room(s, sharer=True) == 3


def test_an_empty_host_takes_sharers_of_every_size():
    """Case 1: pmd_shared_ways=2 on an empty gold-6252 (libvirt's fit
    put sharers at the bottom, away from the base at the top)."""
    s = state(used=(0x3 | 0x600, 0x3 | 0x600), pmd=(0x600, 0x600))
    for ways in range(1, 8):
        r = spec.parse({"rdt:l3_cache_ways": str(ways),
                        "rdt:pmd_share": "true"}, 4, 1)
        assert judge(s, r) is None
    r = spec.parse({"rdt:l3_cache_ways": "8", "rdt:pmd_share": "true"}, 4)
    assert "no room for 8 ways" in judge(s, r)


def test_the_span_rule_only_on_the_pmd_cache_ids():
    """Case 10: PMD cores on cache id 0 only; a sharer pinned to socket 1
    is placed as anyone there."""
    cells = {0: frozenset(range(4)), 1: frozenset(range(4, 8))}
    # id 0: a plain VM next to the base leaves sharers no room; id 1
    # has no PMD cores and 6 free ways.
    s = state(used=(0x3 | 0x1c0 | 0x600, 0x3 | 0x600), cells=cells,
              pmd=(0x600, None))
    share = spec.parse({"rdt:l3_cache_ways": "4", "rdt:pmd_share": "true"},
                       4, 1)
    one = planner.Placement.even(4, 1)
    assert "cache id 0: no room" in judge(s, share, one, ((0, None),))
    assert judge(s, share, one, ((1, None),)) is None


def test_with_allocation_widens_the_span_for_a_sharer_only():
    s = state(used=(0x3 | 0x600,), pmd=(0x600,))
    plain = s.with_allocation({0: {"both": 0xc}})
    assert plain.cache[0].pmd_want == {"both": 0x600}
    shared = s.with_allocation({0: {"both": 0x30}}, pmd_share=True)
    c = shared.cache[0]
    # The span now reaches down to the sharer at 4-5; ways 6-8 are holes
    # that only sharers may take.
    assert c.pmd_want == {"both": 0x630}
    assert c.used["both"] == 0x3 | 0x7f0
    assert (room(shared), room(shared, sharer=True)) == (2, 3)
    back = hoststate.HostRdtState.from_stats(shared.to_stats())
    assert back == shared
    # Monitor-only: an RMID, no CLOS.
    mon = s.with_allocation({}, clos=0, rmids=1)
    assert (mon.clos_free, mon.rmids_free) == (s.clos_free,
                                               s.rmids_free - 1)


# -- from resctrl ----------------------------------------------------------

PREFIX = naming.DEFAULT_PREFIX


def _view(tmp_path, profile="gold-6252", pmd_mask=0x600, pmd_cpus=None,
          groups=()):
    """A prepared emulated host: root 0x3, the PMD group and ``groups``
    (name -> L3 mask on both ids), as the kernel model holds them."""
    k, _, _ = make_kernel(profile)

    def write(group, line):
        path = f"{group}/schemata" if group else "schemata"
        k.write(path, f"L3:0={line:x};1={line:x}\n".encode())

    write("", 0x3)
    if pmd_mask is not None:
        name = naming.pmd_group(PREFIX)
        k.mkdir(name)
        write(name, pmd_mask)
        if pmd_cpus:
            k.write(f"{name}/cpus_list",
                    ",".join(map(str, sorted(pmd_cpus))).encode())
    for name, mask in groups:
        k.mkdir(name)
        write(name, mask)
    root = materialize(k, str(tmp_path / "r"))
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    return HostView.collect(Resctrl(root, sysfs_cpu=cpu, prefix=PREFIX))


def test_from_resctrl_learns_the_pmd_group(tmp_path):
    view = _view(tmp_path, groups=[("qemu-1-a-vcpus_0", 0x100),
                                      ("qemu-2-b-vcpus_0", 0xc)])
    s = hoststate.from_resctrl(view, prefix=PREFIX)
    for c in s.cache.values():
        # No CPUs in the PMD group yet: the rule holds on every id, over
        # its whole mask.
        assert c.pmd and c.pmd_want == {"both": 0x600}
    # The plain VM at way 8 cuts sharers off the span; anyone else has
    # ways 4-7.
    for cid in s.cache:
        assert room(s, sharer=True, cid=cid) == 0
        assert room(s, cid=cid) == 4
    # Knowing the base (pmd_shared_ways=2), the group at way 8 inside the
    # PMD COS's mask 0x700 is a sharer, not a hole.
    view = _view(tmp_path / "b", pmd_mask=0x700,
                    groups=[("qemu-1-a-vcpus_0", 0x100)])
    base = Schemata({"L3": {0: 0x600, 1: 0x600}})
    s = hoststate.from_resctrl(view, prefix=PREFIX, pmd_base=base)
    assert s.cache[0].pmd_want == {"both": 0x700}
    # pmd_cos off: the PMD group's ways are just used.
    s = hoststate.from_resctrl(view, prefix=PREFIX, pmd_cos=False)
    assert not s.cache[0].pmd and room(s, sharer=True) == 6


def test_from_resctrl_knows_holes_only_with_the_base(tmp_path):
    # A sharer at 7-8 left; the PMD COS still spans 7-10.
    view = _view(tmp_path, pmd_mask=0x780)
    base = Schemata({"L3": {0: 0x600, 1: 0x600}})
    s = hoststate.from_resctrl(view, prefix=PREFIX, pmd_base=base)
    assert s.cache[0].pmd_want == {"both": 0x600}
    # The compute plans the PMD COS as its base: ways 2-8 are anyone's.
    assert (room(s), room(s, sharer=True)) == (7, 7)
    # Without the base, the whole mask is the PMD COS's.
    s = hoststate.from_resctrl(view, prefix=PREFIX)
    assert (room(s), room(s, sharer=True)) == (5, 5)


def test_from_resctrl_rule_only_where_pmd_cpus_run(tmp_path):
    view = _view(tmp_path, pmd_cpus={0})
    s = hoststate.from_resctrl(view, prefix=PREFIX)
    on = {cid for cid, c in s.cache.items() if c.pmd}
    assert on == {cid for cid, c in s.cache.items() if 0 in c.cpus}
    assert len(on) == 1


def test_from_resctrl_pmd_group_holding_the_hosts_ways_spans_nothing(
        tmp_path):
    # pmd_shared_ways=0 and no sharer: the PMD COS holds the root's ways.
    view = _view(tmp_path, pmd_mask=0x3)
    s = hoststate.from_resctrl(view, prefix=PREFIX, pmd_cos=True)
    c = s.cache[0]
    assert c.pmd and not c.pmd_want
    assert room(s, sharer=True) == room(s) == 9


@pytest.mark.parametrize("version", [2, 3, 4])
def test_older_documents_still_read(version):
    """A live migration reads its destination's document, whatever its
    release: the masks, cells and the PMD rule where it has one."""
    s = state(used=(0x3 | 0x600, 0x3), pmd=(0x600, None), sparse=True,
              cells={0: frozenset(range(4)), 1: frozenset(range(4, 8))})
    doc = json.loads(s.to_stats()["rdt"])
    cdp, mb, geo = json.loads(doc["shape"])
    if version == 2:
        doc["shape"] = json.dumps([cdp, mb, [g[:4] for g in geo]],
                                  separators=(",", ":"))
        doc["l3"] = [[e[0], e[1], e[2], [5]] for e in doc["l3"]]
    elif version == 3:
        # The rooms and whether each class can be made, for schedulers
        # before the solver's input.
        doc["l3"] = [[e[0], e[1], e[2], [5], [5], e[3]] for e in doc["l3"]]
    if version < 4:
        doc["cells"] = [[*c, [i]] for i, c in enumerate(doc["cells"])]
    doc["v"] = version
    back = hoststate.HostRdtState.from_stats({"rdt": json.dumps(doc)})
    assert back is not None
    assert back.cells == s.cells
    if version == 2:
        # No PMD rule and no sparse flag in a version-2 document.
        assert not back.cache[0].pmd and not back.cache[0].sparse
        assert back.cache[0].used == s.cache[0].used
    else:
        assert back == s


def test_from_resctrl_with_an_empty_base_knows_sharers_and_holes(tmp_path):
    # pmd_shared_ways=0: the PMD COS is its sharers' span.  Sharers at 4
    # and 8 (the one between left): a 3-way hole at 5-7, ways 2-3 and
    # 9-10 free next to the span.
    view = _view(tmp_path, pmd_mask=0x1f0,
                 groups=[("qemu-1-a-vcpus_0", 0x10),
                         ("qemu-2-b-vcpus_0", 0x100)])
    s = hoststate.from_resctrl(view, prefix=PREFIX, pmd_cos=True,
                               pmd_base=Schemata({}))
    c = s.cache[0]
    assert c.pmd_want == {"both": 0x110}
    assert c.pmd_cover("both") == 0x1f0
    assert (room(s), room(s, sharer=True)) == (2, 3)
    # And the claim says so.
    r = spec.parse({"rdt:l3_cache_ways": "3", "rdt:pmd_share": "true"}, 4)
    assert judge(s, r) is None
    r = spec.parse({"rdt:l3_cache_ways": "3"}, 4)
    assert "no room for 3 ways" in judge(s, r)
