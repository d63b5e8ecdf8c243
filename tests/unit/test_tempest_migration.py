"""The migration whitebox tests' logic, with no cloud: what each end of
a move must show, judged on ``/api/layout`` documents the exporter's own
``page.layout`` makes (two 11-way L3 caches as on a Gold 6252, or CDP),
when they skip, and ``[nova_rdt] exporter_urls`` as oslo.config and
Tempest's plugin registration parse it."""

from __future__ import annotations

import pytest

from nova_rdt.exporter import identity
from nova_rdt.exporter import page
from nova_rdt.exporter.sample import GroupSample
from nova_rdt.exporter.sample import HostSample
from nova_rdt.resctrl import capabilities as caps_mod
from tempest_plugin import exporter
from tempest_plugin import migration

UUID, OTHER = "7c1e4a7e-55b5-4b53-9a57-0d9c2b1f0a01", \
    "2f0c9a1d-0e7b-4bd4-8f3e-6a4c3d2b1e02"
GROUP = "qemu-3-instance-00000007-vcpus_0"      # libvirt's name
FULL = (1 << 11) - 1


def _caps(cdp=False):
    def res(name):
        return caps_mod.CacheResource(
            name, 3, FULL, 1, 0, False, 8 if cdp else 16, None,
            {0: caps_mod.CacheDomain(0, 36608 * 1024, (0, 1)),
             1: caps_mod.CacheDomain(1, 36608 * 1024, (2, 3))})
    names = ("L3CODE", "L3DATA") if cdp else ("L3",)
    return caps_mod.Capabilities("/sys/fs/resctrl",
                                 {n: res(n) for n in names}, {}, {}, False)


def _mask(ways):
    return sum(1 << w for w in ways)


def _group(name, kind, ways_by_cache, cdp=False, tasks=2, ctrl=True,
           **ident):
    schemata = {}
    if ctrl:
        for res in (("L3CODE", "L3DATA") if cdp else ("L3",)):
            schemata[res] = {cid: _mask(w) for cid, w in
                             ways_by_cache.items()}
    return GroupSample(name, ctrl, identity.Identity(kind, **ident),
                       schemata, tasks, ())


def layout(*groups, host="compute2", cdp=False, pmd=True):
    """An /api/layout of ``host``: the root on ways 0-1 (the host's
    reserved), the PMD COS (ways 9-10 on cache 0, where its cores are;
    the host's on cache 1), then ``groups``."""
    base = [_group("", "host", {0: {0, 1}, 1: {0, 1}}, cdp)]
    if pmd:
        base.append(_group("nova-rdt-pmd", "pmd", {0: {9, 10}, 1: {0, 1}},
                           cdp))
    sample = HostSample(_caps(cdp), tuple(base + list(groups)), 100.0,
                        0.01)
    return page.layout(host, sample, {})


def own(ways=(5, 6), cdp=False, name=GROUP, uuid=UUID):
    return _group(name, "instance", {0: set(ways), 1: set(ways)}, cdp,
                  instance_uuid=uuid, instance_name="instance-00000007")


def klass(name="low_priority", tasks=2):
    return _group(f"nova-rdt-class-{name}", "class",
                  {0: {2}, 1: {2}}, tasks=tasks, rdt_class=name)


def test_the_layouts_are_the_exporters():
    doc = layout(own())
    assert doc["host"] == "compute2" and doc["available"]
    assert [c["resource"] for c in doc["caches"]] == ["L3", "L3"]
    assert exporter.way_sets(doc)[GROUP] == {"L3:0": {5, 6},
                                             "L3:1": {5, 6}}
    assert exporter.instance_groups(doc, UUID) == [GROUP]


# -- the destination (or, after a revert, the source) --

@pytest.mark.parametrize("cdp", [False, True])
def test_a_server_holding_its_ways_has_no_problem(cdp):
    assert exporter.placement_problems(
        layout(own(cdp=cdp), cdp=cdp), UUID, ways=2) == []


def test_a_pmd_sharer_holding_its_ways_and_the_pmds_has_no_problem():
    doc = layout(own(ways=(7, 8, 9, 10)))
    assert exporter.placement_problems(doc, UUID, ways=4,
                                       pmd_share=True) == []


def test_a_class_member_in_its_class_group_has_no_problem():
    assert exporter.placement_problems(layout(klass()), UUID,
                                       rdt_class="low_priority") == []


@pytest.mark.parametrize("groups, kwargs, said", [
    # Not there at all: the move left it nowhere (or elsewhere).
    ((), {"ways": 2}, "has 0 groups on compute2, 0 of them holding ways"),
    # Libvirt's own choice, or a partial write: 3 ways on cache 1.
    ((_group(GROUP, "instance", {0: {5, 6}, 1: {5, 6, 7}},
             instance_uuid=UUID),),
     {"ways": 2}, "holds 3 ways on L3:1 of compute2, not its flavor's 2"),
    # Every way of the cache: the group is there, no mask was written.
    ((_group(GROUP, "instance", {0: set(range(11)), 1: set(range(11))},
             instance_uuid=UUID),),
     {"ways": 2}, "holds 11 ways on L3:0"),
    # Two groups of its own (a stale one, say, from an earlier move).
    ((own(), own(ways=(3, 4), name="qemu-1-instance-00000007-vcpus_0")),
     {"ways": 2}, "has 2 groups on compute2"),
    # A sharer away from the PMD COS's ways.
    ((own(ways=(3, 4, 5, 6)),), {"ways": 4, "pmd_share": True},
     "shares no way with the PMD COS on L3:0 of compute2"),
    # A class member with a group of its own, or no class group.
    ((own(),), {"rdt_class": "low_priority"},
     "class member " + UUID + " has groups of its own on compute2"),
    ((), {"rdt_class": "low_priority"},
     "compute2 has 0 groups of class low_priority"),
    ((_group("nova-rdt-class-low_priority", "class", {0: set(), 1: set()},
             rdt_class="low_priority"),),
     {"rdt_class": "low_priority"}, "holds no L3 ways"),
    ((klass(name="bulk"),), {"rdt_class": "low_priority"},
     "0 groups of class low_priority"),
])
def test_each_way_the_destination_can_be_wrong_is_said(groups, kwargs,
                                                       said):
    problems = exporter.placement_problems(layout(*groups), UUID, **kwargs)
    assert any(said in p for p in problems), problems


def test_a_sharer_on_a_host_with_no_pmd_cos_is_said():
    problems = exporter.placement_problems(
        layout(own(ways=(7, 8, 9, 10)), pmd=False), UUID, ways=4,
        pmd_share=True)
    assert any("the PMD COS on compute2 holds no ways" in p
               for p in problems), problems


def test_an_end_with_no_rdt_is_said():
    doc = page.layout("compute2", HostSample(None, (), 100.0, 0.01,
                                             error="no resctrl"), {})
    problems = exporter.placement_problems(doc, UUID, ways=2)
    assert problems == ["the exporter of compute2 has no RDT to show: "
                        "no resctrl"]


def test_another_server_is_not_mistaken_for_it():
    doc = layout(own(uuid=OTHER))
    assert any("has 0 groups" in p for p in
               exporter.placement_problems(doc, UUID, ways=2))


# -- the end it left --

def test_an_end_with_nothing_of_it_is_clean():
    # Another server and a class group stay: they are not its.
    doc = layout(own(uuid=OTHER, name="qemu-4-instance-00000009-vcpus_0"),
                 klass(), host="compute1")
    assert exporter.leftover_problems(doc, UUID, [GROUP]) == []


def test_its_group_left_behind_is_said_with_its_ways():
    problems = exporter.leftover_problems(layout(own(), host="compute1"),
                                          UUID, [GROUP])
    assert f"compute1 still has group {GROUP} (kind instance) of " \
        f"instance {UUID}" in problems
    assert f"{GROUP} still holds ways on compute1: L3:0=[5, 6]; " \
        f"L3:1=[5, 6]" in problems


def test_a_group_whose_record_went_is_still_found_by_its_name():
    # The hook dropped its record, libvirt kept the group: the exporter
    # calls it foreign, with no instance; its name gives it away.
    stale = _group(GROUP, "foreign", {0: {5, 6}, 1: {5, 6}})
    doc = layout(stale, host="compute1")
    assert exporter.instance_groups(doc, UUID) == []
    problems = exporter.leftover_problems(doc, UUID, [GROUP])
    assert any("(kind foreign)" in p for p in problems), problems
    assert any("still holds ways" in p for p in problems), problems
    # Without the name it had, nothing would be found.
    assert exporter.leftover_problems(doc, UUID) == []


def test_a_monitor_group_of_it_left_behind_is_said():
    mon = _group("mon-" + UUID[:8], "instance", {}, ctrl=False,
                 instance_uuid=UUID)
    problems = exporter.leftover_problems(layout(mon, host="compute1"),
                                          UUID)
    assert problems == [f"compute1 still has group mon-{UUID[:8]} (kind "
                        f"instance) of instance {UUID}"]


# -- when they run --

def _svc(host, state="up", status="enabled"):
    return {"binary": "nova-compute", "host": host, "state": state,
            "status": status, "zone": "nova"}


URLS = {"compute1": "http://192.0.2.11:9787",
        "compute2": "http://192.0.2.12:9787"}


@pytest.mark.parametrize("args, said", [
    (("live", 2, True, False, URLS), "rdt_compute = False"),
    (("live", 1, True, True, URLS),
     "a move needs two computes: [compute] min_compute_nodes = 1"),
    (("live", 2, False, True, URLS),
     "live migration is not available ([compute-feature-enabled] "
     "live_migration = False)"),
    (("cold", 2, False, True, URLS),
     "([compute-feature-enabled] cold_migration = False)"),
    (("cold", 2, True, True, {}), "[nova_rdt] exporter_urls is not set"),
])
def test_conf_skip_reasons(args, said):
    assert said in migration.conf_skip_reason(*args)


def test_a_configured_cloud_has_no_conf_reason():
    assert migration.conf_skip_reason("live", 2, True, True, URLS) is None


@pytest.mark.parametrize("services, said", [
    ([_svc("compute1")],
     "a move needs two computes; 1 nova-compute service(s) are up and "
     "enabled: ['compute1']"),
    ([_svc("compute1"), _svc("compute2", state="down")],
     "1 nova-compute service(s) are up"),
    ([_svc("compute1"), _svc("compute2", status="disabled")],
     "1 nova-compute service(s) are up"),
    ([], "0 nova-compute service(s)"),
    ([_svc("compute1"), _svc("compute3")],
     "[nova_rdt] exporter_urls names no exporter for the up compute(s) "
     "compute3 (it has ['compute1', 'compute2'])"),
])
def test_cloud_skip_reasons(services, said):
    reason = migration.hosts_skip_reason(services, URLS)
    assert reason is not None and said in reason, reason


def test_two_up_computes_each_with_its_exporter_run():
    services = [_svc("compute1"), _svc("compute2"),
                _svc("compute9", state="down")]
    assert migration.hosts_skip_reason(services, URLS) is None
    hosts = migration.up_computes(services)
    assert hosts == ["compute1", "compute2"]
    assert migration.other_host(hosts, "compute2") == "compute1"
    assert migration.other_host(hosts, "compute1") == "compute2"


# -- [nova_rdt] exporter_urls --

def _conf(tmp_path, value):
    from oslo_config import cfg

    from tempest_plugin import config as rdt_config
    conf = cfg.ConfigOpts()
    conf.register_group(rdt_config.rdt_group)
    conf.register_opts(rdt_config.RdtGroup, rdt_config.rdt_group)
    path = tmp_path / "tempest.conf"
    path.write_text(f"[nova_rdt]\nexporter_urls = {value}\n")
    conf(args=[], default_config_files=[str(path)])
    return conf.nova_rdt.exporter_urls


@pytest.mark.parametrize("value, want", [
    ("compute1:http://192.0.2.11:9787,compute2:http://192.0.2.12:9787",
     URLS),
    # Spaces, a path, https, IPv6, a host name with dots and dashes.
    (" compute-1.example.org : https://[2001:db8::1]:9787/ , "
     "c2:http://compute2:19787/x",
     {"compute-1.example.org": "https://[2001:db8::1]:9787/",
      "c2": "http://compute2:19787/x"}),
    ("", {}),
])
def test_exporter_urls_keep_their_ports(tmp_path, value, want):
    urls = _conf(tmp_path, value)
    assert urls == want
    assert migration.bad_exporter_urls(urls) == []


def test_exporter_url_alone_still_parses_and_urls_default_empty(tmp_path):
    from oslo_config import cfg

    from tempest_plugin import config as rdt_config
    conf = cfg.ConfigOpts()
    conf.register_opts(rdt_config.RdtGroup, rdt_config.rdt_group)
    path = tmp_path / "tempest.conf"
    path.write_text("[nova_rdt]\nexporter_url = http://compute1:9787\n")
    conf(args=[], default_config_files=[str(path)])
    assert conf.nova_rdt.exporter_url == "http://compute1:9787"
    assert conf.nova_rdt.exporter_urls == {}


def test_a_duplicate_host_is_refused(tmp_path):
    with pytest.raises(Exception, match="Duplicate key compute1"):
        _conf(tmp_path, "compute1:http://a:1,compute1:http://b:2")


@pytest.mark.parametrize("urls, said", [
    ({"compute1": "192.0.2.11:9787"}, "compute1: '192.0.2.11:9787' is no"),
    ({"compute1": "http://192.0.2.11:port"}, "compute1: "),
    ({"compute2": "ftp://h:21"}, "is no http(s)://HOST[:PORT] URL"),
    ({"compute2": "http://:9787"}, "is no http(s)://HOST[:PORT] URL"),
])
def test_a_malformed_url_is_named_with_its_compute(urls, said):
    bad = migration.bad_exporter_urls(urls)
    assert len(bad) == 1 and said in bad[0], bad
