"""Recovery inside real Nova: resctrl lost and back, crashes at the
driver's failpoints, and nova-compute's start after them.

fakelibvirt stands in for libvirtd and the FUSE emulator for resctrl, as
in test_rdt_nova.py; the emulator is killed (ENOTCONN on every access)
and a new one mounted at the same place, empty, as after a remount.
"""

import os
import shutil
import subprocess
import time
from unittest import mock

from nova import context as nova_context
from nova import objects
from nova.tests.functional.api import client
import pytest

from nova_rdt import failpoints
from nova_rdt.emulator import mount as emu_mount
from nova_rdt.host import records as records_mod
from nova_rdt.resctrl.schemata import Schemata
from tests.functional.nova import base
from tests.functional.nova.test_rdt_nova import RdtNovaTestBase

pytestmark = pytest.mark.fuse

RDT = {"rdt:l3_cache_ways": "2"}


def _fusermount_uz(path):
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    cmd = [tool, "-u", "-z", path] if tool else ["umount", "-l", path]
    subprocess.run(cmd, check=False, capture_output=True)


class RecoveryBase(RdtNovaTestBase):

    def setUp(self):
        super().setUp()
        failpoints.disarm()
        self.addCleanup(failpoints.disarm)

    def stats(self, hostname):
        ctxt = nova_context.get_admin_context()
        node = objects.ComputeNode.get_by_nodename(ctxt, hostname)
        return node.stats

    def kill_resctrl(self, hostname):
        emu = self.rdt_host(hostname).emulator
        emu.proc.kill()
        emu.proc.wait()
        # A dead FUSE server's mount is not os.path.ismount(): unmount it
        # here, whatever happens next.
        self.addCleanup(_fusermount_uz, emu.mountpoint)

    def remount_resctrl(self, hostname):
        """A new, empty resctrl at the same place (after a remount)."""
        host = self.rdt_host(hostname)
        _fusermount_uz(host.emulator.mountpoint)
        emu = emu_mount.Emulator(
            host.profile.name, mountpoint=host.emulator.mountpoint,
            state_dir=host.emulator.state_dir + "-again")
        self._rdt_emulators.append(emu)
        emu.start()
        return emu

    def degraded_lines(self, reason):
        return [ln for ln in self.stdlog.logger.output.splitlines()
                if f"nova-rdt degraded ({reason})" in ln]


class TestResctrlLost(RecoveryBase):

    def test_no_rdt_placed_while_resctrl_is_gone_then_back(self):
        self.start_rdt_compute("rdt1")
        flavor = self.flavor(**RDT)
        self.boot(flavor)
        self.assertTrue(self.stats("rdt1")["rdt"])
        rp = self._get_provider_uuid_by_name("rdt1")
        self.assertIn("CUSTOM_RDT_L3_CAT", self._get_provider_traits(rp))

        self.kill_resctrl("rdt1")
        self._run_periodics()
        self._run_periodics()
        stats = self.stats("rdt1")
        # Published as "no RDT", with the reason, and said once.
        self.assertEqual("", stats["rdt"])
        self.assertEqual("resctrl_unavailable", stats["rdt_degraded"])
        self.assertEqual(1, len(self.degraded_lines("resctrl_unavailable")))
        self.assertNotIn("CUSTOM_RDT_L3_CAT", self._get_provider_traits(rp))
        # RDTFilter refuses the host for an RDT flavor; a plain one still
        # lands there.
        self.boot(flavor, state="ERROR")
        plain = self.boot(self.flavor())
        self.assertEqual("rdt1", plain["OS-EXT-SRV-ATTR:host"])

        self.remount_resctrl("rdt1")
        self._run_periodics()
        stats = self.stats("rdt1")
        self.assertTrue(stats["rdt"])
        self.assertEqual("", stats["rdt_degraded"])
        # Prepared anew: the root has only the host's ways again.
        root = Schemata.parse(self.resctrl("rdt1", "schemata"))
        self.assertEqual({0: 0x3, 1: 0x3}, root.lines["L3"])
        self.assertIn("CUSTOM_RDT_L3_CAT", self._get_provider_traits(rp))
        server = self.boot(flavor)
        self.assertEqual("rdt1", server["OS-EXT-SRV-ATTR:host"])

    def test_restart_with_resctrl_lost_reports_what_it_cannot_redo(self):
        self.start_rdt_compute("rdt1")
        host = self.rdt_host("rdt1")
        sleeper = subprocess.Popen(["sleep", "600"])
        self.addCleanup(sleeper.wait)
        self.addCleanup(sleeper.kill)
        group = "qemu-3-instance-00000009-vcpus_0"
        # A running domain whose libvirt group resctrl lost: the record
        # has its schemata, but nova-compute's privsep may not make a
        # libvirt group; `nova-rdt reconcile` (root) can.
        records_mod.Records(host.state_path).put(records_mod.Record(
            uuid="b5f3a3a4-0f2c-4f55-9d55-6a6f0f9f0003",
            name="instance-00000009", pid=sleeper.pid,
            pid_start=None, pmd_share=False, rdt_class=None, group=group,
            schemata="L3:0=c;1=c\n", tasks=(sleeper.pid,)))
        self.restart_compute_service("rdt1")
        self.assertNotIn(group, os.listdir(host.resctrl_root))
        lines = self.degraded_lines("group_not_restored")
        self.assertEqual(1, len(lines))
        self.assertIn("instance-00000009", lines[0])
        # The host still serves: it was prepared and publishes its state.
        self.assertTrue(self.stats("rdt1")["rdt"])


class TestDriverFailpoints(RecoveryBase):

    def _claims(self, hostname):
        return self.computes[hostname].driver.rdt.reserved()

    def test_spawn_cut_after_the_claim_releases_it(self):
        self.start_rdt_compute("rdt1")
        flavor = self.flavor(**RDT)
        for point in ("driver.after_claim", "driver.after_define"):
            with failpoints.armed({point: "raise"}):
                self.boot(flavor, state="ERROR")
            self.assertEqual(0, len(self._claims("rdt1")), point)
        # Nothing left behind blocks the ways: seven managed ways take
        # three 2-way instances.
        for _ in range(3):
            self.boot(flavor)

    def test_compute_restart_after_a_cut_spawn_converges(self):
        self.start_rdt_compute("rdt1")
        flavor = self.flavor(**RDT)
        server = self.boot(flavor)
        with failpoints.armed({"driver.after_define": "raise"}):
            self.boot(flavor, state="ERROR")
        self.restart_compute_service("rdt1")
        # Only the running instance's reservation, rebuilt from its domain.
        self.assertEqual({server["id"]}, self._claims("rdt1"))
        self.assertEqual([], self.degraded_lines(""))
        self._wait_for_state_change(server, "ACTIVE")
        self.assertTrue(self.stats("rdt1")["rdt"])


class TestMigrationFailpoints(base.RdtMigrationTestBase, RecoveryBase):

    def _setup(self):
        self.flags(group="rdt", pmd_cos=True, pmd_shared_ways=2)
        # Pinned: Nova makes a destination claim (and so calls
        # post_claim_migrate_data) only for an instance with a NUMA
        # topology.
        self.flags(cpu_dedicated_set="0-7", cpu_shared_set=None,
                   group="compute")
        self.start_rdt_compute("rdt1")
        self.start_rdt_compute("rdt2")
        # Every managed way (2-8): next to the PMD base (9-10), so the
        # PMD COS can share them, on either host.
        self.server = self.boot(self.flavor(vcpu=4, **{
            "hw:cpu_policy": "dedicated", "rdt:l3_cache_ways": "7",
            "rdt:pmd_share": "true"}), host="rdt1")
        self.src = self.computes["rdt1"]
        self.dest = self.computes["rdt2"]

    def test_destination_claim_carries_the_pmd_share(self):
        self._setup()
        placer = self.dest.driver.rdt.placer
        claimed = []
        real = placer.claim

        def spy(uuid, domain, ways, pmd_share=False, dry_run=False, **kw):
            if not dry_run:
                claimed.append((uuid, pmd_share))
            return real(uuid, domain, ways, pmd_share=pmd_share,
                        dry_run=dry_run, **kw)

        with mock.patch.object(placer, "claim", side_effect=spy):
            self._live_migrate(self.server, "completed")
        # The same claim as a spawn's: a sharer arriving counts in the
        # PMD COS (it did not before: pmd_share was left out).
        self.assertEqual([(self.server["id"], True)], claimed)

    def _cut_rewrite(self, point):
        self._setup()
        self._cut(point)
        # The destination's claim is released by Nova's rollback (a cast:
        # waited for); the instance is still on the source.
        self._wait_for_no_claims(self.dest, point)
        server = self.api.get_server(self.server["id"])
        self.assertEqual("rdt1", server["OS-EXT-SRV-ATTR:host"])
        self._live_migrate(self.server, "completed")

    def test_cut_before_the_xml_rewrite_rolls_back(self):
        self._cut_rewrite("migration.before_xml_rewrite")

    def test_cut_after_the_xml_rewrite_rolls_back(self):
        self._cut_rewrite("migration.after_xml_rewrite")

    def test_cut_at_the_destination_claim_rolls_back(self):
        self._setup()
        self._cut("migration.dest_claim")
        self._wait_for_no_claims(self.dest, "migration.dest_claim")
        self._live_migrate(self.server, "completed")

    def _wait_for_no_claims(self, compute, why):
        for _ in range(100):
            if not compute.driver.rdt.reserved():
                return
            time.sleep(0.1)
        self.fail(f"{why}: claims left: "
                  f"{sorted(compute.driver.rdt.reserved())}")

    def _cut(self, point):
        """A live migration cut at ``point``; the instance is put back to
        ACTIVE if Nova left it in ERROR (as an operator would)."""
        with failpoints.armed({point: "raise"}):
            try:
                self.api.post_server_action(self.server["id"], {
                    "os-migrateLive": {"host": None,
                                       "block_migration": "auto"}})
            except client.OpenStackApiException:
                # Cut in the conductor's synchronous pre-checks: Nova
                # answers an unexpected error with a 500.
                pass
            else:
                self._wait_for_migration_status(self.server, ["error",
                                                              "failed"])
        server = self.api.get_server(self.server["id"])
        if server["status"] != "ACTIVE":
            self.api.post_server_action(
                server["id"], {"os-resetState": {"state": "active"}})
            self._wait_for_state_change(server, "ACTIVE")
        return self.api.get_server(self.server["id"])

    def test_cut_before_the_source_release_is_dropped_on_restart(self):
        self._setup()
        self._cut("migration.source_release")
        # Whatever the source kept, a restart reserves nothing for the
        # instance that left.
        self.restart_compute_service("rdt1")
        self.assertNotIn(self.server["id"],
                         self.computes["rdt1"].driver.rdt.reserved())
