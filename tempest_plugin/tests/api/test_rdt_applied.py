"""Isolation as applied, whitebox, with no SSH: servers booted through
the compute API, then what the RDT compute's resctrl holds, read through
its nova-rdt exporter (``[nova_rdt] exporter_url``; on a cloud of several
computes, ``exporter_urls`` names each one's, and each server is read
where it runs).

* an ``rdt:`` flavor's server gets the ways and the MB its flavor asked
  for, on every cache its group holds;
* a class costs one CLOS however many members it has;
* a PMD-sharing server (``rdt:pmd_share=true``) holds exactly its
  flavor's ways and shares them with the OVS-DPDK PMD COS on the PMD
  cores' caches, and a neighbour's ways touch neither;
* (negative) asking for more ways than the host can give is refused by
  the scheduler: the server's fault says "No valid host" with
  RDTFilter's reason (and no host name), and no group is made.
"""

import re

from tempest import config
from tempest.api.compute import base
from tempest.common import waiters
from tempest.lib import decorators
from tempest.lib.common.utils import data_utils

from tempest_plugin import exporter as exporter_mod
from tempest_plugin import servers

CONF = config.CONF


class _RdtAppliedBase(servers.RdtServersMixin, base.BaseV2ComputeAdminTest):
    # networks "none" arrived in 2.37.
    min_microversion = "2.37"

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        opts = CONF.nova_rdt
        if not opts.rdt_compute:
            raise cls.skipException(
                "no RDT-capable compute configured ([nova_rdt] "
                "rdt_compute = False)")
        if not opts.exporter_url and not opts.exporter_urls:
            raise cls.skipException(
                "[nova_rdt] exporter_url is not set: these checks read the "
                "RDT compute's nova-rdt exporter")

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        opts = CONF.nova_rdt
        cls.host_exporters = {
            host: exporter_mod.Exporter(url)
            for host, url in sorted((opts.exporter_urls or {}).items())}
        cls.exporter = (exporter_mod.Exporter(opts.exporter_url)
                        if opts.exporter_url
                        else next(iter(cls.host_exporters.values())))

    def exporter_of(self, server):
        """The exporter of the compute ``server`` runs on: with
        ``exporter_urls`` set, its host's there; else ``exporter_url``."""
        if not self.host_exporters:
            return self.exporter
        host = self.get_host_for_server(server)
        if host not in self.host_exporters:
            self.fail(f"server {server} is on {host}, which has no "
                      f"exporter in [nova_rdt] exporter_urls "
                      f"({sorted(self.host_exporters)})")
        return self.host_exporters[host]

    def every_exporter(self):
        """Each configured exporter once (by URL)."""
        seen = {}
        for e in [self.exporter, *self.host_exporters.values()]:
            seen.setdefault(e.url, e)
        return list(seen.values())


class RdtAppliedTest(_RdtAppliedBase):

    @decorators.idempotent_id("872eb3f4-b70e-496c-b866-0b23baccf6d8")
    def test_server_gets_the_ways_and_mb_its_flavor_asked_for(self):
        specs = {"rdt:l3_cache_ways": "2"}
        mba = self.exporter.feature("mba")
        if mba:
            specs["rdt:mb_percent"] = "50"
        server = self.boot(self.flavor(specs))
        exporter = self.exporter_of(server)
        ways = exporter.wait_for(
            "the server's group", lambda: exporter.instance_ways(server))
        self.assertNotEqual({}, ways, "the exporter shows no group for "
                            f"server {server}")
        self.assertEqual({cid: 2 for cid in ways}, ways)
        if mba:
            mb = exporter.instance_mb(server)
            self.assertNotEqual({}, mb)
            self.assertEqual({node: 0.5 for node in mb}, mb)

    @decorators.idempotent_id("736f525d-a136-4a4b-b284-3c5ce3a9dd3f")
    def test_a_class_costs_one_clos_however_many_members(self):
        name = CONF.nova_rdt.noisy_class
        if not name:
            raise self.skipException(
                "no class to join ([nova_rdt] noisy_class is not set; it "
                "must name one of the computes' [rdt] classes)")
        fid = self.flavor({"rdt:class": name})
        before = {e.url: e.clos_used() for e in self.every_exporter()}
        first = self.boot(fid)
        at_first = self.exporter_of(first)
        one = at_first.clos_used()
        second = self.boot(fid)
        at_second = self.exporter_of(second)
        two = at_second.clos_used()
        self.assertLessEqual(one - before[at_first.url], 1,
                             f"the first member of {name} cost "
                             f"{one - before[at_first.url]} CLOS")
        if at_second.url == at_first.url:
            self.assertEqual(one, two, f"a second member of {name} cost "
                             f"{two - one} more CLOS")
        else:
            # On another compute: the first member there.
            self.assertLessEqual(two - before[at_second.url], 1,
                                 f"the first member of {name} on "
                                 f"{at_second.url} cost "
                                 f"{two - before[at_second.url]} CLOS")
        # Members have no ways of their own: they are in the class group.
        self.assertEqual({}, at_first.instance_ways(first))
        self.assertEqual({}, at_second.instance_ways(second))

    @decorators.idempotent_id("bf48a43c-8b3a-478e-b055-294cf5fce1ad")
    def test_a_pmd_sharer_and_its_neighbour_hold_their_own_ways(self):
        exporters = self.every_exporter()
        no_pmd = [e.url for e in exporters
                  if not any(g["kind"] == "pmd"
                             for g in e.layout().get("groups", []))]
        if no_pmd:
            raise self.skipException(
                ("the RDT compute keeps" if len(exporters) == 1 else
                 f"the RDT compute at {', '.join(no_pmd)} keeps") +
                " no PMD COS (no group of kind pmd in its exporter's "
                "/api/layout: [rdt] pmd_cos = False, or no OVS-DPDK PMD "
                "threads)")
        hints = {}
        if len(exporters) > 1:
            # Several computes: the pair on one, as the scenario has it.
            group = self.os_admin.server_groups_client.create_server_group(
                name=data_utils.rand_name("rdt"),
                policies=["affinity"])["server_group"]
            self.addCleanup(
                self.os_admin.server_groups_client.delete_server_group,
                group["id"])
            hints["scheduler_hints"] = {"group": group["id"]}
        ways = CONF.nova_rdt.forwarding_l3_ways
        sharer = self.boot(self.flavor({"rdt:l3_cache_ways": str(ways),
                                        "rdt:pmd_share": "true"}), **hints)
        neighbour = self.boot(self.flavor(
            {"rdt:l3_cache_ways": str(CONF.nova_rdt.noisy_l3_ways)}),
            **hints)
        exporter = self.exporter_of(sharer)
        last = {}

        def settled():
            # The hook derives the PMD COS again as a sharer starts.
            last["problems"] = exporter_mod.pmd_sharing_problems(
                exporter.layout(), sharer, ways, neighbour)
            return not last["problems"]
        exporter.wait_for("the pair's groups", settled)
        self.assertEqual([], last["problems"])


class RdtAppliedNegativeTest(_RdtAppliedBase):

    @decorators.attr(type=["negative"])
    @decorators.idempotent_id("c966a90c-70bc-4df3-bd91-0fa7a641700e")
    def test_more_ways_than_the_host_has_gives_no_valid_host_and_why(self):
        exporters = self.every_exporter()
        # More than any compute has.
        ways = max(e.total_ways() for e in exporters)
        clos = {e.url: e.clos_used() for e in exporters}
        fid = self.flavor({"rdt:l3_cache_ways": str(ways)})
        server = self.boot(fid, wait_until=None)
        waiters.wait_for_server_status(self.admin_servers_client, server,
                                       "ERROR", raise_on_error=False)
        fault = self.admin_servers_client.show_server(
            server)["server"].get("fault") or {}
        message = fault.get("message", "")
        self.assertIn("No valid host", message, f"fault: {fault}")
        # RDTFilter's own reason, not Nova's "not enough hosts".
        self.assertIn("RDTFilter:", message, f"fault: {fault}")
        self.assertIn("rdt:", message.split("RDTFilter:", 1)[1])
        # The fault is the tenant's to read: no host names in it.
        hypervisors = self.os_admin.hypervisor_client.list_hypervisors()[
            "hypervisors"]
        for hv in hypervisors:
            name = hv["hypervisor_hostname"]
            self.assertIsNone(
                re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])",
                          message),
                f"the fault names host {name!r}: {message!r}")
        for e in exporters:
            self.assertEqual({}, e.instance_ways(server), e.url)
        self.assertEqual(clos, {e.url: e.clos_used() for e in exporters})
