"""Boots that race: the scheduler picks a host on a view of its ways that
is no longer true, and the compute's claim has the last word.

Nova's ``HostState.consume_from_request`` takes RAM, disk, NUMA and PCI
from a chosen host but never ``stats``, so two scheduler workers (Nova's
``[scheduler] workers`` defaults to the number of CPUs) can both pick the
last ways of a host before its compute publishes the first claim.  Here
the compute's publication is held back, which gives the scheduler
exactly that stale view with one worker.  The claim must then refuse
(``ComputeResourcesUnavailable``), Nova reschedules to an alternate as it
does for NUMA and PCI, and nothing is left half-made: no running guest
without its ways, no group, no reservation.
"""

import collections

import fixtures
import pytest

from nova_rdt import naming
from tests.functional.nova.test_placement_nova import PlacementBase
from tests.functional.nova.test_scheduling_rdt import _Settle

pytestmark = pytest.mark.fuse

FOUR = {"rdt:l3_cache_ways": "4"}


class TestStaleSchedulerView(_Settle, PlacementBase):

    def _setup_scheduler_service(self):
        # Stack on RAM alone (the weighers are loaded when the scheduler
        # starts), so the stale host, the fuller one, is the scheduler's
        # first choice and rdt2 its alternate.
        self.flags(ram_weight_multiplier=-1.0,
                   weight_classes=["nova.scheduler.weights.ram.RAMWeigher"],
                   group="filter_scheduler")
        return super()._setup_scheduler_service()

    def _hold_back_publication(self):
        """As if another scheduler worker decided before the compute
        published: the scheduler keeps the state it had."""
        self.useFixture(fixtures.MockPatch(
            "nova_rdt.virt.publish.publish", return_value=False))

    def live_domains(self, hostname, server_id):
        """The host's (fake) libvirt domains of a server."""
        conn = self.computes[hostname].driver._host.get_connection()
        return [d.name() for d in conn.listAllDomains(0)
                if d.UUIDString() == server_id]

    def _no_ways_shared(self, hostname, servers):
        masks = [self.group_of(hostname, s) for s in servers]
        for cid in (0, 1):
            taken = 0
            for m in masks:
                self.assertEqual(0, taken & m[cid], masks)
                taken |= m[cid]

    def test_a_claim_on_stale_ways_refuses_and_nova_reschedules(self):
        self.start_rdt_compute("rdt1")
        self.start_rdt_compute("rdt2")
        flavor = self.flavor(**FOUR)
        # rdt1 takes two 4-way servers (8 of its 9 free ways) while the
        # scheduler still believes all 9 free.
        self._hold_back_publication()
        first = [self.boot(flavor, host="rdt1") for _ in range(2)]
        self.assertEqual({"rdt1"}, {s["OS-EXT-SRV-ATTR:host"]
                                    for s in first})
        server = self.boot(flavor)
        # The scheduler chose rdt1 (stacking, stale room); its claim
        # refused; Nova rescheduled to rdt2.
        self.assertEqual("rdt2", server["OS-EXT-SRV-ATTR:host"])
        # Two builds: rdt1's (which rescheduled; Nova records a build
        # that hands back for a reschedule as its event's success), then
        # rdt2's.
        events = sorted(self.build_events(server["id"]),
                        key=lambda e: e["start_time"])
        self.assertEqual(["rdt1", "rdt2"], [e["host"] for e in events])
        # rdt1's claim refused this server, by its id.
        self.assertRegex(self.stdlog.logger.output,
                         rf"no room for 4 ways of instance {server['id']}")
        # Nothing of it on rdt1: no group, no reservation.
        name = server["OS-EXT-SRV-ATTR:instance_name"]
        self.assertFalse([g for g in self.groups("rdt1")
                          if naming.is_libvirt_group_of(g, name)])
        self.assertNotIn(server["id"], self.placer("rdt1").uuids())
        self._no_ways_shared("rdt1", first)
        self.assertEqual(self.decided(server, "rdt2"),
                         self.group_of("rdt2", server))

    def test_more_boots_than_room_end_active_and_isolated_or_refused(self):
        """N boots on stale views against room for fewer than N: every
        ACTIVE server holds its flavor's ways, disjoint from the others';
        the rest end in error, none half-made."""
        self.start_rdt_compute("rdt1")
        self.start_rdt_compute("rdt2")
        flavor = self.flavor(**FOUR)
        self._hold_back_publication()
        posted = [self.api.post_server({"server": self._build_server(
            flavor_id=flavor, networks="none")}) for _ in range(6)]
        servers = [self.settle(s["id"]) for s in posted]
        status = collections.Counter(s["status"] for s in servers)
        # Two fit on each host (9 free ways each).
        self.assertEqual({"ACTIVE": 4, "ERROR": 2}, dict(status))
        by_host = collections.defaultdict(list)
        for s in servers:
            if s["status"] == "ACTIVE":
                by_host[s["OS-EXT-SRV-ATTR:host"]].append(s)
                self.assertEqual(
                    self.decided(s, s["OS-EXT-SRV-ATTR:host"]),
                    self.group_of(s["OS-EXT-SRV-ATTR:host"], s))
        self.assertEqual({"rdt1": 2, "rdt2": 2},
                         {h: len(v) for h, v in by_host.items()})
        for host, mine in by_host.items():
            self._no_ways_shared(host, mine)
        # The stale view did send builds to hosts that then refused them.
        builds = sum(len(self.build_events(s["id"])) for s in servers)
        self.assertGreater(builds, status["ACTIVE"])
        for s in servers:
            if s["status"] != "ERROR":
                continue
            tried = {e["host"] for e in self.build_events(s["id"])}
            for host in ("rdt1", "rdt2"):
                self.assertNotIn(s["id"], self.placer(host).uuids())
                if host not in tried:
                    continue
                # A compute that refused it has no domain left for it,
                # so no group (a server that never reached a compute
                # lives in cell0, whose instance names cell1 reuses).
                self.assertEqual([], self.live_domains(host, s["id"]))
