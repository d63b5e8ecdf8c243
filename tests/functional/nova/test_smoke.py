"""The Nova functional harness itself: an RDT host next to a plain one."""

import os

from lxml import etree
from nova import conf as nova_conf
import pytest

from tests.functional.nova import base

CONF = nova_conf.CONF

pytestmark = pytest.mark.fuse


class TestRdtHarnessSmoke(base.RdtServersTestBase):

    def test_boot_on_rdt_and_plain_hosts(self):
        self.start_rdt_compute("rdt1", profile="gold-6252")
        self.start_compute("plain1")
        rdt = self.rdt_host("rdt1")

        # The emulator is mounted and [rdt] points at it and at a sysfs
        # tree that agrees with the fake NUMA topology.
        with open(os.path.join(rdt.resctrl_root, "info", "L3",
                               "cbm_mask")) as f:
            self.assertEqual("7ff", f.read().strip())
        self.assertEqual(rdt.resctrl_root, CONF.rdt.resctrl_root)
        self.assertEqual(rdt.sysfs_cpu_root, CONF.rdt.sysfs_cpu_root)
        with open(os.path.join(rdt.sysfs_cpu_root, "cpu4", "cache", "index3",
                               "shared_cpu_list")) as f:
            self.assertEqual("4-7", f.read().strip())

        # libvirt capabilities: one L3 bank per NUMA node, with its CPUs.
        caps = etree.fromstring(self.capabilities_xml("rdt1"))
        cells = {c.get("id"): ",".join(cpu.get("id") for cpu in
                                       c.findall("cpus/cpu"))
                 for c in caps.findall("host/topology/cells/cell")}
        self.assertEqual({"0": "0,1,2,3", "1": "4,5,6,7"}, cells)
        banks = caps.findall("host/cache/bank")
        self.assertEqual(
            [{"id": "0", "level": "3", "type": "both", "size": "36608",
              "unit": "KiB", "cpus": "0-3"},
             {"id": "1", "level": "3", "type": "both", "size": "36608",
              "unit": "KiB", "cpus": "4-7"}],
            [dict(b.attrib) for b in banks])
        self.assertEqual(
            {"granularity": "3328", "unit": "KiB", "type": "both",
             "maxAllocs": "16"},
            dict(banks[0].find("control").attrib))
        self.assertEqual(
            {"granularity": "10", "min": "10", "maxAllocs": "8"},
            dict(caps.find("host/memory_bandwidth/node[@id='1']/control")
                 .attrib))
        self.assertEqual("4-7", caps.find(
            "host/memory_bandwidth/node[@id='1']").get("cpus"))
        # Valid for libvirt's capability.rng, once the fake's own NUMA
        # <topology> (its <cpu>s lack die_id, which the schema needs) is out.
        caps.find("host").remove(caps.find("host/topology"))
        self.relaxng_validate(etree.tostring(caps), "capability")
        # Nova parses them as it does at start-up.
        self.computes["rdt1"].driver._host._caps = None
        self.computes["rdt1"].driver._host.get_capabilities()

        # A plain host stays plain.
        plain = etree.fromstring(self.capabilities_xml("plain1"))
        self.assertIsNone(plain.find("host/cache"))
        self.assertIsNone(plain.find("host/memory_bandwidth"))

        # Boot with the default driver on each host; the XML given to
        # libvirt is captured per host and is valid for libvirt.
        servers = {}
        for host in ("rdt1", "plain1"):
            server = self._create_server(host=host, networks="none")
            servers[host] = self._wait_for_state_change(server, "ACTIVE")
            self.assertEqual(host, servers[host]["OS-EXT-SRV-ATTR:host"])
        for host, server in servers.items():
            xml = self.domain_xml(server["id"])
            self.assertEqual(server["id"],
                             etree.fromstring(xml).findtext("uuid"))
            self.assertEqual([xml], self.defined_xmls(host, server["id"]))
            self.relaxng_validate(xml)
        self.assertEqual(
            [], self.defined_xmls("plain1", servers["rdt1"]["id"]))
