"""RDTFilter inside Nova's own scheduler: parses, classes, RMIDs, NUMA,
multi-creates and state published at once.

Real Nova services (API, conductor, scheduler with its HostManager and
database, placement, compute with nova-rdt's driver); fakelibvirt for
libvirtd and the FUSE resctrl emulator for each host.
"""

import collections
import os
import time
from unittest import mock

import pytest

from nova_rdt.allocation import hoststate
from nova_rdt.scheduler import filter as rdt_filter
from tests.functional.nova.test_rdt_nova import RdtNovaTestBase

pytestmark = pytest.mark.fuse


class _ParseLog:
    """Which host's RDT state the scheduler parsed, and what it saw."""

    def __init__(self):
        self.parses: collections.Counter = collections.Counter()
        self.seen: dict[str, list[str]] = collections.defaultdict(list)
        self.calls: collections.Counter = collections.Counter()
        self._real_summary = rdt_filter.host_summary
        self._real_read = rdt_filter._read
        self._host = None

    def host_summary(self, host_state):
        self._host = host_state.host
        self.calls[host_state.host] += 1
        raw = (host_state.stats or {}).get(hoststate.STATS_KEY)
        seen = self.seen[host_state.host]
        if raw and (not seen or seen[-1] != raw):
            seen.append(raw)
        return self._real_summary(host_state)

    def read(self, raw):
        self.parses[self._host] += 1
        return self._real_read(raw)


class TestParsesPerHostUpdate(RdtNovaTestBase):

    def test_parsed_once_per_host_update_never_per_request(self):
        for name in ("rdt1", "rdt2"):
            self.start_rdt_compute(name)
        self.start_plain("plain1")
        log = _ParseLog()
        # The cache is per process: start it empty, as a new scheduler
        # does (earlier tests published equal content for these hosts).
        # The filter reads a compute's document (its solver's input) in
        # one place.
        with mock.patch.dict(rdt_filter._SUMMARIES, clear=True), \
                mock.patch.dict(rdt_filter._PUBLISHED, clear=True), \
                mock.patch.object(rdt_filter, "host_summary",
                                  log.host_summary), \
                mock.patch.object(rdt_filter, "_read", log.read):
            # Requests that change nothing (10 ways: each host has 9 to
            # give, so none is built): Nova's HostManager reloads every
            # ComputeNode for each and HostState.update() hands each a new
            # stats dict, yet each host is parsed once.
            huge = self.flavor(**{"rdt:l3_cache_ways": "10"})
            for _ in range(3):
                self.boot(huge, state="ERROR")
            for host in ("rdt1", "rdt2"):
                self.assertEqual(3, log.calls[host])
                self.assertEqual(1, log.parses[host], log.seen[host])
                self.assertEqual(1, len(log.seen[host]))
            self.assertEqual(0, log.parses["plain1"])

            # Every boot publishes the host's new state at once (and the
            # periodic task too): a host is parsed once per content it
            # published, never once per request.
            flavor = self.flavor(**{"rdt:l3_cache_ways": "1"})
            for _ in range(3):
                self.boot(flavor)
            self._run_periodics()
            for _ in range(2):
                self.boot(flavor)
        for host in ("rdt1", "rdt2"):
            self.assertEqual(8, log.calls[host])
            self.assertEqual(len(log.seen[host]), log.parses[host],
                             f"{host}: one parse per content it published")
        changed = [h for h in ("rdt1", "rdt2") if len(log.seen[h]) > 1]
        self.assertTrue(changed, "the hosts published new state")


class TestClassScheduling(RdtNovaTestBase):

    def test_class_flavor_goes_where_the_class_can_be_honoured(self):
        # rdt1 defines both classes; "huge" asks more ways than are free
        # (11 - 2 reserved = 9), so its group could never be made.
        self.flags(group="rdt", classes=["low:l3_ways=1,mb=10",
                                         "huge:l3_ways=10"])
        self.start_rdt_compute("rdt1")
        self.flags(group="rdt", classes=[])
        self.start_rdt_compute("rdt2")
        self.start_plain("plain1")

        state = hoststate.HostRdtState.from_stats(
            self._compute_stats("rdt1"))
        self.assertEqual({"low", "huge"}, set(state.classes))
        self.assertEqual({}, hoststate.HostRdtState.from_stats(
            self._compute_stats("rdt2")).classes)

        low = self.flavor(**{"rdt:class": "low"})
        for _ in range(2):
            server = self.boot(low)
            self.assertEqual("rdt1", server["OS-EXT-SRV-ATTR:host"])
        for name in ("huge", "undefined"):
            server = self.boot(self.flavor(**{"rdt:class": name}),
                               state="ERROR")
            self.assertIn("No valid host", server["fault"]["message"])

    def test_forced_host_without_the_class_follows_missing_rdt_policy(self):
        self.flags(group="rdt", classes=[])
        self.start_rdt_compute("rdt1")
        low = self.flavor(**{"rdt:class": "low"})
        # Forced past the filter: the driver refuses (reject, the
        # default), and with nowhere else to go the build fails.
        server = self.boot(low, state="ERROR", az="nova:rdt1")
        self.assertIn("fault", server)
        self.assertEqual([], self.defined_xmls("rdt1", server["id"]))
        # With [rdt] missing_rdt_policy=ignore it boots, without a class.
        self.flags(group="rdt", missing_rdt_policy="ignore")
        server = self.boot(low, az="nova:rdt1")
        self.assertEqual("rdt1", server["OS-EXT-SRV-ATTR:host"])
        self.assertIsNone(self.tunes(server["id"]).find("cputune/cachetune"))

    def _compute_stats(self, hostname):
        from nova import context as nova_context
        from nova import objects
        ctx = nova_context.get_admin_context()
        node = objects.ComputeNode.get_first_node_by_host_for_old_compat(
            ctx, hostname)
        return node.stats


class TestMonitoringScheduling(RdtNovaTestBase):

    def _use_up_rmids(self, hostname, keep=0):
        """Take every free RMID with monitor groups of another tool."""
        root = self.rdt_host(hostname).resctrl_root
        with open(os.path.join(root, "info", "L3_MON", "num_rmids")) as f:
            total = int(f.read())
        ctrl = [e.path for e in os.scandir(root) if e.is_dir()
                and e.name not in ("info", "mon_groups", "mon_data")]
        # Every group holds an RMID: the root, control groups and the
        # monitor groups under them (libvirt makes some as domains start).
        groups = 1 + len(ctrl) + sum(
            len(os.listdir(os.path.join(g, "mon_groups")))
            for g in [root, *ctrl]
            if os.path.isdir(os.path.join(g, "mon_groups")))
        for i in range(total - groups - keep):
            os.mkdir(os.path.join(root, "mon_groups", f"other-{i}"))

    def test_monitor_flavor_needs_a_free_rmid(self):
        self.start_rdt_compute("rdt1")
        self.start_rdt_compute("rdt2")
        self._use_up_rmids("rdt1")
        self._run_periodics()
        mon = self.flavor(**{"rdt:monitor": "true"})
        ways = self.flavor(**{"rdt:l3_cache_ways": "1"})
        for flavor in (mon, ways):
            # Every new group takes an RMID on a monitoring host: only
            # rdt2 has one.
            server = self.boot(flavor)
            self.assertEqual("rdt2", server["OS-EXT-SRV-ATTR:host"])
        self._use_up_rmids("rdt2")
        self._run_periodics()
        server = self.boot(mon, state="ERROR")
        self.assertIn("No valid host", server["fault"]["message"])
        # A flavor that asks for no group of its own still boots.
        self.boot(self.flavor(**{"rdt:monitor": "false"}))


def _used(stats) -> dict[int, int]:
    state = hoststate.HostRdtState.from_stats(stats)
    return {cid: c.used["both"] for cid, c in state.cache.items()}


class _Settle:
    def settle(self, server_id):
        for _ in range(400):
            s = self.api.get_server(server_id)
            if s["status"] in ("ACTIVE", "ERROR"):
                return s
            time.sleep(0.05)
        self.fail(f"server {server_id} never settled")

    def multi_create(self, flavor, count, **extra):
        body = self._build_server(flavor_id=flavor, networks="none")
        body["min_count"] = body["max_count"] = count
        body.update(extra)
        self.api.post_server({"server": body})
        return [self.settle(s["id"]) for s in self.api.get_servers()]

    def build_events(self, server_id):
        """The compute's build attempts of a server (one per host tried)."""
        out = []
        for action in self.api.get_instance_actions(server_id):
            detail = self.api.get_instance_action_details(
                server_id, action["request_id"])
            out += [e for e in detail.get("events", [])
                    if e["event"] == "compute__do_build_and_run_instance"]
        return out

    def node_stats(self, hostname):
        from nova import context as nova_context
        from nova import objects
        return objects.ComputeNode.get_first_node_by_host_for_old_compat(
            nova_context.get_admin_context(), hostname).stats


class TestMultiCreate(_Settle, RdtNovaTestBase):
    """Case 9: a multi-create is decided by the filter, as Nova decides RAM
    and CPUs, not by a compute that refuses the instance the filter should
    not have let through."""

    def _setup_scheduler_service(self):
        # Stack: every instance on the host with the least RAM left, as
        # long as it passes the filters.  Without counting, the third
        # 4-way instance would go where two already took the ways.
        self.flags(weight_classes=["nova.scheduler.weights.ram.RAMWeigher"],
                   ram_weight_multiplier=-1.0, group="filter_scheduler")
        return super()._setup_scheduler_service()

    def test_three_for_room_for_two_is_no_valid_host(self):
        self.start_rdt_compute("rdt1")
        four = self.flavor(**{"rdt:l3_cache_ways": "4"})
        # 9 free ways per cache id: two 4-way instances fit, not three.
        # Nova places a multi-create whole or not at all: the scheduler
        # finds no host for the third, so none is built.
        servers = self.multi_create(four, 3)
        self.assertEqual(["ERROR"] * 3, [s["status"] for s in servers])
        for s in servers:
            self.assertIn("No valid host", s["fault"]["message"])
            self.assertEqual([], self.build_events(s["id"]))
            self.assertEqual([], self.defined_xmls("rdt1", s["id"]))
        for s in servers:
            self._delete_server(s)
        servers = self.multi_create(four, 2)
        self.assertEqual(["ACTIVE"] * 2, [s["status"] for s in servers])

    def test_the_third_goes_to_another_host_without_a_reschedule(self):
        self.start_rdt_compute("rdt1")
        self.start_rdt_compute("rdt2")
        four = self.flavor(**{"rdt:l3_cache_ways": "4"})
        servers = self.multi_create(four, 4)
        self.assertEqual(["ACTIVE"] * 4, [s["status"] for s in servers])
        hosts = collections.Counter(s["OS-EXT-SRV-ATTR:host"]
                                    for s in servers)
        self.assertEqual({"rdt1": 2, "rdt2": 2}, dict(hosts))
        for s in servers:
            events = self.build_events(s["id"])
            # One build, on the host the scheduler chose: no compute
            # refused it and no reschedule happened.
            self.assertEqual(1, len(events), events)
            self.assertEqual("Success", events[0]["result"])
        self.assertNotIn("no room for", self.stdlog.logger.output)


class TestPublishedAtOnce(_Settle, RdtNovaTestBase):
    """A claim or a release reaches the scheduler at once, not at the next
    periodic task (none runs in these tests: [DEFAULT] periodic_enable is
    off in Nova's functional tests)."""

    def test_claim_and_release_publish_before_the_periodic_task(self):
        self.start_rdt_compute("rdt1")
        self.assertEqual({0: 0x3, 1: 0x3}, _used(self.node_stats("rdt1")))
        four = self.flavor(**{"rdt:l3_cache_ways": "4"})
        server = self.boot(four)
        used = _used(self.node_stats("rdt1"))
        self.assertNotEqual(
            {0: 0x3, 1: 0x3}, used, "the driver did not publish its claim: "
            "_rdt_claim and _rdt_release call nova_rdt.virt.publish.publish")
        self.assertEqual(1, len(set(used.values())), used)
        self.assertEqual(4, bin(used[0] & ~0x3).count("1"), hex(used[0]))
        # Two separate requests fill the host; the third is refused by
        # the scheduler, from what the host published.
        second = self.boot(four)
        third = self.boot(four, state="ERROR")
        self.assertIn("No valid host", third["fault"]["message"])
        self.assertEqual([], self.build_events(third["id"]))
        # A release publishes too: room for one again.
        self._delete_server(second)
        self.assertEqual(used, _used(self.node_stats("rdt1")))
        self.boot(four)
        self._delete_server(server)

    def test_publish_goes_through_the_trackers_stats(self):
        """What the tracker saves later (another instance's state change)
        keeps the published state, instead of putting the old one back."""
        from nova_rdt.virt import publish
        self.start_rdt_compute("rdt1")
        compute = self.computes["rdt1"]
        driver = compute.driver
        before = self.node_stats("rdt1")["rdt"]
        self.assertTrue(self._other_tool_takes_ways(driver))
        after = self.node_stats("rdt1")
        self.assertNotEqual(before, after["rdt"])
        self.assertEqual({0: 0x7c3, 1: 0x7c3}, _used(after))
        self.assertEqual(after["rdt"], compute.rt.stats["rdt1"]["rdt"])
        # Nothing changed: nothing saved.
        self.assertFalse(publish.publish(
            driver.virtapi,
            driver.rdt.stats))
        # A plain boot makes the tracker save the node several times.
        self.boot(self.flavor())
        self.assertEqual({0: 0x7c3, 1: 0x7c3},
                         _used(self.node_stats("rdt1")))
        # No tracker (another virtapi): nothing published, no error.
        self.assertFalse(publish.publish(object(), lambda: {"rdt": ""}))

    def _other_tool_takes_ways(self, driver) -> bool:
        """Ways taken behind the driver's back (another tool's group on
        ways 6-10), which only the periodic task would see, then
        published at once; whether the node was saved."""
        from nova_rdt.virt import publish
        root = self.rdt_host("rdt1").resctrl_root
        os.mkdir(os.path.join(root, "other-tool"))
        with open(os.path.join(root, "other-tool", "schemata"), "w") as f:
            f.write("L3:0=7c0;1=7c0\n")
        return publish.publish(
            driver.virtapi,
            driver.rdt.stats)

    def test_the_periodic_tasks_older_snapshot_does_not_win(self):
        """The periodic task reads the driver's stats before it takes the
        tracker's lock, then writes them over the node's.  A publish in
        between (a claim, a release) must survive it."""
        from nova import context as nova_context
        self.start_rdt_compute("rdt1")
        compute = self.computes["rdt1"]
        driver = compute.driver
        snapshot = driver.get_available_resource("rdt1")
        self.assertTrue(self._other_tool_takes_ways(driver))
        compute.rt._update_available_resource(
            nova_context.get_admin_context(), snapshot)
        self.assertEqual({0: 0x7c3, 1: 0x7c3},
                         _used(self.node_stats("rdt1")))
