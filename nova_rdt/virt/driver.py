"""LibvirtRDTDriver: Nova's libvirt driver with Intel RDT.

Load it with ``[DEFAULT] compute_driver = rdt.LibvirtRDTDriver`` (the
``nova.virt.rdt`` shim re-exports this class).  It adds, on top of Nova's
own behaviour, and without changing any of it:

* host preparation at ``init_host`` (through privsep), then a reconcile:
  groups of domains that died while nova-compute was down are removed,
  running instances rejoin their class groups and the PMD COS is
  re-derived;
* ``CUSTOM_RDT_*`` traits and an ``rdt`` compute-node stat for the filter;
  when resctrl stops answering, an empty ``rdt`` stat with the reason in
  ``rdt_degraded`` (no RDT is placed here) until it is back, prepared and
  reconciled again (doc/source/recovery.rst);
* ``<cachetune>``/``<memorytune>``/``<monitor>`` and nova-rdt metadata on
  every path that builds a domain from scratch (spawn, hard reboot,
  resize/cold migration, rebuild/evacuate, unshelve, rescue), planned
  against live resctrl state plus pending claims;
* a destination-side claim and an XML rewrite for live migration
  (:mod:`nova_rdt.virt.migration`).
"""

from __future__ import annotations

import dataclasses
import functools

from nova import exception
from nova.virt.libvirt import driver as libvirt_driver
from oslo_config import cfg
from oslo_log import log as logging

from nova_rdt import conf as rdt_conf
from nova_rdt import failpoints
from nova_rdt.allocation import claims as claims_mod
from nova_rdt.allocation import hostplan
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import metadata as meta_mod
from nova_rdt.allocation import naming
from nova_rdt.allocation import placement
from nova_rdt.allocation import planner
from nova_rdt.allocation import rdtclass
from nova_rdt.allocation import spec
from nova_rdt.host import agent as agent_mod
from nova_rdt.host import prep as host_prep
from nova_rdt.host import recovery
from nova_rdt.host.settings import HookSettings
from nova_rdt.privsep import resctrl as privsep_resctrl
from nova_rdt.privsep import state as privsep_state
from nova_rdt.resctrl import errors as rdt_errors
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.virt import config as rdt_config
from nova_rdt.virt import guest_rdt
from nova_rdt.virt import libvirt_caps
from nova_rdt.virt import migration
from nova_rdt.virt import placer as placer_mod

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
if "rdt" not in CONF:
    rdt_conf.register_opts(CONF)

# Claims of domains that never got defined are dropped after this long.
CLAIM_GRACE_S = 600.0
DEGRADED_STAT = hoststate.DEGRADED_STAT


class LibvirtRDTDriver(migration.LiveMigrationMixin,
                        libvirt_driver.LibvirtDriver):

    #: Write the decided masks while the new domain is paused.  Off only
    #: in the Host lab, where Nova's driver talks to a stand-in libvirt
    #: and the real libvirtd starts the domain later: the hook writes
    #: them there.
    rdt_enforce_on_create = True

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        self._rdt_fs: Resctrl | None = None
        self._rdt_claims = claims_mod.ClaimLedger()
        # A host that started without resctrl ([rdt] require_resctrl =
        # False): its library and settings, to look again periodically.
        self._rdt_pending: tuple[Resctrl, HookSettings] | None = None
        # Why this host offers no RDT right now (resctrl gone after a good
        # start); None while it is healthy.
        self._rdt_degraded: recovery.Degraded | None = None
        self._rdt_settings: HookSettings | None = None
        # Where every instance's ways go: decided, reserved, enforced.
        self._rdt_placer: placer_mod.Placer | None = None

    # -- host preparation ----------------------------------------------

    def init_host(self, host):
        super().init_host(host)
        self._rdt_init_host()

    def _rdt_init_host(self):
        opts = CONF.rdt
        try:
            settings = HookSettings.from_conf(CONF)
        except ValueError as e:
            # The same validation as the hook, hook install and reconcile:
            # refuse to start, naming the option, rather than run a host
            # whose hook would refuse every event.
            raise exception.InvalidConfiguration(f"nova-rdt: {e}") from None
        # Reads, planning and the flock stay in this (unprivileged)
        # process; only the writes cross into the privsep daemon.
        fs = Resctrl(settings.resctrl_root, prefix=settings.group_prefix,
                     sysfs_cpu=settings.sysfs_cpu_root,
                     lock_timeout=settings.lock_timeout,
                     ops=privsep_resctrl.PrivsepOps(settings.resctrl_root,
                                                    settings.group_prefix))
        try:
            fs.capabilities()
        except Exception as e:
            # Whatever the probe raises: a sysfs that is not what the
            # library expects (Nova's SysFsPoisonFixture raises its own
            # error) is "no usable resctrl" too, and require_resctrl
            # decides.
            if opts.require_resctrl:
                raise exception.InvalidConfiguration(
                    f"nova-rdt: resctrl is not usable at {opts.resctrl_root}"
                    f" ({e}); mount it (mount -t resctrl resctrl "
                    f"{opts.resctrl_root}) or set [rdt] "
                    f"require_resctrl=False to run this host without RDT"
                ) from e
            LOG.warning("nova-rdt: no resctrl at %s (%s); this host offers "
                        "no RDT until it is mounted (looked for at every "
                        "resource update)", opts.resctrl_root, e)
            # Kept, to look again from the periodic task.
            self._rdt_pending = (fs, settings)
            return
        self._rdt_start(fs, settings)

    def _rdt_start(self, fs: Resctrl, settings: HookSettings) -> None:
        """Prepare the host's resctrl, then offer RDT: at start, or once
        resctrl is mounted on a host that started without it."""
        opts = CONF.rdt
        try:
            summary = host_prep.prepare(fs, opts.reserved_host_ways,
                                        opts.pmd_shared_ways)
        except (host_prep.HostPrepError, rdt_errors.ResctrlError,
                OSError) as e:
            # ResctrlError carries the kernel's last_cmd_status.
            raise exception.InvalidConfiguration(
                f"nova-rdt: cannot prepare the host's resctrl: {e}") from e
        LOG.info("nova-rdt: host prepared: root %s, PMD %s, %s ways per "
                 "cache id for instances", summary["root"],
                 summary["pmd"] or "-", summary["managed_ways"])
        self._rdt_pending = None
        self._rdt_fs = fs
        self._rdt_settings = settings
        self._rdt_placer = placer_mod.Placer(
            fs, self._rdt_classes, opts.reserved_host_ways,
            opts.pmd_shared_ways, opts.pmd_cos, compaction=opts.compaction)
        self._rdt_adopt()
        self._rdt_reconcile(settings, fs)

    def _rdt_adopt(self) -> None:
        """Reservations back from the defined domains' metadata: a stopped
        instance keeps its ways across a restart, as Nova keeps its
        allocations."""
        try:
            guests = self._host.list_guests(only_running=False)
        except Exception as e:                      # pragma: no cover
            LOG.warning("nova-rdt: cannot list domains to re-reserve "
                        "their ways: %s", e)
            return
        adopted = []
        for guest in guests:
            try:
                md = guest_rdt.read_metadata(guest.get_xml_desc())
            except meta_mod.MetadataError as e:
                LOG.warning("nova-rdt: %s: unreadable nova-rdt metadata "
                            "(%s); its ways are not reserved", guest.name, e)
                continue
            except Exception:                       # pragma: no cover
                continue
            if md is None or not (md.cache or md.rdt_class):
                continue
            self._rdt_placer.adopt(guest.uuid, guest.name, md,
                                   movable=md.slo != "latency")
            adopted.append(guest.name)
        if adopted:
            LOG.info("nova-rdt: reserved the ways of defined domains %s",
                     ", ".join(sorted(adopted)))

    def _rdt_reconcile(self, settings: HookSettings, fs: Resctrl
                       ) -> dict | None:
        """What the hook could not see while nova-compute was down.

        A failure is logged, not raised: the host is prepared and can run
        instances; ``nova-rdt reconcile`` can be re-run by hand.
        """
        agent = agent_mod.Agent(
            settings, fs=fs,
            records=privsep_state.PrivilegedRecords(settings.state_path))
        try:
            report = dataclasses.asdict(agent.reconcile())
        except Exception as e:
            LOG.error("nova-rdt: reconcile at start-up failed: %s; run "
                      "'nova-rdt reconcile' once it is fixed", e)
            return None
        LOG.info("nova-rdt: reconciled: removed groups %s, dropped records "
                 "of %s, rejoined classes %s, re-created groups %s%s",
                 report["removed_groups"] or "none",
                 report["dropped_records"] or "none",
                 report["rejoined"] or "none",
                 report["restored_groups"] or "none",
                 f", {report['pmd']}" if report["pmd"] else "")
        if report["unreadable_records"]:
            LOG.warning("nova-rdt: unreadable state records: %s",
                        report["unreadable_records"])
        # Each degraded reason was logged once, as one line, by the agent.
        return report

    # -- host state ----------------------------------------------------

    @property
    def _rdt_libvirt_caps(self) -> libvirt_caps.LibvirtRdtCaps:
        """libvirt's view of the host's caches, read once it has one: on
        a host where resctrl came after libvirtd, it has none at first."""
        caps = self.__dict__.get("_rdt_caps_memo")
        if caps is None:
            conn = self._host.get_connection()
            caps = libvirt_caps.parse(conn.getCapabilities())
            if caps.banks:
                self.__dict__["_rdt_caps_memo"] = caps
        return caps

    @functools.cached_property
    def _rdt_classes(self) -> dict[str, rdtclass.RdtClass]:
        """``[rdt] classes``; none when they do not parse (said once)."""
        try:
            return rdtclass.parse_all(CONF.rdt.classes)
        except rdtclass.ClassDefinitionError as e:
            LOG.error("nova-rdt: %s; no rdt:class flavor can be placed on "
                      "this host until it is fixed", e)
            return {}

    def _rdt_host_cells(self) -> dict[int, frozenset[int]]:
        topo = self._host.get_capabilities().host.topology
        if topo is None:
            return {}
        return {cell.id: frozenset(c.id for c in cell.cpus)
                for cell in topo.cells}

    def _rdt_live(self) -> tuple[hoststate.HostRdtState,
                                 naming.LibvirtMachines] | None:
        """Live resctrl state and the domains libvirt already allocated
        (``domain name in`` the second asks libvirt's group names)."""
        if self._rdt_fs is None or self._rdt_degraded is not None:
            return None
        view = self._rdt_collect()
        if view is None:
            return None
        caps = self._rdt_libvirt_caps
        # Host cells and classes go with the state, so the filter can
        # match guest nodes to cache ids and refuse an unmakeable class.
        state = hoststate.from_resctrl(
            view, caps.cache_cpus or None, caps.way_sizes or None,
            host_cells=self._rdt_host_cells(),
            classes=self._rdt_classes, prefix=self._rdt_fs.prefix)
        names = claims_mod.libvirt_domain_names(
            g.name for g in view.groups if g.kind == "ctrl")
        return state, names

    def rdt_host_state(self) -> hoststate.HostRdtState | None:
        """What this host can still give: live state plus pending claims.

        None when resctrl is gone (unmounted, emulator dead): the host
        then publishes no RDT (:meth:`get_available_resource`) until
        resctrl answers again, when it is prepared and reconciled anew.
        """
        if self._rdt_pending is not None and not self._rdt_arrived():
            return None
        if self._rdt_degraded is not None and not self._rdt_back():
            return None
        live = self._rdt_live()
        if live is None:
            return None
        defined = None
        try:
            defined = {d.UUIDString() for d in
                       self._host.list_instance_domains(only_running=False)}
            gone = self._rdt_claims.forget_unless(defined, CLAIM_GRACE_S)
            if gone:
                LOG.info("nova-rdt: dropped stale claims of %s", gone)
        except Exception:                       # pragma: no cover
            LOG.debug("nova-rdt: cannot list domains", exc_info=True)
        state, _allocated = live
        if self._rdt_placer is not None:
            gone = self._rdt_placer.forget_unless(defined, CLAIM_GRACE_S)
            if gone:
                LOG.info("nova-rdt: dropped the reservations of undefined "
                         "domains %s", gone)
            return self._rdt_placer.effective(state)
        return state

    def _rdt_collect(self) -> HostView | None:
        """resctrl as it is now, or None once it is found gone.

        A walk can meet a group libvirt removes meanwhile (ENOENT on one
        file): that is read again, not taken for resctrl being lost."""
        for attempt in (1, 2):
            try:
                return HostView.collect(self._rdt_fs)
            except (rdt_errors.ResctrlError, OSError) as e:
                if attempt == 1 and not recovery.resctrl_lost(e):
                    continue
                self._rdt_lost(e)
        return None

    def _rdt_lost(self, e: BaseException) -> None:
        """resctrl stopped answering: said once, as one line."""
        if self._rdt_degraded is not None:
            return
        self._rdt_degraded = recovery.Degraded(
            "resctrl_unavailable",
            f"{CONF.rdt.resctrl_root}: {e}; this host places no RDT "
            f"instance until resctrl is back")
        LOG.error("%s", self._rdt_degraded.line())

    def _rdt_arrived(self) -> bool:
        """resctrl was not there at start: is it now?  Then the host is
        prepared, reconciled and offers RDT from this resource update on,
        without a restart of nova-compute."""
        fs, settings = self._rdt_pending
        try:
            fs.capabilities()
        except Exception as e:
            LOG.debug("nova-rdt: still no resctrl at %s: %s",
                      settings.resctrl_root, e)
            return False
        try:
            self._rdt_start(fs, settings)
        except exception.InvalidConfiguration as e:
            LOG.error("%s", e)
            return False
        LOG.info("nova-rdt: resctrl is mounted at %s; RDT offered from now",
                 settings.resctrl_root)
        return True

    def _rdt_back(self) -> bool:
        """resctrl answers again (remounted, possibly empty): prepare the
        host and reconcile, as at start, before offering RDT again."""
        fs, settings = self._rdt_fs, self._rdt_settings
        if fs is None or settings is None:
            return False
        try:
            host_prep.prepare(fs, CONF.rdt.reserved_host_ways,
                              CONF.rdt.pmd_shared_ways)
        except (host_prep.HostPrepError, rdt_errors.ResctrlError,
                OSError) as e:
            LOG.debug("nova-rdt: resctrl not back yet: %s", e)
            return False
        self._rdt_reconcile(settings, fs)
        LOG.info("nova-rdt: resctrl is back at %s; RDT offered again",
                 CONF.rdt.resctrl_root)
        self._rdt_degraded = None
        return True

    def get_available_resource(self, nodename):
        data = super().get_available_resource(nodename)
        state = self.rdt_host_state()
        if state is not None:
            data["stats"].update(state.to_stats())
            data["stats"][DEGRADED_STAT] = ""
        elif self._rdt_degraded is not None:
            # Nova's resource tracker merges stats into the old ones: an
            # absent key would leave the last good state published.  An
            # empty one reads as "no RDT" to RDTFilter.
            data["stats"][hoststate.STATS_KEY] = ""
            data["stats"][DEGRADED_STAT] = self._rdt_degraded.reason
        return data

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        super().update_provider_tree(provider_tree, nodename,
                                     allocations=allocations)
        state = self.rdt_host_state()
        ours = state.traits() if state else set()
        traits = set(provider_tree.data(nodename).traits)
        provider_tree.update_traits(
            nodename, (traits - set(hoststate.ALL_TRAITS)) | ours)

    # -- building domains ----------------------------------------------

    def _get_guest_config(self, instance, network_info, image_meta,
                          disk_info, rescue=None, block_device_info=None,
                          context=None, mdevs=None, accel_info=None,
                          share_info=None, old_guest=None):
        guest = super()._get_guest_config(
            instance, network_info, image_meta, disk_info, rescue=rescue,
            block_device_info=block_device_info, context=context,
            mdevs=mdevs, accel_info=accel_info, share_info=share_info,
            old_guest=old_guest)
        self._rdt_extend_guest(guest, instance)
        return guest

    def _rdt_request(self, instance) -> spec.RdtRequest | None:
        try:
            return guest_rdt.request_for(instance)
        except spec.SpecError as e:
            # Flavors set before the validators were installed, or through
            # an old microversion, can still carry a bad spec.  Another
            # host would read it the same way: abort, do not reschedule.
            raise exception.BuildAbortException(
                instance_uuid=instance.uuid,
                reason=f"invalid flavor extra spec {e.key}: {e.reason}"
            ) from None

    @staticmethod
    def _rdt_monitor_default(request) -> bool:
        """[rdt] monitor_default for an instance without rdt:monitor."""
        return {"none": False, "all": True,
                "rdt": request is not None}[CONF.rdt.monitor_default]

    def _rdt_extend_guest(self, guest, instance):
        request = self._rdt_request(instance)
        monitor_default = self._rdt_monitor_default(request)
        if request is None and not monitor_default:
            self._rdt_release(instance.uuid)
            return
        live = self._rdt_live()
        if live is None:
            self._rdt_refuse_or_ignore(instance, request,
                                       "this host has no resctrl (RDT)")
            return
        state, allocated = live
        try:
            d = guest_rdt.demand(request, instance.flavor.vcpus,
                                 instance.numa_topology, state,
                                 self._rdt_host_cells(), monitor_default)
        except planner.CannotHonour as e:
            self._rdt_refuse_or_ignore(instance, request, str(e))
            return
        plan = self._rdt_claim(instance, request, d, state, allocated,
                               exception.ComputeResourcesUnavailable)
        failpoints.hit("driver.after_claim")
        caches, mems = guest_rdt.tunes(d, state)
        if caches or mems:
            guest.cputune = rdt_config.LibvirtConfigGuestRdtCPUTune.extending(
                guest.cputune)
            guest.cputune.cachetunes = caches
            guest.cputune.memorytunes = mems
        meta = guest_rdt.metadata(request, d, state)
        # The decided positions travel with the domain: the hook writes
        # them for a start the driver does not see, and a restart of
        # nova-compute reserves them again.
        meta.masks = placer_mod.metadata_masks(
            plan.instances.get(instance.uuid))
        if request is not None and request.rdt_class:
            meta.class_masks = placer_mod.metadata_masks(
                plan.classes.get(request.rdt_class))
        guest.metadata.append(meta)
        LOG.info("nova-rdt: vCPUs %s get L3 %s, MB %s, monitor %s",
                 sorted(d.vcpus), dict(d.cache), dict(d.mb), d.monitor,
                 instance=instance)

    def _rdt_claim(self, instance, request, d, state, allocated, refuse,
                   dry_run=False):
        """Decide where ``d``'s ways go and reserve them, or raise
        ``refuse(reason=...)``: one path for spawns and live-migration
        destinations.  Returns the host's plan with them.

        The position is nova-rdt's (:mod:`nova_rdt.allocation.placement`),
        not a prediction of libvirt's: sharers next to the PMD COS,
        others and classes apart from it, a class not made yet costing
        its CLOS and ways.  Refused only when no valid placement exists.
        """
        sharing = bool(request is not None and request.pmd_share)
        rdt_class = request.rdt_class if request is not None else None
        slo = request.slo if request is not None else None
        if self._rdt_placer is None:
            raise refuse(reason="nova-rdt: this host has no resctrl (RDT)")
        try:
            plan = self._rdt_placer.claim(
                instance.uuid, instance.name, hostplan.ways_of(d.cache),
                pmd_share=sharing and CONF.rdt.pmd_cos, rdt_class=rdt_class,
                movable=slo != "latency", dry_run=dry_run)
        except placement.NoPlacement as e:
            raise refuse(reason=f"nova-rdt: {e}") from e
        except (rdt_errors.ResctrlError, OSError) as e:
            raise refuse(reason=f"nova-rdt: resctrl: {e}") from e
        if not dry_run:
            self._rdt_claims.record(instance.uuid, instance.name, d,
                                    sharing)
        return plan

    def _rdt_release(self, uuid: str) -> None:
        self._rdt_claims.release(uuid)
        if self._rdt_placer is not None:
            self._rdt_placer.release(uuid)

    def _rdt_refuse_or_ignore(self, instance, request, reason):
        if request is None:
            LOG.debug("nova-rdt: no monitoring: %s", reason,
                      instance=instance)
            return
        if CONF.rdt.missing_rdt_policy == "ignore":
            LOG.warning("nova-rdt: booting without the flavor's RDT "
                        "isolation: %s", reason, instance=instance)
            return
        raise exception.ComputeResourcesUnavailable(
            reason=f"nova-rdt: {reason}")

    def _create_guest(self, context, xml, instance, power_on=True,
                      pause=False, post_xml_callback=None):
        """Every start of a domain Nova builds: libvirt allocates from the
        ``<cachetune>`` sizes wherever it likes, then nova-rdt writes the
        decided masks into libvirt's group while the guest is paused, and
        only then lets it run.  Starts are serialised with placements, so
        one start's temporary ways never meet another's plan.  A failure
        to write leaves the guest paused and raises: never a VM running
        without the isolation its flavor asked for."""
        placer = self._rdt_placer
        if not (power_on or pause) or placer is None \
                or not self.rdt_enforce_on_create \
                or instance.uuid not in placer \
                or not placer.masks_of(instance.uuid):
            return super()._create_guest(
                context, xml, instance, power_on=power_on, pause=pause,
                post_xml_callback=post_xml_callback)
        with placer.starting():
            guest = super()._create_guest(
                context, xml, instance, power_on=power_on, pause=True,
                post_xml_callback=post_xml_callback)
            try:
                failpoints.hit("driver.before_enforce")
                group = placer.enforce(instance.uuid)
            except (placement.NoPlacement, rdt_errors.ResctrlError,
                    OSError) as e:
                LOG.error("nova-rdt: cannot write the decided masks: %s; "
                          "the guest is left paused", e, instance=instance)
                raise exception.InstanceUnacceptable(
                    instance_id=instance.uuid,
                    reason=f"nova-rdt: cannot apply its cache ways: {e}"
                ) from e
            LOG.debug("nova-rdt: masks of %s written before it runs",
                      group, instance=instance)
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

    # -- releasing claims ----------------------------------------------

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
            self._rdt_release(instance.uuid)

    def _cleanup_resize(self, context, instance, network_info):
        super()._cleanup_resize(context, instance, network_info)
        # On a resize to the same host the new domain is still defined
        # here and keeps its claim; otherwise the old one is gone.
        try:
            self._host.get_guest(instance)
        except exception.InstanceNotFound:
            self._rdt_release(instance.uuid)

    def confirm_migration(self, context, migration, instance, network_info):
        super().confirm_migration(context, migration, instance, network_info)
        # Runs on the source.  After a move the instance lives on the
        # destination, whatever is left of its old domain here (a
        # transient leftover, a failed undefine): its ways are not ours
        # to promise any more.
        if migration.source_compute != migration.dest_compute:
            self._rdt_release(instance.uuid)
