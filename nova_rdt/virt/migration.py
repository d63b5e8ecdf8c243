"""Live migration with RDT: a destination claim and an XML rewrite.

libvirt re-creates the domain's resctrl groups on the destination from
the XML it is handed, so the source must hand it the destination's
cachetunes (planned from the destination's published state), and the
destination must claim the ways before the migration starts, or refuse
it so that the scheduler can pick another host.
"""

from __future__ import annotations

import functools

from nova import exception
from nova import objects
from oslo_config import cfg
from oslo_log import log as logging

from nova_rdt import failpoints
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import planner
from nova_rdt.virt import guest_rdt

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


class LiveMigrationMixin:
    """The live-migration overrides of :class:`LibvirtRDTDriver`.

    Mixed in before ``LibvirtDriver``, so ``super()`` is Nova's driver;
    it uses the driver's ``_rdt_*`` helpers for requests, live state and
    claims.
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
            self._rdt_destination_claim(instance, None, dry_run=True)
        return data

    def post_claim_migrate_data(self, context, instance, migrate_data,
                                claim):
        """On the destination, for a NUMA instance: check its RDT request
        against the host cells Nova just claimed."""
        migrate_data = super().post_claim_migrate_data(
            context, instance, migrate_data, claim)
        self._rdt_destination_claim(instance, claim.claimed_numa_topology,
                                    dry_run=True)
        return migrate_data

    def pre_live_migration(self, context, instance, block_device_info,
                           network_info, disk_info, migrate_data):
        """On the destination, before the source starts sending: reserve
        the instance's ways, or refuse (the source then rolls back)."""
        mc = instance.migration_context
        topology = mc.new_numa_topology if mc and mc.new_numa_topology \
            else instance.numa_topology
        self._rdt_destination_claim(instance, topology)
        try:
            failpoints.hit("migration.dest_claim")
            return super().pre_live_migration(
                context, instance, block_device_info, network_info,
                disk_info, migrate_data)
        except BaseException:
            # Nova may not roll back at the destination for a failure
            # here; the reservation must not outlive the attempt.
            self._rdt_release(instance.uuid)
            raise

    def _rdt_destination_claim(self, instance, topology, dry_run=False):
        """Plan ``instance`` here as a spawn would, PMD share included;
        reserve its ways unless ``dry_run``.  Raises
        MigrationPreCheckError naming what this host cannot give."""
        request = self._rdt_request(instance)
        if request is None:
            return
        live = self._rdt_live()
        if live is None:
            if CONF.rdt.missing_rdt_policy == "ignore":
                return
            raise exception.MigrationPreCheckError(
                reason=f"nova-rdt: {CONF.host} has no resctrl (RDT)")
        state, allocated = live
        try:
            d = guest_rdt.demand(request, instance.flavor.vcpus, topology,
                                 state, self._rdt_host_cells(),
                                 self._rdt_monitor_default(request))
        except planner.CannotHonour as e:
            raise exception.MigrationPreCheckError(
                reason=f"nova-rdt: {CONF.host} cannot honour the instance's "
                       f"RDT request: {e}") from e
        self._rdt_claim(instance, request, d, state, allocated,
                        _precheck_error, dry_run=dry_run)

    def post_live_migration_at_source(self, context, instance,
                                      network_info):
        """On the source, once the domain runs on the destination."""
        super().post_live_migration_at_source(context, instance,
                                              network_info)
        failpoints.hit("migration.source_release")
        self._rdt_release(instance.uuid)

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
            self._rdt_release(instance.uuid)

    def _live_migration_operation(self, context, instance, dest,
                                  block_migration, migrate_data, guest,
                                  device_names):
        """On the source: hand libvirt the destination's RDT elements."""
        rewrite = functools.partial(self._rdt_destination_xml, context,
                                    instance, dest)
        return super()._live_migration_operation(
            context, instance, dest, block_migration, migrate_data,
            _RewritingGuest(guest, rewrite), device_names)

    def _rdt_destination_xml(self, context, instance, dest, xml):
        request = self._rdt_request(instance)
        # Before any database read: an instance without RDT must migrate
        # exactly as with Nova's own driver, and a read here, inside
        # Nova's migration path, was seen to deadlock its test fixtures'
        # cell lock against a periodic task.
        if request is None and not self._rdt_monitor_default(None):
            return xml
        node = objects.ComputeNode.get_first_node_by_host_for_old_compat(
            context, dest)
        state = hoststate.HostRdtState.from_stats(node.stats)
        if state is None:
            LOG.warning("nova-rdt: %s publishes no RDT state; migrating "
                        "without RDT elements", dest, instance=instance)
            return guest_rdt.rewrite_xml(xml, [], None)
        host_cells = {}
        if node.numa_topology:
            topo = objects.NUMATopology.obj_from_db_obj(node.numa_topology)
            host_cells = {c.id: frozenset(c.cpuset | c.pcpuset)
                          for c in topo.cells}
        mc = instance.migration_context
        topology = mc.new_numa_topology if mc else instance.numa_topology
        try:
            d = guest_rdt.demand(request, instance.flavor.vcpus, topology,
                                 state, host_cells,
                                 self._rdt_monitor_default(request))
        except planner.CannotHonour as e:
            # The destination's claim passed, but its published state has
            # changed since (a class undefined, ways taken): stop here
            # rather than hand libvirt XML it would refuse.
            raise exception.MigrationError(
                reason=f"nova-rdt: {dest} can no longer honour the "
                       f"instance's RDT request: {e}") from e
        caches, mems = guest_rdt.tunes(d, state)
        LOG.info("nova-rdt: destination %s gets L3 %s, MB %s", dest,
                 dict(d.cache), dict(d.mb), instance=instance)
        return guest_rdt.rewrite_xml(xml, caches + mems,
                                     guest_rdt.metadata(request, d, state))


def _precheck_error(reason: str) -> exception.MigrationPreCheckError:
    return exception.MigrationPreCheckError(
        reason=f"{reason} ({CONF.host} refuses the incoming instance)")


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
