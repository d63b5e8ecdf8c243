"""RDTFilter inside Nova's own scheduler: parses, classes, RMIDs, NUMA.

Real Nova services (API, conductor, scheduler with its HostManager and
database, placement, compute with nova-rdt's driver); fakelibvirt for
libvirtd and the FUSE resctrl emulator for each host.
"""

import collections
import os
from unittest import mock

import pytest

from nova_rdt.allocation import hoststate
from nova_rdt.allocation import planner
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
        self._real_parse = planner.HostSummary.parse.__func__
        self._host = None

    def host_summary(self, host_state):
        self._host = host_state.host
        self.calls[host_state.host] += 1
        raw = (host_state.stats or {}).get(hoststate.STATS_KEY)
        seen = self.seen[host_state.host]
        if raw and (not seen or seen[-1] != raw):
            seen.append(raw)
        return self._real_summary(host_state)

    def parse(self, cls, raw):
        self.parses[self._host] += 1
        return self._real_parse(cls, raw)


class TestParsesPerHostUpdate(RdtNovaTestBase):

    def test_parsed_once_per_host_update_never_per_request(self):
        for name in ("rdt1", "rdt2"):
            self.start_rdt_compute(name)
        self.start_plain("plain1")
        log = _ParseLog()
        # The cache is per process: start it empty, as a new scheduler
        # does (earlier tests published equal content for these hosts).
        with mock.patch.dict(rdt_filter._SUMMARIES, clear=True), \
                mock.patch.object(rdt_filter, "host_summary",
                                  log.host_summary), \
                mock.patch.object(planner.HostSummary, "parse",
                                  classmethod(log.parse)):
            flavor = self.flavor(**{"rdt:l3_cache_ways": "1"})
            # One after another, no compute update in between: Nova's
            # HostManager reloads every ComputeNode for each request and
            # HostState.update() hands each a new stats dict.
            for _ in range(4):
                self.boot(flavor)
            for host in ("rdt1", "rdt2"):
                self.assertEqual(4, log.calls[host])
                self.assertEqual(1, log.parses[host], log.seen[host])
                self.assertEqual(1, len(log.seen[host]))
            self.assertEqual(0, log.parses["plain1"])

            # The computes publish what the instances took: each host whose
            # content changed is parsed once more, then never again.
            self._run_periodics()
            for _ in range(2):
                self.boot(flavor)
        for host in ("rdt1", "rdt2"):
            self.assertEqual(6, log.calls[host])
            self.assertEqual(len(log.seen[host]), log.parses[host],
                             f"{host}: one parse per content it published")
            self.assertLessEqual(log.parses[host], 3)
        changed = [h for h in ("rdt1", "rdt2") if len(log.seen[h]) > 1]
        self.assertTrue(changed, "the periodic task published new state")


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
