"""nova-rdt decides where every way goes, inside real Nova.

fakelibvirt stands in for libvirtd; when a domain starts, the harness
makes the resctrl groups libvirt would make, with a double of libvirt's
own allocator (``RDT_LIBVIRT_ALLOCATOR``: tests/libvirt_model.py), so
what libvirt picks and what nova-rdt decides can differ, as on a real
host.  The emulated host is
gold-6252 (11 ways on each of 2 cache ids; the host keeps ways 0-1).
"""

import os

from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.api import client
from nova.virt.libvirt import config as vconfig
import pytest

from nova_rdt import failpoints
from nova_rdt import naming
from nova_rdt.allocation import placement
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.virt import guest_rdt
from tests.functional.nova import base
from tests.functional.nova.test_rdt_nova import RdtNovaTestBase

pytestmark = pytest.mark.fuse


class PlacementBase(RdtNovaTestBase):

    def setUp(self):
        super().setUp()
        failpoints.disarm()
        self.addCleanup(failpoints.disarm)

    def groups(self, hostname):
        """libvirt group name -> its L3 masks, as resctrl holds them."""
        root = self.rdt_host(hostname).resctrl_root
        out = {}
        for name in os.listdir(root):
            if naming.is_libvirt_group(name) or name.startswith("nova-rdt-"):
                with open(os.path.join(root, name, "schemata")) as f:
                    out[name] = Schemata.parse(f.read()).domains("L3")
        return out

    def group_of(self, hostname, server):
        name = server["OS-EXT-SRV-ATTR:instance_name"]
        found = [g for g in self.groups(hostname)
                 if naming.is_libvirt_group_of(g, name)]
        self.assertEqual(1, len(found), (name, self.groups(hostname)))
        return self.groups(hostname)[found[0]]

    def decided(self, server, hostname="rdt1"):
        md = guest_rdt.read_metadata(self.domain_xml(server["id"],
                                                     hostname))
        return {cid: mask for (cid, _kind), mask in md.masks.items()}

    def stats(self, hostname):
        ctxt = nova_context.get_admin_context()
        return objects.ComputeNode.get_by_nodename(ctxt, hostname).stats

    def placer(self, hostname):
        return self.computes[hostname].driver.rdt.placer


class TestDecidedNotPredicted(PlacementBase):
    """Case 1: a sharer sits next to the PMD COS, where nova-rdt puts it,
    not where libvirt's best fit would (the lowest free ways)."""

    def test_sharers_start_one_after_another_next_to_the_pmd_cos(self):
        self.flags(group="rdt", pmd_cos=True, pmd_shared_ways=2)
        self.start_rdt_compute("rdt1")
        pmd = naming.pmd_group("nova-rdt-")
        self.assertEqual({0: 0x600, 1: 0x600}, self.groups("rdt1")[pmd])
        servers = []
        for ways in (2, 3, 2):
            flavor = self.flavor(**{"rdt:l3_cache_ways": str(ways),
                                    "rdt:pmd_share": "true"})
            servers.append(self.boot(flavor))
        for server in servers:
            # What libvirt holds is what nova-rdt decided (libvirt's own
            # best fit would have taken the lowest free ways, 2-3).
            self.assertEqual(self.decided(server),
                             self.group_of("rdt1", server))
        masks = [self.group_of("rdt1", s) for s in servers]
        for cid in (0, 1):
            # Each just below the last: 7-8, then 4-6, then 2-3.
            self.assertEqual([0x180, 0x070, 0x00c],
                             [m[cid] for m in masks])
            # The PMD COS spans its base and every sharer: one run.
            self.assertEqual(0x7fc, self.groups("rdt1")[pmd][cid])
        # Every way is now taken: the host is full for anyone.
        self.boot(self.flavor(**{"rdt:l3_cache_ways": "1"}), state="ERROR")

    def test_a_plain_vm_keeps_away_from_the_pmd_cos(self):
        """Case 2: a plain VM leaves room next to the PMD COS, so sharers
        still fit after it."""
        self.flags(group="rdt", pmd_cos=True, pmd_shared_ways=2)
        self.start_rdt_compute("rdt1")
        plain = self.boot(self.flavor(**{"rdt:l3_cache_ways": "3"}))
        sharer = self.boot(self.flavor(**{"rdt:l3_cache_ways": "4",
                                          "rdt:pmd_share": "true"}))
        masks = self.group_of("rdt1", plain)
        shared = self.group_of("rdt1", sharer)
        for cid in (0, 1):
            self.assertEqual(0, masks[cid] & shared[cid])
            self.assertEqual(0x1e0, shared[cid])


class TestStoppedSharerInTheMiddle(PlacementBase):
    """Case 7 on a full host: sharers s1, s2, s3 and a plain VM fill every
    way; s2, in the middle of the PMD span, stops (the span keeps its
    ways: a mask is one run) and starts again on them."""

    def test_it_starts_again(self):
        self.flags(group="rdt", pmd_cos=True, pmd_shared_ways=2)
        self.start_rdt_compute("rdt1")
        share = {"rdt:pmd_share": "true"}
        s1 = self.boot(self.flavor(**{"rdt:l3_cache_ways": "2", **share}))
        s2 = self.boot(self.flavor(**{"rdt:l3_cache_ways": "2", **share}))
        s3 = self.boot(self.flavor(**{"rdt:l3_cache_ways": "1", **share}))
        self.boot(self.flavor(**{"rdt:l3_cache_ways": "2"}))
        held = self.group_of("rdt1", s2)
        self.assertEqual({0: 0x060, 1: 0x060}, held)
        self._stop_server(s2)
        # Nothing else can take its ways.
        self.boot(self.flavor(**{"rdt:l3_cache_ways": "1"}), state="ERROR")
        self._start_server(s2)
        self.assertEqual(held, self.group_of("rdt1", s2))
        pmd = self.groups("rdt1")[naming.pmd_group("nova-rdt-")]
        self.assertEqual({0: 0x7f0, 1: 0x7f0}, pmd)
        for s in (s1, s3):
            self.assertEqual("ACTIVE", self.api.get_server(s["id"])["status"])


class TestClassMovesForASharer(PlacementBase):
    """Case 2 with a PMD base: a plain VM (ways 2-7), a class member (its
    class on way 8, the only way left), then the plain VM goes.  The
    class sits between the free ways and the base; it is nova-rdt's own
    group, so it moves, and sharers of 1-6 ways still start."""

    def test_sharers_start_after_the_plain_vm_leaves(self):
        self.flags(group="rdt", pmd_cos=True, pmd_shared_ways=2,
                   classes=["be:l3_ways=1"])
        self.start_rdt_compute("rdt1")
        plain = self.boot(self.flavor(**{"rdt:l3_cache_ways": "6"}))
        self.boot(self.flavor(**{"rdt:class": "be"}))
        decided = dict(self.placer("rdt1").class_masks("be")["L3"])
        self.assertEqual({0: 0x100, 1: 0x100}, decided)
        # The class group as the member's hook makes it (this harness
        # runs no hook): libvirt's allocator counts its ways as used.
        group = os.path.join(self.rdt_host("rdt1").resctrl_root,
                             "nova-rdt-class-be")
        os.mkdir(group)
        with open(os.path.join(group, "schemata"), "w") as f:
            f.write("L3:0=100;1=100\n")
        self._delete_server(plain)
        # Not forced to the host: the filter sees the class as movable in
        # what the host publishes, and passes it.
        sharer = self.boot(self.flavor(**{"rdt:l3_cache_ways": "6",
                                          "rdt:pmd_share": "true"}))
        masks = self.group_of("rdt1", sharer)
        be = self.groups("rdt1")["nova-rdt-class-be"]
        for cid in (0, 1):
            self.assertEqual(0x1f8, masks[cid])
            # Moved in resctrl before libvirt allocated for the sharer.
            self.assertEqual(0, be[cid] & masks[cid])
            self.assertEqual(1, bin(be[cid]).count("1"))
        self.assertIn("class be moves to", self.stdlog.logger.output)


class TestReservations(PlacementBase):

    def test_a_class_not_made_yet_costs_its_clos(self):
        """Case 3: with one CLOS left, a class VM takes it (its group is
        made when it starts); a plain VM after it is refused by the
        scheduler, instead of starting and leaving the class VM in the
        root group."""
        self.flags(group="rdt", classes=["be:l3_ways=1"])
        self.start_rdt_compute("rdt1")
        driver = self.computes["rdt1"].driver
        clos = self.placer("rdt1")._inputs(
            HostView.collect(driver.rdt.fs))[1].clos
        # Small in every other way: only the CLOS may run out.
        one_way = self._create_flavor(
            vcpu=1, memory_mb=256, disk=1,
            extra_spec={"rdt:l3_cache_ways": "1"})
        for _ in range(clos - 1):
            self.boot(one_way)
        member = self.boot(self._create_flavor(
            vcpu=1, memory_mb=256, disk=1, extra_spec={"rdt:class": "be"}))
        md = guest_rdt.read_metadata(self.domain_xml(member["id"]))
        self.assertEqual("be", md.rdt_class)
        self.assertEqual({0, 1}, {cid for cid, _k in md.class_masks})
        self._run_periodics()
        refused = self.boot(one_way, state="ERROR")
        self.assertIn("No valid host", refused["fault"]["message"])

    def test_a_stopped_vm_keeps_its_ways_across_a_restart(self):
        """Case 6/7: a stopped instance's ways stay reserved, durably,
        and it starts again on them."""
        self.start_rdt_compute("rdt1")
        big = self.flavor(**{"rdt:l3_cache_ways": "5"})
        first = self.boot(big)
        before = self.group_of("rdt1", first)
        self._stop_server(first)
        # libvirt removed its group when it stopped...
        name = first["OS-EXT-SRV-ATTR:instance_name"]
        self.assertFalse([g for g in self.groups("rdt1")
                          if naming.is_libvirt_group_of(g, name)])
        # ...but its ways are not given away, before or after a restart.
        self.boot(big, state="ERROR")
        self.restart_compute_service("rdt1")
        self.assertIn(first["id"], self.placer("rdt1"))
        self._run_periodics()
        self.boot(big, state="ERROR")
        self._start_server(first)
        self.assertEqual(before, self.group_of("rdt1", first))


class TestCompaction(PlacementBase):
    """Case 8: six free ways in two runs of three.  A 4-way VM is refused
    without compaction; with ``[rdt] compaction`` one neighbour moves
    (written into its group before the new VM runs), never an
    ``rdt:slo=latency`` one."""

    def _fragment(self, slo=None):
        three = {"rdt:l3_cache_ways": "3"}
        a = self.boot(self.flavor(**three))
        b = self.boot(self.flavor(**three, **({"rdt:slo": slo}
                                              if slo else {})))
        c = self.boot(self.flavor(**three))
        for s in (a, c):
            self._delete_server(s)
        return b

    def test_off_by_default_then_one_move(self):
        self.start_rdt_compute("rdt1")
        four = self.flavor(**{"rdt:l3_cache_ways": "4"})
        middle = self._fragment()
        before = self.group_of("rdt1", middle)
        self.boot(four, state="ERROR")
        self.flags(compaction=True, group="rdt")
        self.restart_compute_service("rdt1")
        # The scheduler decides: the host publishes what compaction can
        # reach.
        new = self.boot(four)
        moved = self.group_of("rdt1", middle)
        self.assertNotEqual(before, moved)
        mine = self.group_of("rdt1", new)
        for cid in (0, 1):
            self.assertEqual(0, moved[cid] & mine[cid])
        self.assertEqual(1, self.placer("rdt1").compaction_moves)
        self.assertIn("compaction moves", self.stdlog.logger.output)

    def test_a_latency_instance_is_never_moved(self):
        self.flags(compaction=True, group="rdt")
        self.start_rdt_compute("rdt1")
        self._fragment(slo="latency")
        refused = self.boot(self.flavor(**{"rdt:l3_cache_ways": "4"}),
                            state="ERROR")
        self.assertIn("RDTFilter", refused["fault"]["message"])
        self.assertEqual(0, self.placer("rdt1").compaction_moves)


class TestSparseCache(PlacementBase):
    """amd-epyc (issue 38, cause 4): the kernel takes sparse masks, but
    libvirt makes an instance's group from its size on a contiguous free
    run only.  Free ways in pieces are no room for an instance: refused
    by the scheduler, saying why, not at start; with compaction a
    neighbour moves, and libvirt's allocator finds the run."""

    def _start(self):
        self.start_rdt_compute(
            "rdt1", profile="amd-epyc",
            host_info=fakelibvirt.HostInfo(cpu_nodes=4, cpu_sockets=1,
                                           cpu_cores=2, cpu_threads=1))

    def test_free_ways_in_pieces_are_refused_then_compaction_makes_a_run(
            self):
        self._start()
        servers = [self.boot(self.flavor(**{"rdt:l3_cache_ways": str(n)}))
                   for n in (2, 3, 3, 4, 2)]      # 2-3 4-6 7-9 10-13 14-15
        for s in (servers[0], servers[2]):
            self._delete_server(s)                # free: 2-3 and 7-9
        four = self.flavor(**{"rdt:l3_cache_ways": "4"})
        refused = self.boot(four, state="ERROR")
        self.assertIn("RDTFilter: no host can give this flavor's rdt: "
                      "request: L3 cache id 0: no room for 4 ways",
                      refused["fault"]["message"])
        # The compute's own claim says why, as the planner does.
        with self.assertRaises(placement.NoPlacement) as ctx:
            self.placer("rdt1").claim(
                "probe", "instance-probe",
                {"L3": {cid: 4 for cid in range(4)}}, dry_run=True)
        self.assertIn("5 ways free, but no contiguous run of 4: libvirt "
                      "allocates a contiguous run", str(ctx.exception))
        self.flags(compaction=True, group="rdt")
        self.restart_compute_service("rdt1")
        new = self.boot(four)
        mine = self.group_of("rdt1", new)
        self.assertEqual(self.decided(new), mine)
        others = [self.group_of("rdt1", s) for s in servers
                  if s not in (servers[0], servers[2])]
        self.assertEqual(1, self.placer("rdt1").compaction_moves)
        for cid, mask in mine.items():
            self.assertTrue(cbm.is_contiguous(mask), hex(mask))
            self.assertEqual(4, cbm.popcount(mask))
            for other in others:
                self.assertEqual(0, other[cid] & mask)


class TestEnforceFailure(PlacementBase):
    """The write of the decided masks fails (resctrl refuses, the compute
    dies there): the guest never runs on libvirt's choice, the build is
    rescheduled, and nothing stays reserved."""

    def test_a_failed_write_leaves_no_running_vm_and_no_reservation(self):
        self.start_rdt_compute("rdt1")
        flavor = self.flavor(**{"rdt:l3_cache_ways": "2"})
        with failpoints.armed({"driver.before_enforce": "raise"}):
            server = self.boot(flavor, state="ERROR")
        self.assertIn("Exhausted all hosts", server["fault"]["message"])
        self.assertNotIn(server["id"], self.placer("rdt1"))
        self.assertFalse([g for g in self.groups("rdt1")
                          if naming.is_libvirt_group(g)])
        # The next build gets the ways.
        self.boot(flavor)


class TestResctrlArrives(PlacementBase):
    """Case 12: a host started without resctrl picks RDT up within one
    periodic task of resctrl being mounted."""

    def test_rdt_is_offered_after_one_periodic(self):
        self.start_rdt_compute("rdt1")
        host = self.rdt_host("rdt1")
        emulator = host.emulator
        # Restart the compute while resctrl is not mounted.
        emulator.stop()
        self.flags(require_resctrl=False, group="rdt")
        self.restart_compute_service("rdt1")
        self._run_periodics()
        self.assertEqual("", self.stats("rdt1").get("rdt", ""))
        emulator.start()
        self._run_periodics()
        self.assertTrue(self.stats("rdt1")["rdt"])
        rp = self._get_provider_uuid_by_name("rdt1")
        self.assertIn("CUSTOM_RDT_L3_CAT", self._get_provider_traits(rp))
        server = self.boot(self.flavor(**{"rdt:l3_cache_ways": "2"}))
        self.assertEqual("rdt1", server["OS-EXT-SRV-ATTR:host"])


class TestLiveMigrationClaims(base.RdtMigrationTestBase, PlacementBase):
    """Case 11: every live migration is checked and reserved at the
    destination, with or without a NUMA topology; an aborted one frees
    its reservation at once."""

    def _setup(self, ways="4"):
        self.start_rdt_compute("rdt1")
        self.start_rdt_compute("rdt2")
        # No NUMA topology: Nova calls no post_claim_migrate_data.
        self.server = self.boot(self.flavor(**{"rdt:l3_cache_ways": ways}),
                                host="rdt1")
        self.src = self.computes["rdt1"]
        self.dest = self.computes["rdt2"]

    def _migration_cut_at(self, point):
        """A live migration of the server that fails at ``point``."""
        with failpoints.armed({point: "raise"}):
            self.api.post_server_action(self.server["id"], {
                "os-migrateLive": {"host": None, "block_migration": "auto"}})
            self._wait_for_migration_status(self.server, ["error",
                                                          "failed"])

    def test_a_plain_instance_is_reserved_at_the_destination(self):
        self._setup()
        self._live_migrate(self.server, "completed")
        self.assertIn(self.server["id"], self.placer("rdt2"))
        self.assertNotIn(self.server["id"], self.placer("rdt1"))

    def test_the_destinations_decision_travels_in_the_migration_xml(self):
        """The destination decides where the ways go when it reserves
        them; the source puts those masks in the XML it hands libvirt, so
        the destination's hook writes them before the guest runs there."""
        self._setup()
        # Something on rdt2 first, so its decision is not rdt1's.
        self.boot(self.flavor(**{"rdt:l3_cache_ways": "2"}), host="rdt2")
        self._live_migrate(self.server, "completed")
        decided = self.placer("rdt2").masks_of(self.server["id"])["L3"]
        meta = guest_rdt.read_metadata(
            self.domain_xml(self.server["id"], "rdt2"))
        self.assertEqual({(cid, "both"): m for cid, m in decided.items()},
                         meta.masks)
        self.assertEqual(2, len(meta.masks))
        for mask in meta.masks.values():
            self.assertEqual(4, bin(mask).count("1"))
        # Arrived: nothing is published as incoming any more.
        self.assertEqual("", self.stats("rdt2").get("rdt_incoming"))

    def test_a_migration_that_fails_on_the_source_frees_the_destination(
            self):
        """The source fails after the destination reserved (here while
        it rewrites the XML).  With a shared instance path Nova's source
        calls nothing on the destination for a plain instance: the
        destination sees the migration failed at its next resource
        update, not ten minutes later."""
        self._setup()
        self._migration_cut_at("migration.before_xml_rewrite")
        self._run_periodics()
        self.assertNotIn(self.server["id"], self.placer("rdt2"))
        self.assertEqual("", self.stats("rdt2").get("rdt_incoming"))
        server = self.api.get_server(self.server["id"])
        self.assertEqual("rdt1", server["OS-EXT-SRV-ATTR:host"])

    def test_a_full_destination_refuses_it(self):
        self._setup(ways="5")
        # Fill rdt2: 9 managed ways, a 5-way instance leaves 4.
        self.boot(self.flavor(**{"rdt:l3_cache_ways": "5"}), host="rdt2")
        # RDTFilter (from what rdt2 published at its last claim) or, when
        # the scheduler is passed, rdt2's own check refuses: the conductor
        # finds no host (Nova answers a live migration's NoValidHost with
        # an error).
        with self.assertRaises(client.OpenStackApiException) as ctx:
            self.api.post_server_action(self.server["id"], {
                "os-migrateLive": {"host": None,
                                   "block_migration": "auto"}})
        self.assertIn("NoValidHost", str(ctx.exception))
        server = self.api.get_server(self.server["id"])
        self.assertEqual("rdt1", server["OS-EXT-SRV-ATTR:host"])
        self.assertNotIn(self.server["id"], self.placer("rdt2"))

    def test_an_aborted_migration_frees_the_destination_at_once(self):
        self._setup()
        self._migration_cut_at("migration.dest_claim")
        # No periodic task, no grace period: released by the failure.
        self.assertNotIn(self.server["id"], self.placer("rdt2"))


class TestOneDecisionPerBuild(PlacementBase):
    """Issue 38: the claim is made once, before Nova builds the domain's
    config (the driver's ``_get_guest_xml``); building the config only
    renders what was decided."""

    def test_the_claim_precedes_the_config_which_decides_nothing(self):
        self.start_rdt_compute("rdt1")
        rdt = self.computes["rdt1"].driver.rdt
        claims, seen = [], []
        claim, extend = rdt.placer.claim, rdt.extend_guest

        def counted(uuid, *a, **kw):
            claims.append(uuid)
            return claim(uuid, *a, **kw)

        def spied(guest, instance):
            seen.append((instance.uuid in rdt.placer, len(claims)))
            extend(guest, instance)
            # Built again (nothing decided for it now): nothing is added,
            # nothing is claimed.
            again = vconfig.LibvirtConfigGuest()
            extend(again, instance)
            seen.append((again.metadata, len(claims)))

        rdt.placer.claim, rdt.extend_guest = counted, spied
        server = self.boot(self.flavor(**{"rdt:l3_cache_ways": "2"}))
        self.assertEqual([server["id"]], claims)
        self.assertEqual([(True, 1), ([], 1)], seen)
        self.assertEqual(self.decided(server), self.group_of("rdt1", server))
