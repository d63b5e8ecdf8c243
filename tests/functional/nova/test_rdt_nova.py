"""nova-rdt inside real Nova: API, conductor, scheduler, compute, placement.

fakelibvirt stands in for libvirtd (what libvirt really does with the XML
is the Host lab's job); resctrl is the FUSE-mounted emulator of each host.
"""

import os
import re
import subprocess
import tempfile
import time
from unittest import mock

from lxml import etree
from nova.tests.functional.api import client
import pytest

from nova_rdt.host import procinfo
from nova_rdt.host import records as records_mod
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.virt import config as rdt_config
from tests.functional.nova import base
from tests.functional.nova import nova_api_paste_ini

pytestmark = pytest.mark.fuse

NS = {"r": rdt_config.NOVA_RDT_NS}
WAY_KIB = 3328                       # gold-6252: 36608 KiB / 11 ways


def _paste_ini_with_flavor_check() -> str:
    """Nova's api-paste.ini with rdt_flavor_check before the app."""
    src = nova_api_paste_ini()
    with open(src) as f:
        text = f.read()
    text = re.sub(r"(\s)osapi_compute_app_v21\b",
                  r"\1rdt_flavor_check osapi_compute_app_v21", text)
    text += ("\n[filter:rdt_flavor_check]\npaste.filter_factory = "
             "nova_rdt.api.flavor_check:filter_factory\n")
    fd, path = tempfile.mkstemp(prefix="nova-rdt-api-paste-", suffix=".ini")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


class RdtNovaTestBase(base.RdtServersTestBase):
    COMPUTE_DRIVER = "rdt.LibvirtRDTDriver"
    ADDITIONAL_FILTERS = ["NUMATopologyFilter", "RDTFilter"]
    API_PASTE_CONFIG = _paste_ini_with_flavor_check()

    def _setup_scheduler_service(self):
        self.flags(available_filters=[
            "nova.scheduler.filters.all_filters",
            "nova_rdt.scheduler.filter.RDTFilter"], group="filter_scheduler")
        return super()._setup_scheduler_service()

    # -- helpers --------------------------------------------------------

    def start_plain(self, hostname):
        """A host without resctrl, running the same driver."""
        self.flags(resctrl_root=os.path.join(self._rdt_tmp, "no-resctrl"),
                   require_resctrl=False, group="rdt")
        return self.start_compute(hostname)

    def flavor(self, vcpu=2, **specs):
        return self._create_flavor(vcpu=vcpu, memory_mb=512,
                                   extra_spec=specs)

    def boot(self, flavor, state="ACTIVE", **kw):
        return self._create_server(flavor_id=flavor, networks="none",
                                   expected_state=state, **kw)

    def tunes(self, server_id, hostname=None):
        dom = etree.fromstring(self.domain_xml(server_id, hostname).encode())
        return dom

    def caches(self, dom):
        return sorted((c.get("id"), c.get("type"), c.get("size"),
                       c.get("unit"))
                      for c in dom.findall("cputune/cachetune/cache"))

    def resctrl(self, hostname, *path):
        with open(os.path.join(self.rdt_host(hostname).resctrl_root,
                               *path)) as f:
            return f.read()


class TestBootAndFilter(RdtNovaTestBase):

    def test_boot_lands_on_the_rdt_host_with_valid_elements(self):
        self.start_plain("plain1")
        self.start_rdt_compute("rdt1")
        self.start_plain("plain2")
        # Host preparation shrank the root group to the reserved ways.
        # Parsed: kernels before 6.15 pad the mask ("003"), later ones not.
        root = Schemata.parse(self.resctrl("rdt1", "schemata"))
        self.assertEqual({0: 0x3, 1: 0x3}, root.lines["L3"])

        flavor = self.flavor(**{"rdt:l3_cache_ways": "2",
                                "rdt:mb_percent": "50",
                                "rdt:monitor": "true"})
        server = self.boot(flavor)
        self.assertEqual("rdt1", server["OS-EXT-SRV-ATTR:host"])
        xml = self.domain_xml(server["id"])
        self.relaxng_validate(xml)
        dom = etree.fromstring(xml.encode())
        ct = dom.find("cputune/cachetune")
        self.assertEqual("0-1", ct.get("vcpus"))
        self.assertEqual([("0", "both", str(2 * WAY_KIB), "KiB"),
                          ("1", "both", str(2 * WAY_KIB), "KiB")],
                         self.caches(dom))
        self.assertEqual(
            {"level": "3", "vcpus": "0-1"},
            dict(dom.find("cputune/cachetune/monitor").attrib))
        self.assertEqual(
            [("0", "50"), ("1", "50")],
            [(n.get("id"), n.get("bandwidth"))
             for n in dom.findall("cputune/memorytune/node")])
        meta = dom.find("metadata/r:instance", NS)
        self.assertEqual("0-1", meta.find("r:vcpus", NS).text)

        # Placement traits: the RDT host has them, plain hosts do not.
        traits = self._get_provider_traits(
            self._get_provider_uuid_by_name("rdt1"))
        for t in ("CUSTOM_RDT_L3_CAT", "CUSTOM_RDT_MBA", "CUSTOM_RDT_CMT",
                  "CUSTOM_RDT_MBM"):
            self.assertIn(t, traits)
        self.assertNotIn("CUSTOM_RDT_L3_CAT", self._get_provider_traits(
            self._get_provider_uuid_by_name("plain1")))

        # Hard reboot rebuilds the domain: the elements are still there.
        before = len(self.defined_xmls("rdt1", server["id"]))
        self._reboot_server(server, hard=True)
        self.assertGreater(len(self.defined_xmls("rdt1", server["id"])),
                           before)
        self.assertEqual(self.caches(dom),
                         self.caches(self.tunes(server["id"])))

        # A flavor without rdt: keys gets no RDT elements at all.
        plain = self.boot(self.flavor(), host="plain1")
        pdom = self.tunes(plain["id"])
        self.assertIsNone(pdom.find("cputune/cachetune"))

    def test_fragmented_free_ways_give_no_valid_host(self):
        self.start_rdt_compute("rdt1")
        root = self.rdt_host("rdt1").resctrl_root
        # Another tool's groups hold ways 4, 7 and 10 on both sockets:
        # 6 ways are free, but in runs of 2.
        for i, bit in enumerate((4, 7, 10)):
            d = os.path.join(root, f"pqos-{i}")
            os.mkdir(d)
            with open(os.path.join(d, "schemata"), "w") as f:
                f.write(f"L3:0={1 << bit:x};1={1 << bit:x}\n")
        self._run_periodics()
        server = self.boot(self.flavor(**{"rdt:l3_cache_ways": "3"}),
                           state="ERROR")
        # nova-rdt's reason is in the fault the tenant reads, with no
        # host name in it (Nova's own text says only "not enough hosts").
        message = server["fault"]["message"]
        self.assertIn("No valid host", message)
        self.assertIn("RDTFilter: no host can give this flavor's rdt: "
                      "request: L3 cache id 0: no room for 3 ways", message)
        # No host name, and not where the other tenants' ways are.
        self.assertNotIn("rdt1", message)
        self.assertNotIn("free runs", message)
        self.boot(self.flavor(**{"rdt:l3_cache_ways": "2"}))

    def test_bad_specs_get_400_naming_the_key_and_change_nothing(self):
        flavor = self.flavor(vcpu=2, **{"rdt:l3_cache_ways": "2"})
        cases = [
            ({"rdt:l3_cache_ways": "lots"}, "rdt:l3_cache_ways"),
            ({"rdt:l3_code_ways": "1", "rdt:l3_data_ways": "1"},
             "rdt:l3_code_ways"),
            ({"rdt:vcpus": "0-5"}, "rdt:vcpus"),
            ({"rdt:mb_percent": "101"}, "rdt:mb_percent"),
            ({"rdt:mb_percent": "0"}, "rdt:mb_percent"),
            ({"rdt:class": "$(reboot)"}, "rdt:class"),
        ]
        for specs, key in cases:
            exc = self.assertRaises(
                client.OpenStackApiException,
                self.admin_api.post_extra_spec, flavor,
                {"extra_specs": specs})
            self.assertEqual(400, exc.response.status_code, specs)
            self.assertIn(key, exc.response.text)
        self.assertEqual({"rdt:l3_cache_ways": "2"},
                         self.admin_api.get_flavor(flavor)["extra_specs"])


class TestPinned(RdtNovaTestBase):

    def test_pinned_instances_get_the_l3_of_their_socket(self):
        self.flags(cpu_dedicated_set="0-7", cpu_shared_set=None,
                   group="compute")
        self.start_rdt_compute("rdt1")
        flavor = self.flavor(vcpu=2, **{"hw:cpu_policy": "dedicated",
                                        "rdt:l3_cache_ways": "2"})
        seen = {}
        for _ in range(4):                  # 2 per 4-core socket
            server = self.boot(flavor)
            dom = self.tunes(server["id"])
            pins = {int(p.get("cpuset")) for p in
                    dom.findall("cputune/vcpupin")}
            self.assertEqual(2, len(pins))           # Nova's pins kept
            self.assertIsNotNone(dom.find("cputune/emulatorpin"))
            socket = {p // 4 for p in pins}
            self.assertEqual(1, len(socket))
            ids = {c[0] for c in self.caches(dom)}
            self.assertEqual({str(socket.pop())}, ids)
            seen[server["id"]] = ids
            self.relaxng_validate(self.domain_xml(server["id"]))
        self.assertEqual({"0", "1"}, set().union(*seen.values()))


class TestParallel(RdtNovaTestBase):

    def test_parallel_boots_never_overlap_or_overrun(self):
        self.start_rdt_compute("rdt1")
        flavor = self.flavor(**{"rdt:l3_cache_ways": "4"})
        # 9 free ways per socket: two 4-way instances fit, a third cannot.
        # One request for three, forced past the filters (which would
        # refuse the third, and so the whole request): all three reach
        # the host and build in parallel.
        body = self._build_server(flavor_id=flavor, networks="none")
        body["min_count"] = body["max_count"] = 3
        body["availability_zone"] = "nova:rdt1"
        self.api.post_server({"server": body})
        settled = [self._wait_until_settled(s) for s in
                   self.api.get_servers()]
        active = [s for s in settled if s["status"] == "ACTIVE"]
        failed = [s for s in settled if s["status"] == "ERROR"]
        self.assertEqual((2, 1), (len(active), len(failed)))
        # The compute refused it before defining a domain (a forced host
        # has no alternates to reschedule to).
        self.assertIn("no room for 4 ways", failed[0]["fault"]["message"])
        self.assertIn("nova-rdt: L3 cache id 0: no room for 4 ways",
                      self.stdlog.logger.output)
        st = self.computes["rdt1"].driver.rdt.host_state()
        for cid in (0, 1):
            # root 0x3 + two disjoint 4-way runs: 0x3c and 0x3c0.
            self.assertEqual(0x3ff, st.cache[cid].used["both"])
        self.assertEqual(5, st.clos_free)
        # The failed build left no domain behind.
        self.assertEqual([], self.defined_xmls("rdt1", failed[0]["id"]))

    def _wait_until_settled(self, server):
        for _ in range(400):
            s = self.api.get_server(server["id"])
            if s["status"] in ("ACTIVE", "ERROR"):
                return s
            time.sleep(0.05)
        self.fail(f"{server['id']} never settled")


class TestMoves(base.RdtMigrationTestBase, RdtNovaTestBase):

    def test_resize_to_another_host_keeps_and_resizes_the_elements(self):
        self.start_rdt_compute("rdt1")
        self.start_rdt_compute("rdt2")
        small = self.flavor(**{"rdt:l3_cache_ways": "2"})
        big = self.flavor(**{"rdt:l3_cache_ways": "3"})
        server = self.boot(small)
        src = server["OS-EXT-SRV-ATTR:host"]
        # fakelibvirt has no disks to move (as in Nova's own NUMA tests).
        with mock.patch("nova.virt.libvirt.driver.LibvirtDriver"
                        ".migrate_disk_and_power_off", return_value="{}"):
            server = self._resize_server(server, big)
        dst = server["OS-EXT-SRV-ATTR:host"]
        self.assertNotEqual(src, dst)
        self.assertEqual(
            [("0", "both", str(3 * WAY_KIB), "KiB"),
             ("1", "both", str(3 * WAY_KIB), "KiB")],
            self.caches(self.tunes(server["id"], dst)))
        self._confirm_resize(server)

    def test_live_migration_rewrites_cache_ids_for_the_destination(self):
        self.flags(cpu_dedicated_set="0-7", cpu_shared_set=None,
                   group="compute")
        self.start_rdt_compute("rdt1")
        self.start_rdt_compute("rdt2")
        flavor = self.flavor(vcpu=4, **{"hw:cpu_policy": "dedicated",
                                        "rdt:l3_cache_ways": "2"})
        # rdt2's socket 0 is taken, so the migrant must use socket 1 there.
        filler = self.boot(flavor, host="rdt2")
        self.assertEqual({"0"}, {c[0] for c in
                                 self.caches(self.tunes(filler["id"]))})
        self.server = self.boot(flavor, host="rdt1")
        self.assertEqual({"0"}, {c[0] for c in self.caches(
            self.tunes(self.server["id"], "rdt1"))})
        self.src = self.computes["rdt1"]
        self.dest = self.computes["rdt2"]
        self._live_migrate(self.server, "completed")
        self.assertTrue(self.migrate_stub_ran)
        xml = self.domain_xml(self.server["id"], "rdt2")
        dom = etree.fromstring(xml.encode())
        self.assertEqual([("1", "both", str(2 * WAY_KIB), "KiB")],
                         self.caches(dom))
        pins = {int(p.get("cpuset")) for p in dom.findall("cputune/vcpupin")}
        self.assertEqual({4, 5, 6, 7}, pins)
        meta = dom.find("metadata/r:instance", NS)
        self.assertEqual([("1", "both", "2")],
                         [(c.get("id"), c.get("type"), c.get("ways"))
                          for c in meta.findall("r:cache", NS)])
        # The migration XML starts from fakelibvirt's XMLDesc, which drops
        # <cpu><numa>, so the document as a whole is not schema-valid; its
        # rewritten <cputune> is checked inside the spawn-time document.
        spawn = etree.fromstring(
            self.defined_xmls("rdt1", self.server["id"])[0].encode())
        spawn.replace(spawn.find("cputune"), dom.find("cputune"))
        self.relaxng_validate(etree.tostring(spawn))


class TestEvacuate(RdtNovaTestBase):

    def test_evacuate_rebuilds_the_elements_on_the_new_host(self):
        self.start_rdt_compute("rdt1")
        server = self.boot(self.flavor(**{"rdt:l3_cache_ways": "2",
                                          "rdt:vcpus": "1"}), host="rdt1")
        self.start_rdt_compute("rdt2")
        self.computes["rdt1"].stop()
        svc = self.admin_api.get_services(host="rdt1",
                                          binary="nova-compute")[0]
        self.admin_api.put_service(svc["id"], {"forced_down": True})
        # Since 2.95 an evacuated instance arrives stopped, but its domain
        # is built (and defined) on the new host all the same.
        server = self._evacuate_server(server, expected_host="rdt2",
                                       expected_state="SHUTOFF")
        dom = self.tunes(server["id"], "rdt2")
        self.assertEqual("1", dom.find("cputune/cachetune").get("vcpus"))
        self.assertEqual([("0", "both", str(2 * WAY_KIB), "KiB"),
                          ("1", "both", str(2 * WAY_KIB), "KiB")],
                         self.caches(dom))
        self.relaxng_validate(self.domain_xml(server["id"], "rdt2"))


class TestComputeStartReconciles(RdtNovaTestBase):
    """init_host prepares the host, then reconciles what the hook left."""

    def _dead_pid(self):
        proc = subprocess.Popen(["sleep", "30"])
        start = procinfo.proc_start_time(proc.pid)
        proc.kill()
        proc.wait()
        return proc.pid, start

    def test_restart_removes_orphans_and_resyncs_the_pmd_cos(self):
        self.flags(group="rdt", pmd_cos=True, pmd_shared_ways=2,
                   classes=["low_priority:l3_ways=1,mb=10"])
        self.start_rdt_compute("rdt1")
        host = self.rdt_host("rdt1")
        root = host.resctrl_root
        pmd_before = self.resctrl("rdt1", "nova-rdt-pmd", "schemata")

        # What a crash leaves: a class group and a libvirt group whose
        # QEMUs died with no release hook, next to groups not ours.
        for g in ("nova-rdt-class-low_priority", "qemu-7-dead-vcpus_0",
                  "qemu-8-foreign-vcpus_0", "COS1"):
            os.mkdir(os.path.join(root, g))
        records = records_mod.Records(host.state_path)
        pid, start = self._dead_pid()
        dead = {"b5f3a3a4-0f2c-4f55-9d55-6a6f0f9f0001":
                ("dead", None, "qemu-7-dead-vcpus_0"),
                "b5f3a3a4-0f2c-4f55-9d55-6a6f0f9f0002":
                ("dead-class", "low_priority", None)}
        for uuid, (name, cls, group) in dead.items():
            records.put(records_mod.Record(
                uuid=uuid, name=name, pid=pid, pid_start=start,
                pmd_share=True, rdt_class=cls, group=group))
        # And a PMD mask someone changed by hand.
        with open(os.path.join(root, "nova-rdt-pmd", "schemata"), "w") as f:
            f.write("L3:0=1;1=1\n")

        self.restart_compute_service("rdt1")

        left = set(os.listdir(root))
        self.assertNotIn("nova-rdt-class-low_priority", left)
        self.assertNotIn("qemu-7-dead-vcpus_0", left)
        self.assertIn("qemu-8-foreign-vcpus_0", left)
        self.assertIn("COS1", left)
        self.assertEqual(([], []), records.all())
        self.assertEqual(pmd_before,
                         self.resctrl("rdt1", "nova-rdt-pmd", "schemata"))
        self.assertNotIn("L3:0=1;1=1", pmd_before)
