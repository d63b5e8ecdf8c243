"""LibvirtRDTDriver: Nova's libvirt driver with Intel RDT.

Load it with ``[DEFAULT] compute_driver = rdt.LibvirtRDTDriver`` (the
``nova.virt.rdt`` shim re-exports this class).  It adds, on top of Nova's
own behaviour, and without changing any of it:

* host preparation at ``init_host`` (through privsep), then a reconcile;
* ``CUSTOM_RDT_*`` traits and an ``rdt`` compute-node stat for the filter
  (an empty one, with the reason in ``rdt_degraded``, while resctrl is
  gone: doc/source/recovery.rst);
* ``<cachetune>``/``<memorytune>``/``<monitor>`` and nova-rdt metadata on
  every path that builds a domain from scratch (spawn, hard reboot,
  resize/cold migration, rebuild/evacuate, unshelve, rescue), with the
  positions of the ways decided by nova-rdt and written into libvirt's
  group before the guest runs;
* a destination check and reservation, and an XML rewrite, for live
  migration (:mod:`nova_rdt.virt.migration`).

The RDT logic is one object, :class:`~nova_rdt.virt.rdt_compute.RdtCompute`
(``self.rdt``), as Nova's driver composes its ``Host``; the overrides
below only hook it into Nova's paths.
"""

from __future__ import annotations

from nova import exception
from nova.virt.libvirt import driver as libvirt_driver
from oslo_log import log as logging
from oslo_utils import excutils

from nova_rdt import failpoints
from nova_rdt.allocation import hoststate
from nova_rdt.virt import migration
from nova_rdt.virt import publish as publish_mod
from nova_rdt.virt import rdt_compute

LOG = logging.getLogger(__name__)


class LibvirtRDTDriver(migration.LiveMigrationMixin,
                        libvirt_driver.LibvirtDriver):

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        self.rdt = rdt_compute.RdtCompute(self._host, virtapi)

    def init_host(self, host):
        super().init_host(host)
        self.rdt.init_host()

    # -- what the host publishes ---------------------------------------

    def get_available_resource(self, nodename):
        data = super().get_available_resource(nodename)
        data["stats"].update(self.rdt.stats())
        return data

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        super().update_provider_tree(provider_tree, nodename,
                                     allocations=allocations)
        stats, rdt_traits = self.rdt.stats_and_traits()
        traits = set(provider_tree.data(nodename).traits)
        provider_tree.update_traits(
            nodename, (traits - set(hoststate.ALL_TRAITS)) | rdt_traits)
        # Under the tracker's lock, right before it saves the node.
        publish_mod.refresh(self.virtapi, stats, nodename)

    # -- building and starting domains ---------------------------------

    def _get_guest_xml(self, context, instance, network_info, disk_info,
                       image_meta, rescue=None, block_device_info=None,
                       mdevs=None, accel_info=None, share_info=None,
                       old_guest=None):
        # Every path that builds a domain (spawn, hard reboot, resize,
        # rescue, revert) comes through here: the claim is made once
        # here, and building the config below only renders it.
        self.rdt.decide_guest(instance)
        return super()._get_guest_xml(
            context, instance, network_info, disk_info, image_meta,
            rescue=rescue, block_device_info=block_device_info,
            mdevs=mdevs, accel_info=accel_info, share_info=share_info,
            old_guest=old_guest)

    def _get_guest_config(self, instance, network_info, image_meta,
                          disk_info, rescue=None, block_device_info=None,
                          context=None, mdevs=None, accel_info=None,
                          share_info=None, old_guest=None):
        guest = super()._get_guest_config(
            instance, network_info, image_meta, disk_info, rescue=rescue,
            block_device_info=block_device_info, context=context,
            mdevs=mdevs, accel_info=accel_info, share_info=share_info,
            old_guest=old_guest)
        self.rdt.extend_guest(guest, instance)
        return guest

    def _create_guest(self, context, xml, instance, power_on=True,
                      pause=False, post_xml_callback=None):
        """libvirt allocates from the ``<cachetune>`` sizes wherever it
        likes; the domain is started paused and its decided masks are
        written (:meth:`RdtCompute.starting`) before it may run."""
        if not (power_on or pause) or not self.rdt.decides(instance):
            return super()._create_guest(
                context, xml, instance, power_on=power_on, pause=pause,
                post_xml_callback=post_xml_callback)
        guest = None
        try:
            with self.rdt.starting(instance):
                guest = super()._create_guest(
                    context, xml, instance, power_on=power_on, pause=True,
                    post_xml_callback=post_xml_callback)
        except Exception:
            with excutils.save_and_reraise_exception():
                # Paused on libvirt's choice of ways: it never runs there,
                # and its group goes now, not when Nova gets round to it.
                if guest is not None:
                    try:
                        guest.poweroff()
                    except Exception:
                        LOG.warning("nova-rdt: could not stop the paused "
                                    "guest", exc_info=True,
                                    instance=instance)
        if not pause:
            guest.resume()
        return guest

    def spawn(self, context, instance, image_meta, injected_files,
              admin_password, allocations, network_info=None,
              block_device_info=None, power_on=True, accel_info=None):
        super().spawn(context, instance, image_meta, injected_files,
                      admin_password, allocations, network_info=network_info,
                      block_device_info=block_device_info, power_on=power_on,
                      accel_info=accel_info)
        failpoints.hit("driver.after_define")

    # -- releasing reservations ----------------------------------------

    def cleanup(self, context, instance, network_info, block_device_info=None,
                destroy_disks=True, migrate_data=None, destroy_vifs=True,
                destroy_secrets=True):
        try:
            return super().cleanup(
                context, instance, network_info,
                block_device_info=block_device_info,
                destroy_disks=destroy_disks, migrate_data=migrate_data,
                destroy_vifs=destroy_vifs, destroy_secrets=destroy_secrets)
        finally:
            self.rdt.release(instance.uuid)

    def _cleanup_resize(self, context, instance, network_info):
        super()._cleanup_resize(context, instance, network_info)
        # On a resize to the same host the new domain is still defined
        # here and keeps its reservation; otherwise the old one is gone.
        try:
            self._host.get_guest(instance)
        except exception.InstanceNotFound:
            self.rdt.release(instance.uuid)

    def confirm_migration(self, context, migration, instance, network_info):
        super().confirm_migration(context, migration, instance, network_info)
        # Runs on the source.  After a move the instance lives on the
        # destination, whatever is left of its old domain here (a
        # transient leftover, a failed undefine): its ways are not ours
        # to promise any more.
        if migration.source_compute != migration.dest_compute:
            self.rdt.release(instance.uuid)
