"""The test double of libvirt's allocator (:mod:`tests.libvirt_model`),
pure parts.  The rules are libvirt 9.0's (src/util/virresctrl.c,
src/hypervisor/domain_driver.c); the conformance test holds the double
equal to the real libvirtd.
"""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt import naming
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.schemata import Schemata
from tests import libvirt_model as la

MiB = 1024 * 1024
# The ONP app note's E5-2658 v3: 30 MiB, 20 ways (1.5 MiB each), min 2.
E5 = la.CacheInfo(20, 2, {0: 30 * MiB, 1: 30 * MiB})
WAY = 30 * MiB // 20


def state(default="L3:0=f;1=f", others=None, cache=None, mb=None):
    return la.FsState(cache or {"L3": E5}, mb, Schemata.parse(default),
                      {n: Schemata.parse(t)
                       for n, t in (others or {}).items()})


def cachetune(vcpus="0-1", caches=((0, "both", 2 * WAY),), monitor=None):
    body = "".join(f"<cache id='{c}' level='3' type='{t}' size='{s}' "
                   f"unit='B'/>" for c, t, s in caches)
    if monitor:
        body += f"<monitor level='3' vcpus='{monitor}'/>"
    return f"<cachetune vcpus='{vcpus}'>{body}</cachetune>"


def one(xml, st_, domid=7, name="instance-00000001"):
    return la.plan(la.parse_tunes([xml])[0], st_, domid, name)


# -- names ---------------------------------------------------------------

@pytest.mark.parametrize("domid,name,vcpus,want", [
    (1, "instance-00000001", {0, 1}, "qemu-1-instance-00000001-vcpus_0-1"),
    (12, "vm", {0, 2, 3}, "qemu-12-vm-vcpus_0,2-3"),
    # hostname characters only, '.'/'-' runs collapse, none at the ends
    (3, "-a..b--c_d é.", {1}, "qemu-3-a.b-cd-vcpus_1"),
    # the machine name stops at 64 characters, then loses a trailing '-'
    (5, "x" * 56 + "-yyyy", {0}, "qemu-5-" + "x" * 56 + "-vcpus_0"),
])
def test_group_name_is_libvirts(domid, name, vcpus, want):
    assert la.group_name(domid, name, vcpus) == want


@given(st.integers(0, 10**6), st.text(max_size=120))
def test_machine_names_are_bounded_hostname_words(domid, name):
    m = la.machine_name(domid, name)
    assert m.startswith(f"qemu-{domid}-") or m == f"qemu-{domid}"
    assert len(m) <= naming.LIBVIRT_MACHINE_NAME_MAX
    assert not m.endswith(("-", "."))
    assert all(c.isascii() and (c.isalnum() or c in "-.") for c in m)


def test_a_domain_id_must_be_one():
    with pytest.raises(la.TuneError, match="domain id"):
        la.machine_name(-1, "x")


# -- the XML -------------------------------------------------------------

def test_a_memorytune_over_the_same_vcpus_joins_the_cachetune():
    tunes = la.parse_tunes([
        cachetune(), "<memorytune vcpus='0-1'><node id='0' bandwidth='50'/>"
                     "</memorytune>"])
    assert len(tunes) == 1
    assert tunes[0].mb == {0: 50} and tunes[0].caches


@pytest.mark.parametrize("xmls,words", [
    ([cachetune("0-1"), cachetune("1-2")], "Overlapping vcpus"),
    ([cachetune("0-1"), "<memorytune vcpus='1'><node id='0' "
                        "bandwidth='50'/></memorytune>"], "Overlapping"),
    (["<cachetune vcpus='0'><cache id='0' level='3' type='all' "
      "size='1'/></cachetune>"], "type='all'"),
    (["<cachetune vcpus='0'><cache id='x' level='3' size='1'/>"
      "</cachetune>"], "id='x'"),
    (["<cachetune vcpus='0'><cache id='0' level='3' size='1' unit='parsec'/>"
      "</cachetune>"], "unit"),
    (["<cachetune><cache id='0' level='3' size='1'/></cachetune>"],
     "no vcpus"),
    ([cachetune("0-1", monitor="2")], "not within"),
    (["<memtune/>"], "not <cachetune>"),
    (["<cachetune vcpus='0'"], "does not parse"),
])
def test_bad_elements_are_named(xmls, words):
    with pytest.raises(la.TuneError, match=words):
        la.parse_tunes(xmls)


def test_units_scale_as_libvirt():
    x = "<cachetune vcpus='0'><cache id='0' level='3' size='3' " \
        "unit='MiB'/></cachetune>"
    assert la.parse_tunes([x])[0].caches[0].size == 3 * MiB


# -- the allocation --------------------------------------------------------

def test_free_ways_leave_out_the_default_group_and_every_other():
    st_ = state(others={"nova-rdt-pmd": "L3:0=ff0;1=ff0",
                        "qemu-1-x-vcpus_0": "L3:0=3000;1=f0000"})
    assert la.free_masks(st_, "L3") == {0: 0xfc000, 1: 0x0f000}


def test_the_smallest_fitting_run_lowest_ways_first():
    # free on cache 0: ways 4-5 (2) and 8-19 (12): 2 ways go in 4-5.
    st_ = state(others={"a": "L3:0=c0;1=0"})
    a = one(cachetune(caches=((0, "both", 2 * WAY),)), st_)
    assert a.granted == {"L3": {0: 0x30}}
    # 3 ways do not fit in 4-5: the lowest of 8-19.
    a = one(cachetune(caches=((0, "both", 3 * WAY),)), st_)
    assert a.granted == {"L3": {0: 0x700}}


def test_caches_not_named_keep_the_default_groups_mask():
    a = one(cachetune(caches=((1, "both", 4 * WAY),)), state())
    assert a.schemata.format() == "L3:0=f;1=f0\n"
    assert a.group == "qemu-7-instance-00000001-vcpus_0-1"
    assert a.describe() == "L3 1=0xf0 (4 ways)"


def test_a_full_cache_is_not_enough_room():
    st_ = state(others={"nova-rdt-pmd": "L3:0=ffff0;1=ffff0"})
    with pytest.raises(la.TuneError, match=(
            r"Not enough room for allocation of 3145728 bytes for level 3 "
            r"cache 0 scope type 'both'")):
        one(cachetune(), st_)


@pytest.mark.parametrize("size,words", [
    (30 * MiB, "whole cache is not possible"),
    (WAY + 1, "not divisible by granularity 1572864"),
    (WAY, "smaller than the minimum allowed allocation 3145728"),
])
def test_sizes_libvirt_refuses(size, words):
    with pytest.raises(la.TuneError, match=words):
        one(cachetune(caches=((0, "both", size),)), state())


def test_a_cache_id_or_type_the_host_lacks():
    with pytest.raises(la.TuneError, match="id 5 does not exists"):
        one(cachetune(caches=((5, "both", 2 * WAY),)), state())
    with pytest.raises(la.TuneError, match="scope type 'code'"):
        one(cachetune(caches=((0, "code", 2 * WAY),)), state())


def test_cdp_code_and_data_are_allocated_apart():
    cdp = {"L3CODE": E5, "L3DATA": E5}
    st_ = state("L3CODE:0=f;1=f\nL3DATA:0=ff;1=ff", cache=cdp)
    a = one(cachetune(caches=((0, "code", 2 * WAY), (0, "data", 2 * WAY))),
            st_)
    assert a.granted == {"L3CODE": {0: 0x30}, "L3DATA": {0: 0x300}}
    assert a.schemata.format() == "L3CODE:0=30;1=f\nL3DATA:0=300;1=ff\n"


def test_mb_is_not_counted_against_other_groups_as_libvirt_9_0():
    # The real libvirtd starts a 50% domain beside nova-rdt-pmd at
    # MB 100 (test_libvirt_model_conformance holds the two equal).
    mb = la.MbInfo(10, 10, (0, 1))
    mt = ("<memorytune vcpus='0-1'><node id='0' bandwidth='{}'/>"
          "</memorytune>")
    st_ = state("L3:0=f;1=f\nMB:0=100;1=100", mb=mb,
                others={"nova-rdt-pmd": "L3:0=10;1=10\nMB:0=100;1=100"})
    a = la.plan(la.parse_tunes([cachetune(), mt.format(50)])[0], st_, 1,
                "vm")
    # Node 1, not named, keeps the default group's value.
    assert a.schemata.domains("MB") == {0: 50, 1: 100}
    with pytest.raises(la.TuneError, match="not divisible by granularity"):
        la.plan(la.parse_tunes([mt.format(25)])[0], st_, 1, "vm")
    with pytest.raises(la.TuneError, match="smaller than the minimum"):
        la.plan(la.parse_tunes([mt.format(0)])[0], st_, 1, "vm")
    with pytest.raises(la.TuneError, match="unsupported"):
        la.plan(la.parse_tunes([mt.format(30)])[0], state(), 1, "vm")


def test_monitors_use_the_allocation_or_a_monitor_group_in_it():
    a = one(cachetune(monitor="0-1"), state())
    assert a.monitors == (la.MonitorPlan(frozenset({0, 1}), None, None),)
    a = one(cachetune(monitor="1"), state())
    assert a.monitors == (la.MonitorPlan(
        frozenset({1}), "qemu-7-instance-00000001-vcpus_1",
        "qemu-7-instance-00000001-vcpus_0-1"),)
    # A monitor alone allocates nothing: it lives in the default group.
    x = "<cachetune vcpus='0-1'><monitor level='3' vcpus='0-1'/></cachetune>"
    a = one(x, state())
    assert a.group is None and a.schemata is None
    assert a.monitors[0].parent == "" and a.monitors[0].name == \
        "qemu-7-instance-00000001-vcpus_0-1"


def test_each_allocation_sees_the_ones_made_before_it():
    tunes = la.parse_tunes([cachetune("0", ((0, "both", 2 * WAY),)),
                            cachetune("1", ((0, "both", 2 * WAY),))])
    a, b = la.plan_all(tunes, state(), 2, "vm")
    assert a.granted["L3"][0] & b.granted["L3"][0] == 0


masks = st.integers(0, (1 << 20) - 1)


@settings(max_examples=300, deadline=None)
@given(default=masks, others=st.lists(masks, max_size=4),
       ways=st.integers(2, 19))
def test_what_is_granted_is_free_and_best_fit_or_there_is_no_room(
        default, others, ways):
    st_ = state(f"L3:0={default:x};1=f",
                {f"g{i}": f"L3:0={m:x}" for i, m in enumerate(others)})
    free = cbm.full_mask(20) & ~default
    for m in others:
        free &= ~m
    assert la.free_masks(st_, "L3")[0] == free
    try:
        a = one(cachetune(caches=((0, "both", ways * WAY),)), st_)
    except la.TuneError as e:
        assert "Not enough room" in str(e)
        assert cbm.largest_free_run(~free & cbm.full_mask(20), 20) < ways
        return
    got = a.granted["L3"][0]
    assert got & ~free == 0 and cbm.popcount(got) == ways
    assert cbm.is_contiguous(got)
    assert got == cbm.best_fit(free, ways)
    # The default group's mask on the cache not asked for is kept.
    assert a.schemata.get("L3", 1) == 0xf
