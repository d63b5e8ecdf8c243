"""Live migration with RDT: a destination claim and an XML rewrite.

libvirt re-creates the domain's resctrl groups on the destination from
the XML it is handed, so the source must hand it the destination's
cachetunes (planned from the destination's published state), and the
destination must claim the ways before the migration starts, or refuse
it so that the scheduler can pick another host.
"""

from __future__ import annotations

import functools

from oslo_config import cfg
from oslo_log import log as logging

from nova_rdt import failpoints

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


class LiveMigrationMixin:
    """The live-migration overrides of :class:`LibvirtRDTDriver`.

    Mixed in before ``LibvirtDriver``, so ``super()`` is Nova's driver;
    the RDT decisions are the driver's :class:`RdtCompute`'s
    (``self.rdt``).
    """

    # Where the destination decides, and when it reserves.  Nova runs
    # post_claim_migrate_data only for instances with a NUMA topology, so
    # every instance is *checked* in check_can_live_migrate_destination
    # (a refusal there is a MigrationPreCheckError: the conductor tries
    # another host), and the ways are *reserved* in pre_live_migration,
    # once the conductor's own checks and port bindings have passed.  A
    # migration that fails from then on goes through
    # rollback_live_migration_at_destination, which releases at once; one
    # that fails before never reserved anything.

    def check_can_live_migrate_destination(self, context, instance,
                                           src_compute_info,
                                           dst_compute_info,
                                           block_migration=False,
                                           disk_over_commit=False):
        data = super().check_can_live_migrate_destination(
            context, instance, src_compute_info, dst_compute_info,
            block_migration=block_migration,
            disk_over_commit=disk_over_commit)
        if instance.numa_topology is None:
            # A NUMA instance is checked against the cells Nova claims for
            # it, in post_claim_migrate_data.
            self.rdt.destination_claim(instance, None, dry_run=True)
        return data

    def post_claim_migrate_data(self, context, instance, migrate_data,
                                claim):
        """On the destination, for a NUMA instance: check its RDT request
        against the host cells Nova just claimed."""
        migrate_data = super().post_claim_migrate_data(
            context, instance, migrate_data, claim)
        self.rdt.destination_claim(instance, claim.claimed_numa_topology,
                                    dry_run=True)
        return migrate_data

    def pre_live_migration(self, context, instance, block_device_info,
                           network_info, disk_info, migrate_data):
        """On the destination, before the source starts sending: reserve
        the instance's ways, or refuse (the source then rolls back)."""
        mc = instance.migration_context
        topology = mc.new_numa_topology if mc and mc.new_numa_topology \
            else instance.numa_topology
        self.rdt.destination_claim(instance, topology)
        try:
            failpoints.hit("migration.dest_claim")
            return super().pre_live_migration(
                context, instance, block_device_info, network_info,
                disk_info, migrate_data)
        except BaseException:
            # Nova may not roll back at the destination for a failure
            # here; the reservation must not outlive the attempt.
            self.rdt.release(instance.uuid)
            raise

    def post_live_migration_at_destination(self, context, instance,
                                           network_info,
                                           block_migration=False,
                                           block_device_info=None):
        super().post_live_migration_at_destination(
            context, instance, network_info,
            block_migration=block_migration,
            block_device_info=block_device_info)
        self.rdt.arrived(instance)

    def post_live_migration_at_source(self, context, instance,
                                      network_info):
        """On the source, once the domain runs on the destination."""
        super().post_live_migration_at_source(context, instance,
                                              network_info)
        failpoints.hit("migration.source_release")
        self.rdt.release(instance.uuid)

    def rollback_live_migration_at_destination(self, context, instance,
                                               network_info,
                                               block_device_info,
                                               destroy_disks=True,
                                               migrate_data=None):
        try:
            return super().rollback_live_migration_at_destination(
                context, instance, network_info, block_device_info,
                destroy_disks=destroy_disks, migrate_data=migrate_data)
        finally:
            self.rdt.release(instance.uuid)

    def _live_migration_operation(self, context, instance, dest,
                                  block_migration, migrate_data, guest,
                                  device_names):
        """On the source: hand libvirt the destination's RDT elements."""
        rewrite = functools.partial(self.rdt.destination_xml, context,
                                    instance, dest)
        return super()._live_migration_operation(
            context, instance, dest, block_migration, migrate_data,
            _RewritingGuest(guest, rewrite), device_names)



class _RewritingGuest:
    """A Guest whose migrate() passes the destination XML through a rewrite.

    Nova builds the destination XML inside _live_migration_operation and
    hands it straight to guest.migrate(); this is the one seam after it.
    """

    def __init__(self, guest, rewrite):
        self._guest = guest
        self._rewrite = rewrite

    def __getattr__(self, name):
        return getattr(self._guest, name)

    def migrate(self, destination, *args, destination_xml=None, **kwargs):
        if destination_xml is not None:
            failpoints.hit("migration.before_xml_rewrite")
            destination_xml = self._rewrite(destination_xml)
            failpoints.hit("migration.after_xml_rewrite")
        return self._guest.migrate(destination, *args,
                                   destination_xml=destination_xml, **kwargs)
