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
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import naming
from nova_rdt.allocation import planner
from nova_rdt.allocation import pmdplan
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

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
if "rdt" not in CONF:
    rdt_conf.register_opts(CONF)

# Claims of domains that never got defined are dropped after this long.
CLAIM_GRACE_S = 600.0
DEGRADED_STAT = hoststate.DEGRADED_STAT


class LibvirtRDTDriver(migration.LiveMigrationMixin,
                        libvirt_driver.LibvirtDriver):

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        self._rdt_fs: Resctrl | None = None
        self._rdt_claims = claims_mod.ClaimLedger()
        # Why this host offers no RDT right now (resctrl gone after a good
        # start); None while it is healthy.
        self._rdt_degraded: recovery.Degraded | None = None
        self._rdt_settings: HookSettings | None = None

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
                        "no RDT", opts.resctrl_root, e)
            return
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
        self._rdt_fs = fs
        self._rdt_settings = settings
        self._rdt_reconcile(settings, fs)

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

    @functools.cached_property
    def _rdt_libvirt_caps(self) -> libvirt_caps.LibvirtRdtCaps:
        conn = self._host.get_connection()
        return libvirt_caps.parse(conn.getCapabilities())

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
        if self._rdt_degraded is not None and not self._rdt_back():
            return None
        live = self._rdt_live()
        if live is None:
            return None
        try:
            defined = {d.UUIDString() for d in
                       self._host.list_instance_domains(only_running=False)}
            gone = self._rdt_claims.forget_unless(defined, CLAIM_GRACE_S)
            if gone:
                LOG.info("nova-rdt: dropped stale claims of %s", gone)
        except Exception:                       # pragma: no cover
            LOG.debug("nova-rdt: cannot list domains", exc_info=True)
        return self._rdt_claims.effective(*live)

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
            self._rdt_claims.release(instance.uuid)
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
        self._rdt_claim(instance, request, d, state, allocated,
                        exception.ComputeResourcesUnavailable)
        failpoints.hit("driver.after_claim")
        caches, mems = guest_rdt.tunes(d, state)
        if caches or mems:
            guest.cputune = rdt_config.LibvirtConfigGuestRdtCPUTune.extending(
                guest.cputune)
            guest.cputune.cachetunes = caches
            guest.cputune.memorytunes = mems
        guest.metadata.append(guest_rdt.metadata(request, d, state))
        LOG.info("nova-rdt: vCPUs %s get L3 %s, MB %s, monitor %s",
                 sorted(d.vcpus), dict(d.cache), dict(d.mb), d.monitor,
                 instance=instance)

    def _rdt_claim(self, instance, request, d, state, allocated, refuse):
        """Claim ``d`` for ``instance`` as a spawn does, PMD share
        included, or raise ``refuse(reason=...)``: one path for spawns and
        live-migration destinations."""
        sharing = bool(request is not None and request.pmd_share)
        try:
            masks = self._rdt_claims.claim(instance.uuid, instance.name, d,
                                           state, allocated, sharing)
        except planner.CannotHonour as e:
            raise refuse(reason=f"nova-rdt: {e}") from e
        why = self._rdt_pmd_refusal(instance.uuid, masks, sharing)
        if why:
            self._rdt_claims.release(instance.uuid)
            raise refuse(reason=f"nova-rdt: PMD COS: {why}")
        return masks

    def _rdt_pmd_refusal(self, uuid: str, masks, sharing: bool
                         ) -> str | None:
        """Why libvirt's predicted placement would break the PMD COS.

        The PMD mask must stay one run over the base and the sharing VMs
        only (:mod:`nova_rdt.allocation.pmdplan`); a boot that would make
        that impossible is refused here, so Nova reschedules, instead of
        leaving the hook a layout it cannot share with.
        """
        if not CONF.rdt.pmd_cos or not masks or self._rdt_fs is None:
            return None
        view = self._rdt_collect()
        if view is None:
            return "resctrl stopped answering"
        groups = {g.name: g for g in view.groups if g.kind == "ctrl"}
        pmd = groups.get(naming.pmd_group(self._rdt_fs.prefix))
        if pmd is None:
            return None
        root = groups.get("/")
        live, allocated = self._rdt_live() or (None, set())
        pending = []
        if live is not None:
            _state, placed = self._rdt_claims.placements(live, allocated,
                                                         exclude=uuid)
            pending = [m for c, m in placed if c.pmd_share]
        for cid, per in sorted(masks.items()):
            for kind, new in sorted(per.items()):
                res = pmdplan.RESOURCE_OF_KIND[kind]
                caps = view.caps.cache.get(res)
                if caps is None:
                    continue
                current = pmd.schemata.get(res, {}).get(cid, 0)
                if root is not None and \
                        current == root.schemata.get(res, {}).get(cid):
                    current = 0           # sharing only the host's ways
                claimed = 0
                for m in pending:
                    claimed |= m.get(cid, {}).get(kind, 0)
                why = pmdplan.refusal(
                    pmdplan.CacheRules(caps.cbm_len, caps.min_cbm_bits,
                                       caps.sparse_masks),
                    current, claimed, new, sharing)
                if why:
                    return f"{res} cache id {cid}: {why}"
        return None

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
            self._rdt_claims.release(instance.uuid)

    def _cleanup_resize(self, context, instance, network_info):
        super()._cleanup_resize(context, instance, network_info)
        # On a resize to the same host the new domain is still defined
        # here and keeps its claim; otherwise the old one is gone.
        try:
            self._host.get_guest(instance)
        except exception.InstanceNotFound:
            self._rdt_claims.release(instance.uuid)

    def confirm_migration(self, context, migration, instance, network_info):
        super().confirm_migration(context, migration, instance, network_info)
        # Runs on the source.  After a move the instance lives on the
        # destination, whatever is left of its old domain here (a
        # transient leftover, a failed undefine): its ways are not ours
        # to promise any more.
        if migration.source_compute != migration.dest_compute:
            self._rdt_claims.release(instance.uuid)
