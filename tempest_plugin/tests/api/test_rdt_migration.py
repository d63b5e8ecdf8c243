"""Moves of RDT servers between two computes, whitebox, with no SSH:
each end read through its own nova-rdt exporter (``[nova_rdt]
exporter_urls``, Nova host -> URL).

For a server with ways of its own (``rdt:l3_cache_ways``), a PMD sharer
(``rdt:pmd_share=true``, where the computes keep a PMD COS) and a class
member (``rdt:class``, where ``[nova_rdt] noisy_class`` names one):

* live migration to the other compute (named, scheduler-checked), and,
  for the first kind, to no named host (the scheduler's choice of
  another compute);
* cold migration to the other compute, confirmed;
* cold migration to the other compute, reverted.

After each move the server's end holds it as its flavor says (its own
group with exactly its flavor's ways on every cache it holds any on,
sharing the PMD COS's ways for a sharer; for a class member no group of
its own and the class group there, holding ways), and the other end
holds nothing of it: no group the exporter names as its, no group of
the names it had there, no way of those.

They skip, saying why, with fewer than two computes (``[compute]
min_compute_nodes``, or fewer than two nova-compute services up and
enabled), with the move turned off in ``[compute-feature-enabled]``, or
when an up compute has no exporter in ``exporter_urls``.

Microversion 2.56 (see ``tempest_plugin.migration``): the lowest that
names a cold migration's host; live migration names its host with no
``force`` (2.30+), so the scheduler, RDTFilter included, checks the
destination, as in any move an operator makes.
"""

from tempest import config
from tempest.api.compute import base
from tempest.common import waiters
from tempest.lib import decorators

from tempest_plugin import exporter as exporter_mod
from tempest_plugin import migration
from tempest_plugin import servers

CONF = config.CONF

#: Seconds an end gets to show what is checked once Nova says the move
#: is done (the hook and libvirt act within the move; the exporter
#: reads resctrl on each request).
SETTLE_SECONDS = 60.0
WAYS = 2


class _RdtMigrationBase(servers.RdtServersMixin,
                        base.BaseV2ComputeAdminTest):
    min_microversion = migration.MIGRATION_MICROVERSION
    #: "live" or "cold": which [compute-feature-enabled] flag gates it.
    move = None

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        opts = CONF.nova_rdt
        reason = migration.conf_skip_reason(
            cls.move, CONF.compute.min_compute_nodes,
            getattr(CONF.compute_feature_enabled,
                    migration.FEATURES[cls.move]),
            opts.rdt_compute, opts.exporter_urls)
        if reason:
            raise cls.skipException(reason)
        bad = migration.bad_exporter_urls(opts.exporter_urls)
        if bad:
            # A typo is an error, not a reason to skip.
            raise ValueError(f"[nova_rdt] exporter_urls: {'; '.join(bad)}")

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        services = cls.os_admin.services_client.list_services(
            binary="nova-compute")["services"]
        urls = CONF.nova_rdt.exporter_urls
        reason = migration.hosts_skip_reason(services, urls)
        if reason:
            raise cls.skipException(reason)
        cls.hosts = migration.up_computes(services)
        cls.exporters = {h: exporter_mod.Exporter(urls[h])
                         for h in cls.hosts}

    # -- the three kinds of server --

    def rdt_server(self, what):
        """A server of kind ``what`` ("ways", "sharer", "member") and
        the ``placement_problems`` arguments that judge it."""
        if what == "ways":
            specs, check = {"rdt:l3_cache_ways": str(WAYS)}, {"ways": WAYS}
        elif what == "sharer":
            no_pmd = [h for h, e in sorted(self.exporters.items())
                      if not any(g["kind"] == "pmd"
                                 for g in e.layout().get("groups", []))]
            if no_pmd:
                raise self.skipException(
                    f"no PMD COS on {', '.join(no_pmd)} (no group of kind "
                    f"pmd in its exporter's /api/layout: [rdt] pmd_cos = "
                    f"False, or no OVS-DPDK PMD threads)")
            ways = CONF.nova_rdt.forwarding_l3_ways
            specs = {"rdt:l3_cache_ways": str(ways), "rdt:pmd_share": "true"}
            check = {"ways": ways, "pmd_share": True}
        else:
            name = CONF.nova_rdt.noisy_class
            if not name:
                raise self.skipException(
                    "no class to join ([nova_rdt] noisy_class is not set; "
                    "it must name one of the computes' [rdt] classes)")
            specs, check = {"rdt:class": name}, {"rdt_class": name}
        return self.boot(self.flavor(specs)), check

    # -- reading the ends --

    def settle(self, host, problems_of):
        """The layout of ``host`` once ``problems_of(layout)`` is empty;
        fails with the last problems after SETTLE_SECONDS."""
        exporter = self.exporters[host]
        last = {}

        def ok():
            last["layout"] = exporter.layout()
            last["problems"] = problems_of(last["layout"])
            return not last["problems"]
        if not exporter.wait_for(host, ok, timeout=SETTLE_SECONDS):
            self.fail(f"{host} (exporter {exporter.url}), after "
                      f"{SETTLE_SECONDS:g} s: "
                      + "\n".join(last["problems"]))
        return last["layout"]

    def holds(self, host, server, check):
        return self.settle(host, lambda layout: (
            exporter_mod.placement_problems(layout, server, **check)))

    def clean(self, host, server, groups):
        return self.settle(host, lambda layout: (
            exporter_mod.leftover_problems(layout, server, groups)))

    def assert_on(self, server, host):
        now = self.get_host_for_server(server)
        if now != host:
            moves = [m for m in self.os_admin.migrations_client
                     .list_migrations()["migrations"]
                     if m.get("instance_uuid") == server]
            self.fail(f"server {server} is on {now}, not {host}; its "
                      f"migrations: {moves}")

    def start(self, what):
        """Boot a ``what`` server; (server, check, src, dst, the names of
        its groups on src) once src holds it."""
        server, check = self.rdt_server(what)
        src = self.get_host_for_server(server)
        self.assertIn(src, self.exporters,
                      f"server {server} landed on {src}, which is not an "
                      f"up and enabled compute with an exporter")
        dst = migration.other_host(self.hosts, src)
        layout = self.holds(src, server, check)
        return server, check, src, dst, exporter_mod.instance_groups(
            layout, server)


class RdtLiveMigrationTest(_RdtMigrationBase):
    move = "live"

    def _live_migrate(self, what, named=True):
        """``named``: to the other compute by name; else where the
        scheduler puts it (any compute but its own)."""
        server, check, src, dst, groups = self.start(what)
        self.admin_servers_client.live_migrate_server(
            server, host=dst if named else None, block_migration="auto")
        waiters.wait_for_server_status(self.admin_servers_client, server,
                                       "ACTIVE")
        if not named:
            now = self.get_host_for_server(server)
            if now != src and now in self.exporters:
                dst = now
        self.assert_on(server, dst)
        self.holds(dst, server, check)
        self.clean(src, server, groups)

    @decorators.attr(type="multinode")
    @decorators.idempotent_id("fae0fae1-e118-45d3-a1ba-d48b86faaea7")
    def test_live_migration_moves_the_ways_and_leaves_nothing(self):
        self._live_migrate("ways")

    @decorators.attr(type="multinode")
    @decorators.idempotent_id("fff97e51-b7b1-4377-b84f-091a546e6752")
    def test_live_migration_the_scheduler_places(self):
        self._live_migrate("ways", named=False)

    @decorators.attr(type="multinode")
    @decorators.idempotent_id("6061924d-b9b9-43ea-921f-57dd08716360")
    def test_live_migration_of_a_pmd_sharer(self):
        self._live_migrate("sharer")

    @decorators.attr(type="multinode")
    @decorators.idempotent_id("d92be6b1-ab41-4c18-91a4-01f7e125e4f6")
    def test_live_migration_of_a_class_member(self):
        self._live_migrate("member")


class RdtColdMigrationTest(_RdtMigrationBase):
    move = "cold"

    def _cold_migrate(self, what, revert):
        server, check, src, dst, groups = self.start(what)
        self.admin_servers_client.migrate_server(server, host=dst)
        waiters.wait_for_server_status(self.admin_servers_client, server,
                                       "VERIFY_RESIZE")
        self.assert_on(server, dst)
        at_dst = self.holds(dst, server, check)
        if revert:
            dst_groups = exporter_mod.instance_groups(at_dst, server)
            self.admin_servers_client.revert_resize_server(server)
            waiters.wait_for_server_status(self.admin_servers_client,
                                           server, "ACTIVE")
            self.assert_on(server, src)
            self.holds(src, server, check)
            self.clean(dst, server, dst_groups)
        else:
            self.admin_servers_client.confirm_resize_server(server)
            waiters.wait_for_server_status(self.admin_servers_client,
                                           server, "ACTIVE")
            self.assert_on(server, dst)
            self.holds(dst, server, check)
            self.clean(src, server, groups)

    @decorators.attr(type="multinode")
    @decorators.idempotent_id("425176bf-d170-4336-8c0d-9265af718e2f")
    def test_cold_migration_confirmed_moves_the_ways(self):
        self._cold_migrate("ways", revert=False)

    @decorators.attr(type="multinode")
    @decorators.idempotent_id("def2b384-c709-46fc-b6bc-285a7d893e4f")
    def test_cold_migration_reverted_brings_the_ways_back(self):
        self._cold_migrate("ways", revert=True)

    @decorators.attr(type="multinode")
    @decorators.idempotent_id("efca8154-381e-48b0-8434-3ee7d19533b3")
    def test_cold_migration_confirmed_of_a_pmd_sharer(self):
        self._cold_migrate("sharer", revert=False)

    @decorators.attr(type="multinode")
    @decorators.idempotent_id("eb9288a0-f772-4b8c-8884-c623088349b9")
    def test_cold_migration_reverted_of_a_pmd_sharer(self):
        self._cold_migrate("sharer", revert=True)

    @decorators.attr(type="multinode")
    @decorators.idempotent_id("c45282e6-c913-49fc-996b-1263b95a68b4")
    def test_cold_migration_confirmed_of_a_class_member(self):
        self._cold_migrate("member", revert=False)

    @decorators.attr(type="multinode")
    @decorators.idempotent_id("4a172cdf-2f37-4239-a000-f0f7aebabb15")
    def test_cold_migration_reverted_of_a_class_member(self):
        self._cold_migrate("member", revert=True)
