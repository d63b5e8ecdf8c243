"""The migration tests' own steps, run against a simulated two-compute
cloud: a fake Nova (servers, flavors, moves as Nova's API takes them)
and each compute's exporter serving ``/api/layout`` documents the
exporter's own ``page.layout`` makes from what the cloud holds there.
A right cloud passes; a cloud that leaves a group behind, gives the
wrong ways, or does not move the server fails the test, saying so.  The
single-compute tests (test_rdt_applied) run there too: with
``exporter_urls`` each server is read on the compute it runs on."""

from __future__ import annotations

import itertools
import types

import pytest
from tempest.common import waiters

from tempest_plugin import exporter as exporter_mod
from tempest_plugin import servers as servers_mod
from tempest_plugin.tests.api import test_rdt_migration as mod
from tests.unit.test_tempest_migration import _group
from tests.unit.test_tempest_migration import klass
from tests.unit.test_tempest_migration import layout
from tests.unit.test_tempest_migration import own

HOSTS = ["compute1", "compute2"]


class Cloud:
    """Nova and the two computes' resctrl, as the tests see them."""

    def __init__(self, bugs=()):
        self.bugs = set(bugs)
        self.flavors, self.servers, self.calls = {}, {}, []
        # host -> uuid -> group name (None for a class member).
        self.placed = {h: {} for h in HOSTS}
        self.stale = {h: [] for h in HOSTS}        # groups left behind
        self.domid = itertools.count(1)
        self.ids = itertools.count(1)
        self.booted = 0
        self.boots = []                            # each boot's host

    # -- resctrl --
    def place(self, host, uuid):
        specs = self.flavors[self.servers[uuid]["flavor"]]
        if "rdt:class" in specs:
            self.placed[host][uuid] = None
        else:
            self.placed[host][uuid] = (
                f"qemu-{next(self.domid)}-instance-"
                f"{self.servers[uuid]['n']:08x}-vcpus_0")

    def unplace(self, host, uuid, bug=None):
        name = self.placed[host].pop(uuid)
        if bug in self.bugs and name:
            self.stale[host].append(name)

    def layout(self, host):
        groups, classes = [], set()
        for uuid, name in self.placed[host].items():
            specs = self.flavors[self.servers[uuid]["flavor"]]
            if name is None:
                classes.add(specs["rdt:class"])
                continue
            n = int(specs["rdt:l3_cache_ways"])
            first = 7 if specs.get("rdt:pmd_share") == "true" else 5
            if "wrong ways" in self.bugs and host == self.servers[uuid][
                    "moved_to"]:
                n += 1
            groups.append(own(ways=range(first, first + n), name=name,
                              uuid=uuid))
        groups += [klass(c) for c in sorted(classes)]
        # A group whose record the hook dropped: the exporter calls it
        # foreign, with no instance.
        groups += [_group(name, "foreign", {0: {3, 4}, 1: {3, 4}})
                   for name in self.stale[host]]
        return layout(*groups, host=host)


class Flavors:
    def __init__(self, cloud):
        self.cloud = cloud

    def create_flavor(self, **kw):
        fid = str(next(self.cloud.ids))
        self.cloud.flavors[fid] = {}
        return {"flavor": {"id": fid}}

    def set_flavor_extra_spec(self, fid, **specs):
        self.cloud.flavors[fid].update(specs)

    def delete_flavor(self, fid):
        self.cloud.flavors.pop(fid)


class Servers:
    def __init__(self, cloud):
        self.cloud = cloud

    def create_server(self, name, flavorRef, imageRef, networks,
                      scheduler_hints=None):
        """Round robin over the computes from the first, but beside the
        members of an affinity group; more ways than a cache has is No
        valid host."""
        assert networks == "none"
        cloud = self.cloud
        uuid = f"00000000-0000-4000-8000-{next(cloud.ids):012d}"
        group = (scheduler_hints or {}).get("group")
        beside = [s["host"] for s in cloud.servers.values()
                  if group and s.get("group") == group]
        host = beside[0] if beside else HOSTS[cloud.booted % len(HOSTS)]
        cloud.booted += 1
        ways = int(cloud.flavors[flavorRef].get("rdt:l3_cache_ways", 0))
        cloud.boots.append(host if ways < 11 else None)
        server = {"flavor": flavorRef, "host": host, "status": "ACTIVE",
                  "moved_to": None, "n": len(cloud.servers) + 1,
                  "group": group}
        cloud.servers[uuid] = server
        if ways >= 11:
            server.update(host=None, status="ERROR", fault={
                "message": "No valid host was found. RDTFilter: "
                           f"rdt:l3_cache_ways={ways} does not fit"})
        else:
            cloud.place(host, uuid)
        return {"server": {"id": uuid}}

    def show_server(self, uuid):
        s = self.cloud.servers[uuid]
        return {"server": {"id": uuid, "status": s["status"],
                           "OS-EXT-SRV-ATTR:host": s["host"],
                           **({"fault": s["fault"]} if "fault" in s
                              else {})}}

    def delete_server(self, uuid):
        s = self.cloud.servers.pop(uuid)
        if s["host"]:
            self.cloud.placed[s["host"]].pop(uuid, None)

    def _move(self, uuid, host, status):
        s = self.cloud.servers[uuid]
        if "stays" in self.cloud.bugs:
            return
        s["src"], s["moved_to"] = s["host"], host
        self.cloud.place(host, uuid)
        self.cloud.unplace(s["host"], uuid, "left on source")
        s["host"], s["status"] = host, status

    def live_migrate_server(self, uuid, **kw):
        self.cloud.calls.append(("live", kw))
        # No host: the scheduler's choice, another compute.
        host = kw["host"] or next(
            h for h in HOSTS if h != self.cloud.servers[uuid]["host"])
        self._move(uuid, host, "ACTIVE")

    def migrate_server(self, uuid, **kw):
        self.cloud.calls.append(("cold", kw))
        self._move(uuid, kw["host"], "VERIFY_RESIZE")

    def confirm_resize_server(self, uuid):
        self.cloud.calls.append(("confirm", {}))
        self.cloud.servers[uuid]["status"] = "ACTIVE"

    def revert_resize_server(self, uuid):
        self.cloud.calls.append(("revert", {}))
        s = self.cloud.servers[uuid]
        self.cloud.place(s["src"], uuid)
        self.cloud.unplace(s["host"], uuid, "left on destination")
        s["host"], s["status"], s["moved_to"] = s["src"], "ACTIVE", None


class FakeExporter(exporter_mod.Exporter):
    def __init__(self, cloud, host):
        super().__init__(f"http://{host}:9787")
        self.cloud, self.host = cloud, host

    def layout(self):
        return self.cloud.layout(self.host)

    def feature(self, feature):
        return False

    def instance_ways(self, uuid):
        # What /metrics' nova_rdt_group_l3_ways says, from the layout.
        doc = self.layout()
        sets = exporter_mod.way_sets(doc)
        return {key.split(":")[1]: len(ways)
                for g in exporter_mod.instance_groups(doc, uuid)
                for key, ways in sets.get(g, {}).items()}


@pytest.fixture
def run(monkeypatch):
    """run(test class, kind, bugs, **kw): one move; the cloud after."""
    def wait(client, uuid, status, **kw):
        got = client.show_server(uuid)["server"]["status"]
        assert got == status, f"{uuid} is {got}, not {status}"
    monkeypatch.setattr(waiters, "wait_for_server_status", wait)
    monkeypatch.setattr(waiters, "wait_for_server_termination",
                        lambda client, uuid: None)
    conf = types.SimpleNamespace(
        nova_rdt=types.SimpleNamespace(forwarding_l3_ways=4,
                                       noisy_class="low_priority"),
        compute=types.SimpleNamespace(image_ref="image"))
    monkeypatch.setattr(mod, "CONF", conf)
    monkeypatch.setattr(servers_mod, "CONF", conf)
    monkeypatch.setattr(mod, "SETTLE_SECONDS", 0.0)
    # One look: what a right cloud shows, it shows at once.
    monkeypatch.setattr(exporter_mod.Exporter, "wait_for",
                        lambda self, what, check, **kw: check())

    def go(cls, what, bugs=(), **kw):
        cloud = Cloud(bugs)
        client = Servers(cloud)
        monkeypatch.setattr(cls, "admin_servers_client", client,
                            raising=False)
        monkeypatch.setattr(cls, "admin_flavors_client", Flavors(cloud),
                            raising=False)
        monkeypatch.setattr(cls, "os_admin", types.SimpleNamespace(
            migrations_client=types.SimpleNamespace(
                list_migrations=lambda: {"migrations": []})),
            raising=False)
        monkeypatch.setattr(cls, "hosts", HOSTS, raising=False)
        monkeypatch.setattr(cls, "exporters", {
            h: FakeExporter(cloud, h) for h in HOSTS}, raising=False)
        test = cls("run")
        try:
            if cls is mod.RdtLiveMigrationTest:
                test._live_migrate(what, **kw)
            else:
                test._cold_migrate(what, **kw)
        finally:
            test.doCleanups()
        return cloud
    return go


KINDS = ["ways", "sharer", "member"]


@pytest.mark.parametrize("what", KINDS)
def test_live_migration_of_each_kind_passes_on_a_right_cloud(run, what):
    cloud = run(mod.RdtLiveMigrationTest, what)
    assert cloud.calls == [("live", {"host": "compute2",
                                     "block_migration": "auto"})]
    # Clean-up deleted the server and its flavor.
    assert not cloud.servers and not cloud.flavors


def test_live_migration_the_scheduler_places_names_no_host(run):
    cloud = run(mod.RdtLiveMigrationTest, "ways", named=False)
    assert cloud.calls == [("live", {"host": None,
                                     "block_migration": "auto"})]


def test_live_migration_the_scheduler_places_that_stays_fails(run):
    with pytest.raises(AssertionError, match="is on compute1, not "
                                             "compute2"):
        run(mod.RdtLiveMigrationTest, "ways", bugs=["stays"], named=False)


@pytest.mark.parametrize("what", KINDS)
@pytest.mark.parametrize("revert", [False, True])
def test_cold_migration_of_each_kind_passes_on_a_right_cloud(run, what,
                                                            revert):
    cloud = run(mod.RdtColdMigrationTest, what, revert=revert)
    assert cloud.calls == [("cold", {"host": "compute2"}),
                           ("revert" if revert else "confirm", {})]


@pytest.mark.parametrize("cls, kw, bug, said", [
    (mod.RdtLiveMigrationTest, {}, "left on source",
     "compute1 still has group qemu-1-instance-00000001-vcpus_0 (kind "
     "foreign)"),
    (mod.RdtColdMigrationTest, {"revert": False}, "left on source",
     "still holds ways on compute1"),
    (mod.RdtColdMigrationTest, {"revert": True}, "left on destination",
     "compute2 still has group qemu-2-instance-00000001-vcpus_0"),
    (mod.RdtLiveMigrationTest, {}, "wrong ways",
     "holds 3 ways on L3:0 of compute2, not its flavor's 2"),
    (mod.RdtColdMigrationTest, {"revert": False}, "wrong ways",
     "holds 3 ways on L3:0 of compute2"),
    (mod.RdtLiveMigrationTest, {}, "stays",
     "is on compute1, not compute2"),
    (mod.RdtColdMigrationTest, {"revert": False}, "stays",
     "is ACTIVE, not VERIFY_RESIZE"),
])
def test_a_wrong_cloud_fails_the_test_saying_what(run, cls, kw, bug, said):
    with pytest.raises(AssertionError) as e:
        run(cls, "ways", bugs=[bug], **kw)
    assert said in str(e.value), str(e.value)


def test_a_sharer_needs_a_pmd_cos_on_every_compute(run, monkeypatch):
    real = Cloud.layout
    monkeypatch.setattr(Cloud, "layout", lambda self, host: (
        real(self, host) if host == "compute1" else
        layout(host=host, pmd=False)))
    with pytest.raises(mod.RdtLiveMigrationTest.skipException,
                       match="no PMD COS on compute2"):
        run(mod.RdtLiveMigrationTest, "sharer")


def test_a_class_member_needs_a_class(run, monkeypatch):
    monkeypatch.setattr(mod.CONF.nova_rdt, "noisy_class", None)
    with pytest.raises(mod.RdtColdMigrationTest.skipException,
                       match="noisy_class is not set"):
        run(mod.RdtColdMigrationTest, "member", revert=False)


# -- the single-server tests on two computes: each server read where it
# -- runs (exporter_urls), the PMD pair kept together --

@pytest.fixture
def applied(run, monkeypatch):
    """applied(test name, host_exporters): runs one of test_rdt_applied's
    tests on the simulated cloud; the cloud after."""
    from tempest_plugin.tests.api import test_rdt_applied as amod
    conf = types.SimpleNamespace(nova_rdt=types.SimpleNamespace(
        forwarding_l3_ways=4, noisy_l3_ways=2, noisy_class="low_priority"),
        compute=types.SimpleNamespace(image_ref="image"))
    monkeypatch.setattr(amod, "CONF", conf)

    def go(name, urls=True):
        cloud = Cloud()
        cls = (amod.RdtAppliedNegativeTest if "no_valid_host" in name
               else amod.RdtAppliedTest)
        groups = {}

        def create_server_group(name, policies):
            assert policies == ["affinity"]
            groups[name] = {"id": f"sg-{len(groups)}"}
            return {"server_group": groups[name]}
        exporters = {h: FakeExporter(cloud, h) for h in HOSTS}
        for attr, value in {
                "admin_servers_client": Servers(cloud),
                "admin_flavors_client": Flavors(cloud),
                "os_admin": types.SimpleNamespace(
                    server_groups_client=types.SimpleNamespace(
                        create_server_group=create_server_group,
                        delete_server_group=lambda gid: None),
                    hypervisor_client=types.SimpleNamespace(
                        list_hypervisors=lambda: {"hypervisors": [
                            {"hypervisor_hostname": h} for h in HOSTS]})),
                # exporter_url names compute1's.
                "exporter": exporters["compute1"],
                "host_exporters": exporters if urls else {}}.items():
            monkeypatch.setattr(cls, attr, value, raising=False)
        test = cls(name)
        try:
            getattr(test, name)()
        finally:
            test.doCleanups()
        return cloud
    return go


def test_a_server_on_the_other_compute_is_read_there(applied,
                                                     monkeypatch):
    real = Servers.create_server

    def on_compute2(self, *a, **kw):
        self.cloud.booted = 1
        return real(self, *a, **kw)
    monkeypatch.setattr(Servers, "create_server", on_compute2)
    cloud = applied("test_server_gets_the_ways_and_mb_its_flavor_asked_for")
    assert cloud.boots == ["compute2"]
    # Through exporter_url (compute1's) alone, it is not seen.
    with pytest.raises(AssertionError, match="shows no group"):
        applied("test_server_gets_the_ways_and_mb_its_flavor_asked_for",
                urls=False)


def test_class_members_on_two_computes_cost_one_clos_on_each(applied):
    cloud = applied("test_a_class_costs_one_clos_however_many_members")
    assert cloud.boots == ["compute1", "compute2"]


def test_the_pmd_pair_is_kept_on_one_compute(applied, monkeypatch):
    cloud = applied("test_a_pmd_sharer_and_its_neighbour_hold_their_own_ways")
    assert cloud.boots == ["compute1", "compute1"]
    # Apart (the hint ignored), the check fails: the neighbour is not
    # where the sharer is.
    real = Servers.create_server
    monkeypatch.setattr(Servers, "create_server", lambda self, *a, **kw: (
        real(self, *a, **{k: v for k, v in kw.items()
                          if k != "scheduler_hints"})))
    with pytest.raises(AssertionError, match="has 0 groups"):
        applied("test_a_pmd_sharer_and_its_neighbour_hold_their_own_ways")


def test_no_valid_host_is_checked_on_every_compute(applied):
    cloud = applied(
        "test_more_ways_than_the_host_has_gives_no_valid_host_and_why")
    assert cloud.boots == [None]
