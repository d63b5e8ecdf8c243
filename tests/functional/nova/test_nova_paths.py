"""Every Nova path that builds or restores a domain, with nova-rdt's driver.

Rebuild (same host), shelve-offload then unshelve, rescue and unrescue,
cold migration, and a compute restart with
``resume_guests_state_on_host_boot``, each in Nova's own functional
framework.  Each checks the RDT elements of the domain XML Nova handed to
libvirt, and that the driver's claims (ways promised to domains libvirt
has not allocated yet) and the resctrl groups neither leak nor double.

fakelibvirt never creates resctrl groups, so every running instance here
is a pending claim: the claims *are* the allocation, which makes a leaked
or doubled claim visible in the host state the driver publishes.
"""

import os
from unittest import mock
import uuid as uuid_mod

from lxml import etree
from nova import conf as nova_conf
from nova.tests.fixtures import libvirt as fakelibvirt
import pytest

from nova_rdt.host import procinfo
from nova_rdt.host import records as records_mod
from nova_rdt.virt import config as rdt_config
from tests.functional.nova import base
from tests.functional.nova.test_rdt_nova import WAY_KIB
from tests.functional.nova.test_rdt_nova import RdtNovaTestBase

pytestmark = pytest.mark.fuse
CONF = nova_conf.CONF

NS = {"r": rdt_config.NOVA_RDT_NS}
ROOT = 0x003                 # reserved_host_ways=2 on gold-6252 (11 ways)
IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"   # Nova's fake image
RDT_TAGS = ("cachetune", "memorytune")


def _graft_rdt(xml: str, defined: str) -> str:
    """``xml`` with the RDT parts of ``defined`` put back, as real libvirt's
    XMLDesc keeps them (fakelibvirt drops them)."""
    dom = etree.fromstring(xml.encode())
    src = etree.fromstring(defined.encode())
    parts = [e for e in src.findall("cputune/*") if e.tag in RDT_TAGS]
    if parts:
        cputune = dom.find("cputune")
        if cputune is None:
            cputune = etree.SubElement(dom, "cputune")
        for e in parts:
            cputune.append(e)
    meta = src.find("metadata/r:instance", NS)
    if meta is not None:
        md = dom.find("metadata")
        if md is None:
            md = etree.SubElement(dom, "metadata")
        md.append(meta)
    return etree.tostring(dom, encoding="unicode")


class PathsTestBase(RdtNovaTestBase):
    pmd_base = 0               # ways the PMD group holds without sharing

    def setUp(self):
        super().setUp()
        orig_init = fakelibvirt.Domain.__init__
        orig_desc = fakelibvirt.Domain.XMLDesc

        def init(dom, connection, xml, *a, **kw):
            orig_init(dom, connection, xml, *a, **kw)
            dom._rdt_defined = xml

        def desc(dom, flags):
            return _graft_rdt(orig_desc(dom, flags), dom._rdt_defined)

        self.useFixture(fixtures_patch(fakelibvirt.Domain, "__init__", init))
        self.useFixture(fixtures_patch(fakelibvirt.Domain, "XMLDesc", desc))

    # -- what to check after each path ------------------------------------

    def claims(self, hostname):
        return self.computes[hostname].driver.rdt.reserved()

    def used(self, hostname):
        """L3 ways the driver counts as taken on each cache id."""
        state = self.computes[hostname].driver.rdt.host_state()
        return {cid: c.used["both"] for cid, c in state.cache.items()}

    def groups(self, hostname):
        root = self.rdt_host(hostname).resctrl_root
        return sorted(n for n in os.listdir(root)
                      if os.path.isdir(os.path.join(root, n))
                      and n not in ("info", "mon_groups", "mon_data"))

    def assert_holds(self, hostname, server_ids, ways_each=2):
        """Exactly ``server_ids`` hold claims on ``hostname``, each once."""
        self.assertEqual(sorted(server_ids), sorted(self.claims(hostname)))
        n = ways_each * len(server_ids)
        want = ROOT | self.pmd_base | (((1 << n) - 1) << 2)
        self.assertEqual({0: want, 1: want}, self.used(hostname))

    def assert_elements(self, xml, ways=2, vcpus="0-1"):
        dom = etree.fromstring(xml.encode())
        ct = dom.find("cputune/cachetune")
        self.assertIsNotNone(ct, xml)
        self.assertEqual(vcpus, ct.get("vcpus"))
        self.assertEqual(
            [("0", "both", str(ways * WAY_KIB), "KiB"),
             ("1", "both", str(ways * WAY_KIB), "KiB")],
            self.caches(dom))
        meta = dom.find("metadata/r:instance", NS)
        self.assertIsNotNone(meta, xml)
        self.assertEqual([("0", "both", str(ways)), ("1", "both", str(ways))],
                         [(c.get("id"), c.get("type"), c.get("ways"))
                          for c in meta.findall("r:cache", NS)])

    def rdt_flavor(self, ways=2):
        return self.flavor(**{"rdt:l3_cache_ways": str(ways)})


def fixtures_patch(obj, name, value):
    import fixtures
    return fixtures.MonkeyPatch(
        f"{obj.__module__}.{obj.__qualname__}.{name}", value)


class TestRebuild(PathsTestBase):

    def test_rebuild_same_host_replans_without_doubling(self):
        self.start_rdt_compute("rdt1")
        groups = self.groups("rdt1")
        other = self.boot(self.rdt_flavor())
        server = self.boot(self.rdt_flavor())
        self.assert_holds("rdt1", [other["id"], server["id"]])
        before = len(self.defined_xmls("rdt1", server["id"]))
        server = self._rebuild_server(server, IMAGE)
        self.assertEqual("rdt1", server["OS-EXT-SRV-ATTR:host"])
        xmls = self.defined_xmls("rdt1", server["id"])
        self.assertGreater(len(xmls), before)       # the domain was rebuilt
        self.assert_elements(xmls[-1])
        self.relaxng_validate(xmls[-1])
        # The rebuild replaced its own claim: still two VMs' ways.
        self.assert_holds("rdt1", [other["id"], server["id"]])
        self._delete_server(server)
        self._delete_server(other)
        self.assert_holds("rdt1", [])
        self.assertEqual(groups, self.groups("rdt1"))


class TestShelve(PathsTestBase):

    def test_offload_releases_and_unshelve_replans(self):
        self.flags(shelved_offload_time=-1)
        self.start_rdt_compute("rdt1")
        server = self.boot(self.rdt_flavor())
        self.assert_holds("rdt1", [server["id"]])
        self._shelve_server(server, "SHELVED")
        self._shelve_offload_server(server)
        # Offloaded: the domain is gone, so is its claim.
        self.assert_holds("rdt1", [])
        # Another VM takes the first ways meanwhile.
        taker = self.boot(self.rdt_flavor())
        self.assert_holds("rdt1", [taker["id"]])
        before = len(self.defined_xmls("rdt1", server["id"]))
        server = self._unshelve_server(server)
        self.assertEqual("rdt1", server["OS-EXT-SRV-ATTR:host"])
        xmls = self.defined_xmls("rdt1", server["id"])
        self.assertGreater(len(xmls), before)
        self.assert_elements(xmls[-1])
        self.assert_holds("rdt1", [taker["id"], server["id"]])
        for s in (server, taker):
            self._delete_server(s)
        self.assert_holds("rdt1", [])


class TestRescue(PathsTestBase):

    def test_rescue_and_unrescue_keep_the_elements_and_one_claim(self):
        self.start_rdt_compute("rdt1")
        server = self.boot(self.rdt_flavor())
        first = self.domain_xml(server["id"])
        # Nova keeps unrescue.xml in the instance directory, which the
        # faked image backend never made.
        os.makedirs(os.path.join(CONF.instances_path, server["id"]),
                    exist_ok=True)
        server = self._rescue_server(server)
        rescue = self.domain_xml(server["id"])
        self.assertNotEqual(first, rescue)          # the rescue domain
        self.assert_elements(rescue)
        self.assert_holds("rdt1", [server["id"]])
        server = self._unrescue_server(server)
        # unrescue restores the saved domain: libvirt's XMLDesc of the
        # original, RDT elements included.
        self.assert_elements(self.domain_xml(server["id"]))
        self.assert_holds("rdt1", [server["id"]])
        self._delete_server(server)
        self.assert_holds("rdt1", [])


class TestColdMigrate(base.RdtMigrationTestBase, PathsTestBase):

    def test_cold_migrate_plans_on_the_destination_and_frees_the_source(self):
        self.start_rdt_compute("rdt1")
        self.start_rdt_compute("rdt2")
        server = self.boot(self.rdt_flavor(), host="rdt1")
        # rdt2's lowest ways are taken: the migrant must be planned there.
        filler = self.boot(self.rdt_flavor(3), host="rdt2")
        src_driver = self.computes["rdt1"].driver

        def power_off_only(context, instance, *args, **kwargs):
            # fakelibvirt has no disks to move (as in Nova's own NUMA
            # tests); the source domain stops as the real method stops it.
            src_driver._destroy(instance)
            return "{}"
        with mock.patch("nova.virt.libvirt.driver.LibvirtDriver"
                        ".migrate_disk_and_power_off",
                        side_effect=power_off_only):
            server = self._migrate_server(server)
        self.assertEqual("rdt2", server["OS-EXT-SRV-ATTR:host"])
        self.assert_elements(self.domain_xml(server["id"], "rdt2"))
        self.assertEqual(sorted([filler["id"], server["id"]]),
                         sorted(self.claims("rdt2")))
        self.assertEqual({0: 0x7f, 1: 0x7f}, self.used("rdt2"))   # 3 + 2
        server = self._confirm_resize(server)
        self.assert_holds("rdt1", [])
        self.assertEqual(sorted([filler["id"], server["id"]]),
                         sorted(self.claims("rdt2")))
        for s in (server, filler):
            self._delete_server(s)
        self.assert_holds("rdt2", [])


class TestResumeOnHostBoot(PathsTestBase):

    def test_restart_resumes_guests_with_their_elements(self):
        self.flags(resume_guests_state_on_host_boot=True)
        self.start_rdt_compute("rdt1")
        server = self.boot(self.rdt_flavor())
        other = self.boot(self.rdt_flavor())
        before = len(self.defined_xmls("rdt1", server["id"]))
        # The host rebooted: the domains are defined but no longer run.
        conn = self.computes["rdt1"].driver._host.get_connection()
        for s in (server, other):
            conn.lookupByUUIDString(s["id"]).destroy()
        self.restart_compute_service("rdt1")
        xmls = self.defined_xmls("rdt1", server["id"])
        self.assertGreater(len(xmls), before)       # hard-rebooted
        self.assert_elements(xmls[-1])
        server = self._wait_for_state_change(server, "ACTIVE")
        # The new driver's ledger holds each resumed VM once.
        self.assert_holds("rdt1", [server["id"], other["id"]])
        for s in (server, other):
            self._delete_server(s)
        self.assert_holds("rdt1", [])


class TestPmdCosPlacement(PathsTestBase):
    """With the PMD COS on, nova-rdt puts a sharing VM next to the PMD
    span itself (libvirt's best fit would put it at the lowest free ways,
    out of the span's reach), and keeps others away from it: nothing is
    refused while there is room (issue 33, cases 1 and 2)."""

    def test_sharing_vm_lands_next_to_the_pmd_span(self):
        self.flags(group="rdt", pmd_cos=True, pmd_shared_ways=2)
        self.pmd_base = 0x600
        self.start_rdt_compute("rdt1")
        self.assertIn("L3:0=600;1=600",
                      self.resctrl("rdt1", "nova-rdt-pmd", "schemata"))
        share = {"rdt:pmd_share": "true"}
        # Alone on the host: just below the base (0x180), not at 0x00c;
        # the PMD COS spans both.
        first = self.boot(self.flavor(**{"rdt:l3_cache_ways": "2",
                                         **share}))
        self.assertIn("L3:0=780;1=780",
                      self.resctrl("rdt1", "nova-rdt-pmd", "schemata"))
        self.assertEqual({0: 0x783, 1: 0x783}, self.used("rdt1"))
        # A non-sharing VM keeps away from the span; a second sharer
        # then still reaches it, and the cache is full.
        low = self.boot(self.rdt_flavor(3))
        top = self.boot(self.flavor(**{"rdt:l3_cache_ways": "2", **share}))
        self.assertEqual(sorted([first["id"], low["id"], top["id"]]),
                         sorted(self.claims("rdt1")))
        self.assertEqual({0: 0x7ff, 1: 0x7ff}, self.used("rdt1"))
        self.assertIn("L3:0=7e0;1=7e0",
                      self.resctrl("rdt1", "nova-rdt-pmd", "schemata"))
        for s in (top, low, first):
            self._delete_server(s)
        self.assert_holds("rdt1", [])

    def _fault_text(self, server):
        """Why the build failed, as the compute logged it (the API's fault
        says only that the retries ran out)."""
        return self.stdlog.logger.output


class TestPmdCosAtRestart(PathsTestBase):
    """The hook's side, through nova-compute's start-up reconcile on the
    FUSE emulator: groups libvirt made (here by hand, as fakelibvirt makes
    none) with a record naming one as sharing."""

    def _share(self, host, group, masks, pmd_share=True):
        root = host.resctrl_root
        os.mkdir(os.path.join(root, group))
        with open(os.path.join(root, group, "schemata"), "w") as f:
            f.write("L3:" + ";".join(f"{c}={m:x}" for c, m in
                                      enumerate(masks)) + "\n")
        if pmd_share is None:
            return
        records_mod.Records(host.state_path).put(records_mod.Record(
            uuid=str(uuid_mod.uuid4()), name=group, pid=os.getpid(),
            pid_start=procinfo.proc_start_time(os.getpid()),
            pmd_share=pmd_share, rdt_class=None, group=group))

    def test_span_when_it_can_degraded_when_libvirt_surprised_us(self):
        self.flags(group="rdt", pmd_cos=True, pmd_shared_ways=2)
        self.start_rdt_compute("rdt1")
        host = self.rdt_host("rdt1")
        # A sharing VM right below the base, one far below it with only
        # free ways between on cache id 1, and a non-sharing VM between
        # the far one and the base on cache id 0.
        self._share(host, "qemu-1-near-vcpus_0-1", (0x180, 0x180))
        self._share(host, "qemu-2-far-vcpus_0-1", (0x00c, 0x00c))
        self._share(host, "qemu-3-other-vcpus_0-1", (0x030, 0x003),
                    pmd_share=None)
        self.restart_compute_service("rdt1")
        pmd = self.resctrl("rdt1", "nova-rdt-pmd", "schemata")
        # Cache id 0: 0x030 is another VM's, so the far VM is dropped and
        # the mask keeps the base and the near VM.  Cache id 1: the span
        # over free ways 0x070 (those stay with the PMDs).
        self.assertIn("L3:0=780;1=7fc", pmd)
        self.assertIn("PMD COS degraded", self.stdlog.logger.output)
