"""The two-compute cloud's judgement of a compute after a move
(nova_rdt.lab.allinone.hostview), and the second compute's migration
wiring (subnode)."""

import dataclasses
import os

import pytest

from nova_rdt.lab.allinone import hostview as hv
from nova_rdt.lab.allinone import subnode

DOM = "instance-00000007"
LIBVIRT_GROUP = f"qemu-3-{DOM}-vcpus_0"
PMD = "nova-rdt-pmd"
CLASS = "nova-rdt-class-low_priority"


def seen(groups, tids=frozenset({101}), domain=True, record=True,
         cachetune=True):
    return hv.Seen("c1", domain, frozenset(tids), groups, record, cachetune)


def g(l3, tasks=()):
    return hv.Group(dict(l3), frozenset(tasks))


def test_a_sharer_holding_its_ways_inside_the_pmd_cos_holds():
    s = seen({".": g({0: 0x3, 1: 0x3}, {1}),
              PMD: g({0: 0x3, 1: 0x600}),
              LIBVIRT_GROUP: g({0: 0xc, 1: 0x600}, {101})})
    assert hv.judge_holds(s, DOM, 2, pmd_share=True) == []


@pytest.mark.parametrize("groups,words", [
    # One way short on cache 1.
    ({LIBVIRT_GROUP: g({0: 0xc, 1: 0x400}, {101}), PMD: g({1: 0x600})},
     "not 2 ways"),
    # The vCPUs in the default group: libvirt made nothing for them.
    ({".": g({0: 0x7ff}, {101}), PMD: g({1: 0x600})}, "not a group"),
    # The sharer's ways outside the PMD COS on every cache.
    ({LIBVIRT_GROUP: g({0: 0xc, 1: 0x30}, {101}), PMD: g({1: 0x600})},
     "PMD COS"),
    # Another domain's group.
    ({"qemu-4-instance-00000008-vcpus_0": g({0: 0xc, 1: 0x600}, {101}),
      PMD: g({1: 0x600})}, "not a group"),
])
def test_a_sharer_that_does_not_hold_is_told_why(groups, words):
    problems = hv.judge_holds(seen(groups), DOM, 2, pmd_share=True)
    assert problems and words in " ".join(problems)


def test_a_domain_without_cachetune_does_not_hold():
    s = seen({LIBVIRT_GROUP: g({0: 0xc}, {101})}, cachetune=False)
    assert "no <cachetune>" in hv.judge_holds(s, DOM, 2)[0]


def test_no_domain_no_threads_or_no_record_is_told():
    assert "no running domain" in hv.judge_holds(
        seen({}, domain=False), DOM, 2)[0]
    assert "no vCPU threads" in hv.judge_holds(
        seen({}, tids=()), DOM, 2)[0]
    problems = hv.judge_holds(
        seen({LIBVIRT_GROUP: g({0: 0xc}, {101})}, record=False), DOM, 2)
    assert problems == ["no nova-rdt record on c1"]


def test_a_class_member_must_run_in_its_class_group():
    ok = seen({CLASS: g({0: 0x4}, {101, 102})})
    assert hv.judge_holds(ok, DOM, None, "low_priority") == []
    own = seen({LIBVIRT_GROUP: g({0: 0x4}, {101})})
    assert "not class group" in hv.judge_holds(
        own, DOM, None, "low_priority")[0]


def test_a_plain_instance_runs_in_the_default_group_and_needs_no_record():
    assert hv.judge_holds(seen({".": g({0: 0x7ff}, {101})}, record=False),
                          DOM, None) == []
    assert hv.judge_holds(seen({LIBVIRT_GROUP: g({0: 0xc}, {101})},
                               record=False), DOM, None)


def test_a_clean_source_has_no_domain_group_record_or_changed_pmd_cos():
    idle = {0: 0x3, 1: 0x3}
    clean = seen({".": g({0: 0x3}), PMD: g(idle)}, tids=(), domain=False,
                 record=False)
    assert hv.judge_clean(clean, DOM, idle) == []
    dirty = seen({LIBVIRT_GROUP: g({0: 0xc}), PMD: g({0: 0x3, 1: 0x600})},
                 domain=True, record=True)
    problems = " ".join(hv.judge_clean(dirty, DOM, idle))
    for words in ("still runs", LIBVIRT_GROUP, "record left", "PMD COS"):
        assert words in problems
    # Not asked: the PMD COS is not judged.
    assert not any("PMD" in p for p in hv.judge_clean(dirty, DOM, None))


def test_an_arriving_paused_domain_must_already_hold_its_ways():
    """An incoming live migration's domain is paused until it resumes;
    the destination's hook has written its masks by then."""
    held = {PMD: g({0: 0x3, 1: 0x600}),
            LIBVIRT_GROUP: g({0: 0xc, 1: 0x600}, {101})}
    paused = hv.Seen("c2", False, frozenset({101}), held, True, True,
                     paused=True)
    assert hv.judge_holds(paused, DOM, 2, pmd_share=True,
                          arriving=True) == []
    # After a move it must run, not wait.
    assert "(it is paused)" in hv.judge_holds(paused, DOM, 2)[0]
    # Still on libvirt's own choice of ways (way 4, outside the PMD COS).
    early = dataclasses.replace(paused, groups={
        PMD: g({0: 0x3, 1: 0x600}),
        LIBVIRT_GROUP: g({0: 0x30, 1: 0x30}, {101})})
    assert "PMD COS" in " ".join(hv.judge_holds(
        early, DOM, 2, pmd_share=True, arriving=True))


def test_a_paused_domain_left_behind_is_not_clean():
    left = hv.Seen("c2", False, frozenset({101}), {}, False, paused=True)
    assert hv.judge_clean(left, DOM, None) == [
        f"domain {DOM} is still paused on c2"]


def test_free_ways_counts_the_fullest_cache():
    s = seen({".": g({0: 0x3, 1: 0x3}), PMD: g({0: 0x3, 1: 0x600}),
              LIBVIRT_GROUP: g({0: 0xc, 1: 0x600})})
    # Cache 0: 0xf taken (7 free); cache 1: 0x603 taken (8 free).
    assert hv.free_ways(s, 11) == 7
    assert hv.free_ways(seen({}), 11) == 0


def test_read_groups_and_vcpu_threads_read_what_is_there(tmp_path):
    root = tmp_path / "resctrl"
    (root / "info").mkdir(parents=True)
    (root / "schemata").write_text("    MB:0=100;1=100\n    L3:0=3;1=3\n")
    (root / "tasks").write_text("1\n2\n")
    grp = root / LIBVIRT_GROUP
    grp.mkdir()
    (grp / "schemata").write_text("L3:0=00c;1=600\n")
    (grp / "tasks").write_text("101\n")
    groups = hv.read_groups(str(root))
    assert set(groups) == {".", LIBVIRT_GROUP}
    assert groups[LIBVIRT_GROUP] == g({0: 0xc, 1: 0x600}, {101})
    assert groups["."].tasks == {1, 2}
    run = tmp_path / "qemu"
    run.mkdir()
    (run / f"{DOM}.pid").write_text(f"{os.getpid()}\n")
    # This process has no "CPU n/KVM" threads: none are taken for vCPUs.
    assert hv.vcpu_threads(str(run), DOM) == frozenset()
    assert hv.vcpu_threads(str(run), "absent") == frozenset()


def test_each_compute_gets_its_own_migration_address_and_socket(tmp_path):
    d = str(tmp_path / "socks")
    one, two = (subnode.migration_options(d, i) for i in (0, 1))
    assert one["live_migration_inbound_addr"] != \
        two["live_migration_inbound_addr"]
    # Nova formats the URI with the destination's inbound address.
    uri = one["live_migration_uri"] % two["live_migration_inbound_addr"]
    assert uri == f"qemu+unix:///system?socket={d}/127.0.0.2.sock"
    subnode.link_sockets(d, ["/run/a/libvirt-sock", "/run/b/libvirt-sock"])
    assert os.readlink(os.path.join(d, "127.0.0.2.sock")) == \
        "/run/b/libvirt-sock"
    # Again (a restart): the links are replaced, not refused.
    subnode.link_sockets(d, ["/run/c/libvirt-sock", "/run/b/libvirt-sock"])
    assert os.readlink(os.path.join(d, "127.0.0.1.sock")) == \
        "/run/c/libvirt-sock"


def test_each_libvirtd_takes_its_own_half_of_the_migration_ports(tmp_path):
    """Two migrations at once, one each way, used to pick one port in the
    two libvirtds and fail "Address already in use"."""
    from nova_rdt.lab import libvirtd
    one, two = subnode.migration_ports(0), subnode.migration_ports(1)
    assert set(range(one[0], one[1] + 1)).isdisjoint(
        range(two[0], two[1] + 1))
    # Inside libvirt's own range, which the machine leaves to it.
    assert 49152 <= one[0] < one[1] < two[0] < two[1] <= 49215
    lv = libvirtd.Libvirt(str(tmp_path), supervisor=None)
    assert lv._ports_conf() == ""
    lv.migration_ports = two
    assert lv._ports_conf() == (f"migration_port_min = {two[0]}\n"
                                f"migration_port_max = {two[1]}\n")


def test_the_hosts_file_names_the_second_compute(tmp_path):
    path = subnode.hosts_file(str(tmp_path / "hosts"), "box-2")
    lines = open(path).read().splitlines()
    assert lines[-1] == "127.0.0.2 box-2"
    with open("/etc/hosts") as f:
        assert f.read().splitlines() == lines[:-1]
