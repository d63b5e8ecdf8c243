"""The RDT side of one compute: everything LibvirtRDTDriver adds to Nova.

:class:`RdtCompute` is composed by the driver (as Nova's driver composes
its :class:`nova.virt.libvirt.host.Host`); the driver's overrides are
short delegations to it.  It owns:

* host preparation at start (through privsep), then a reconcile; a host
  that starts without resctrl picks RDT up once it is mounted, and one
  whose resctrl goes away offers none until it is back
  (doc/source/recovery.rst);
* the host's published state (``rdt`` stat and ``CUSTOM_RDT_*`` traits);
* each domain's RDT elements, decided once before its config is built
  (:meth:`RdtCompute.decide_guest`, from the driver's ``_get_guest_xml``)
  against live resctrl plus every reservation, with positions decided by
  :mod:`nova_rdt.virt.placer`, then only rendered into the config;
* the write of the decided masks while a new domain is paused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools

from nova import context as nova_context
from nova import exception
from nova import objects
from oslo_config import cfg
from oslo_log import log as logging

from nova_rdt import conf as rdt_conf
from nova_rdt import failpoints
from nova_rdt import naming
from nova_rdt.allocation import hostplan
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import metadata as meta_mod
from nova_rdt.allocation import placement
from nova_rdt.allocation import planner
from nova_rdt.allocation import spec
from nova_rdt.host import agent as agent_mod
from nova_rdt.host import context as host_context
from nova_rdt.host import prep as host_prep
from nova_rdt.host import records as records_mod
from nova_rdt.host import recovery
from nova_rdt.host import rooms as rooms_mod
from nova_rdt.host.settings import HookSettings
from nova_rdt.privsep import resctrl as privsep_resctrl
from nova_rdt.privsep import state as privsep_state
from nova_rdt.resctrl import errors as rdt_errors
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.virt import config as rdt_config
from nova_rdt.virt import guest_rdt
from nova_rdt.virt import libvirt_caps
from nova_rdt.virt import placer as placer_mod
from nova_rdt.virt import publish as publish_mod

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
if "rdt" not in CONF:
    rdt_conf.register_opts(CONF)

# Claims of domains that never got defined are dropped after this long.
CLAIM_GRACE_S = 600.0
DEGRADED_STAT = hoststate.DEGRADED_STAT


@dataclasses.dataclass(frozen=True)
class ComputeOptions:
    """The ``[rdt]`` options only nova-compute reads; those it shares
    with the hook it takes from :class:`HookSettings` (made at
    ``init_host``).  Read here only, and at each use, as Nova's driver
    reads its own: a change (a test's ``flags()``) holds at once."""

    require_resctrl: bool
    compaction: bool
    monitor_default: str
    missing_rdt_policy: str

    @classmethod
    def now(cls) -> ComputeOptions:
        r = CONF.rdt
        return cls(require_resctrl=r.require_resctrl,
                   compaction=r.compaction,
                   monitor_default=r.monitor_default,
                   missing_rdt_policy=r.missing_rdt_policy)


def _precheck_error(host: str, reason: str
                    ) -> exception.MigrationPreCheckError:
    return exception.MigrationPreCheckError(
        reason=f"{reason} ({host} refuses the incoming instance)")


@dataclasses.dataclass(frozen=True)
class GuestDecision:
    """One domain's RDT, decided once before its config is built."""

    request: spec.RdtRequest | None
    demand: planner.Demand
    state: hoststate.HostRdtState
    plan: placement.Plan


class RdtCompute:
    """The RDT state and decisions of one nova-compute."""

    #: Write the decided masks while the new domain is paused.  Off only
    #: in the Host lab, where Nova's driver talks to a stand-in libvirt
    #: and the real libvirtd starts the domain later: the hook writes
    #: them there.
    enforce_on_create = True

    def __init__(self, host, virtapi=None):
        self.host = host                    # Nova's libvirt Host
        # Nova's ComputeVirtAPI: reaches the resource tracker, so that a
        # claim or a release is published at once (nova_rdt.virt.publish).
        self.virtapi = virtapi
        self.fs: Resctrl | None = None
        # A host that started without resctrl ([rdt] require_resctrl =
        # False): its library and settings, to look again periodically.
        self._pending: tuple[Resctrl, HookSettings] | None = None
        # Why this host offers no RDT right now (resctrl gone after a good
        # start); None while it is healthy.
        self.degraded: recovery.Degraded | None = None
        self.settings: HookSettings | None = None
        # Where every instance's ways go: decided, reserved, enforced.
        self.placer: placer_mod.Placer | None = None
        # Instances this compute released whose domains may linger (a
        # live migration's source until Nova cleans it up): never
        # adopted back.  Forgotten once their domain is undefined.
        self._released: set[str] = set()
        # Live migrations reserved here and not arrived yet: their decided
        # masks are published for the source (INCOMING_STAT).
        self._incoming: set[str] = set()
        # decide_guest's decisions, until the config they go into is built.
        self._decisions: dict[str, GuestDecision] = {}

    # -- host preparation ----------------------------------------------

    def init_host(self):
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
            root = settings.resctrl_root
            if ComputeOptions.now().require_resctrl:
                raise exception.InvalidConfiguration(
                    f"nova-rdt: resctrl is not usable at {root} ({e}); "
                    f"mount it (mount -t resctrl resctrl {root}) or set "
                    f"[rdt] require_resctrl=False to run this host without "
                    f"RDT") from e
            LOG.warning("nova-rdt: no resctrl at %s (%s); this host offers "
                        "no RDT until it is mounted (looked for at every "
                        "resource update)", root, e)
            # Kept, to look again from the periodic task.
            self._pending = (fs, settings)
            return
        self._start(fs, settings)


    def _start(self, fs: Resctrl, settings: HookSettings) -> None:
        """Prepare the host's resctrl, then offer RDT: at start, or once
        resctrl is mounted on a host that started without it."""
        try:
            summary = host_prep.prepare(fs, settings.reserved_host_ways,
                                        settings.pmd_shared_ways)
        except (host_prep.HostPrepError, rdt_errors.ResctrlError,
                OSError) as e:
            # ResctrlError carries the kernel's last_cmd_status.
            raise exception.InvalidConfiguration(
                f"nova-rdt: cannot prepare the host's resctrl: {e}") from e
        LOG.info("nova-rdt: host prepared: root %s, PMD %s, %s ways per "
                 "cache id for instances", summary["root"],
                 summary["pmd"] or "-", summary["managed_ways"])
        self._pending = None
        self.fs = fs
        self.settings = settings
        opts = ComputeOptions.now()
        pending = rooms_mod.Pending(settings.state_path,
                                    settings.libvirt_qemu_run_dir,
                                    settings.hook_timeout)
        records = records_mod.Records(settings.state_path)
        self.placer = placer_mod.Placer(
            fs, settings.parsed_classes(), settings.reserved_host_ways,
            settings.pmd_shared_ways, settings.pmd_cos,
            compaction=opts.compaction, collect=host_context.collect,
            monitor_rdt=opts.monitor_default in ("all", "rdt"),
            rooms=lambda: pending.pending_starts(records))
        self._adopt(nova_says=self._instances_here())
        self._reconcile(settings, fs)


    def _host_name(self) -> str:
        compute = getattr(self.virtapi, "_compute", None)
        return getattr(compute, "host", None) or CONF.host

    def _instances_here(self) -> set[str] | None:
        """The instances Nova places on this host (None: unknown, and then
        every nova-rdt domain counts: the side of isolation)."""
        try:
            return {i.uuid for i in objects.InstanceList.get_by_host(
                nova_context.get_admin_context(), self._host_name())}
        except Exception as e:
            LOG.warning("nova-rdt: cannot ask Nova which instances are on "
                        "this host (%s); every nova-rdt domain defined here "
                        "keeps its ways", e)
            return None

    def _adopt(self, only_running: bool = False,
               nova_says: set[str] | None = None) -> None:
        """Reservations from the defined domains' metadata, for those the
        book does not hold: at start (a stopped instance keeps its ways
        across a restart, as Nova keeps its allocations), and before each
        start (a nova-rdt domain started by hand is
        then a sharer or a neighbour like any other, not a foreign
        group: ``only_running``, so that what was released -- a domain
        that migrated away, not undefined yet -- is not taken back).
        ``nova_says``: at start, only the instances Nova places here (a
        domain left defined by a live migration away is not)."""
        try:
            guests = self.host.list_guests(only_running=only_running)
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
            if md is None or not (md.cache or md.rdt_class) \
                    or guest.uuid in self.placer \
                    or guest.uuid in self._released \
                    or (nova_says is not None
                        and guest.uuid not in nova_says):
                continue
            self.placer.adopt(guest.uuid, guest.name, md,
                              movable=md.slo != "latency")
            adopted.append(guest.name)
        if adopted:
            LOG.info("nova-rdt: reserved the ways of defined domains %s",
                     ", ".join(sorted(adopted)))

    def _reconcile(self, settings: HookSettings, fs: Resctrl
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


    @property
    def libvirt_rdt_caps(self) -> libvirt_caps.LibvirtRdtCaps:
        """libvirt's view of the host's caches, read once it has one: on
        a host where resctrl came after libvirtd, it has none at first."""
        caps = self.__dict__.get("_caps_memo")
        if caps is None:
            conn = self.host.get_connection()
            caps = libvirt_caps.parse(conn.getCapabilities())
            if caps.banks:
                self.__dict__["_caps_memo"] = caps
        return caps


    def host_cells(self) -> dict[int, frozenset[int]]:
        topo = self.host.get_capabilities().host.topology
        if topo is None:
            return {}
        return {cell.id: frozenset(c.id for c in cell.cpus)
                for cell in topo.cells}


    def live(self) -> tuple[hoststate.HostRdtState,
                                 naming.LibvirtMachines] | None:
        """Live resctrl state and the domains libvirt already allocated
        (``domain name in`` the second asks libvirt's group names)."""
        got = self.snapshot()
        return None if got is None else got[1:]

    def snapshot(self) -> tuple[HostView, hoststate.HostRdtState,
                                naming.LibvirtMachines] | None:
        """One walk of resctrl for one operation: the view, the state it
        gives and libvirt's groups in it."""
        if self.fs is None or self.degraded is not None:
            return None
        view = self._collect()
        if view is None:
            return None
        state = self.placer.state_of(view, *self._libvirt_view())
        names = naming.LibvirtMachines(
            g.name for g in view.groups if g.kind == "ctrl")
        return view, state, names

    def _libvirt_view(self):
        """libvirt's cache CPUs and way sizes (it validates sizes against
        its own granularity) and the host cells, which go with the state
        so the filter can match guest nodes to cache ids."""
        caps = self.libvirt_rdt_caps
        return (caps.cache_cpus or None, caps.way_sizes or None,
                self.host_cells())


    def host_state(self, view: HostView | None = None
                   ) -> hoststate.HostRdtState | None:
        """What this host can still give: live state plus pending claims.

        None when resctrl is gone (unmounted, emulator dead): the host
        then publishes no RDT (:meth:`get_available_resource`) until
        resctrl answers again, when it is prepared and reconciled anew.
        ``view``: the operation's own walk of resctrl, when it changed
        only the book since (a claim), instead of another walk.
        """
        if self._pending is not None and not self._arrived():
            return None
        if self.degraded is not None and not self._back():
            return None
        if self.fs is None:
            return None
        if view is None:
            view = self._collect()
        if view is None:
            return None
        self._forget_failed_incoming()
        defined = None
        try:
            defined = {d.UUIDString() for d in
                       self.host.list_instance_domains(only_running=False)}
        except Exception:                       # pragma: no cover
            LOG.debug("nova-rdt: cannot list domains", exc_info=True)
        if defined is not None:
            self._released &= defined
        gone = self.placer.forget_unless(defined, CLAIM_GRACE_S)
        if gone:
            LOG.info("nova-rdt: dropped the reservations of undefined "
                     "domains %s", gone)
        return self.placer.published(view, *self._libvirt_view())


    def _collect(self) -> HostView | None:
        """resctrl as it is now, or None once it is found gone.

        A walk can meet a group libvirt removes meanwhile (ENOENT on one
        file): that is read again, not taken for resctrl being lost."""
        for attempt in (1, 2):
            try:
                return host_context.collect(self.fs)
            except (rdt_errors.ResctrlError, OSError) as e:
                if attempt == 1 and not recovery.resctrl_lost(e):
                    continue
                self._lost(e)
        return None


    def _lost(self, e: BaseException) -> None:
        """resctrl stopped answering: said once, as one line."""
        if self.degraded is not None:
            return
        self.degraded = recovery.Degraded(
            "resctrl_unavailable",
            f"{self.fs.root if self.fs else '?'}: {e}; this host places "
            f"no RDT instance until resctrl is back")
        LOG.error("%s", self.degraded.line())


    def _arrived(self) -> bool:
        """resctrl was not there at start: is it now?  Then the host is
        prepared, reconciled and offers RDT from this resource update on,
        without a restart of nova-compute."""
        fs, settings = self._pending
        try:
            fs.capabilities()
        except Exception as e:
            LOG.debug("nova-rdt: still no resctrl at %s: %s",
                      settings.resctrl_root, e)
            return False
        try:
            self._start(fs, settings)
        except exception.InvalidConfiguration as e:
            LOG.error("%s", e)
            return False
        LOG.info("nova-rdt: resctrl is mounted at %s; RDT offered from now",
                 settings.resctrl_root)
        return True


    def _back(self) -> bool:
        """resctrl answers again (remounted, possibly empty): prepare the
        host and reconcile, as at start, before offering RDT again."""
        fs, settings = self.fs, self.settings
        if fs is None or settings is None:
            return False
        try:
            host_prep.prepare(fs, settings.reserved_host_ways,
                              settings.pmd_shared_ways)
        except (host_prep.HostPrepError, rdt_errors.ResctrlError,
                OSError) as e:
            LOG.debug("nova-rdt: resctrl not back yet: %s", e)
            return False
        self._reconcile(settings, fs)
        LOG.info("nova-rdt: resctrl is back at %s; RDT offered again",
                 settings.resctrl_root)
        self.degraded = None
        return True


    def request(self, instance) -> spec.RdtRequest | None:
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
    def monitor_default(request) -> bool:
        """[rdt] monitor_default for an instance without rdt:monitor."""
        return {"none": False, "all": True, "rdt": request is not None}[
            ComputeOptions.now().monitor_default]


    def decide_guest(self, instance) -> None:
        """The one decision for the domain about to be built: its demand
        and the plan that reserves its ways, made before Nova builds the
        config (the driver's ``_get_guest_xml``), so that building it has
        no side effect.  Raises the refusal; :meth:`extend_guest` renders
        what was decided."""
        self._decisions.pop(instance.uuid, None)
        request = self.request(instance)
        if request is None and not self.monitor_default(request):
            self.release(instance.uuid)
            return
        live = self.snapshot()
        if live is None:
            self._refuse_or_ignore(instance, request,
                                   "this host has no resctrl (RDT)")
            return
        view, state, allocated = live
        try:
            d, plan = self.decide(instance, request, instance.numa_topology,
                                  state, allocated, self.host_cells(),
                                  exception.ComputeResourcesUnavailable,
                                  view=view)
        except planner.CannotHonour as e:
            self._refuse_or_ignore(instance, request, str(e))
            return
        failpoints.hit("driver.after_claim")
        self._decisions[instance.uuid] = GuestDecision(request, d, state,
                                                       plan)

    def extend_guest(self, guest, instance):
        """The domain's RDT elements and metadata, as
        :meth:`decide_guest` decided them (nothing when it decided none)."""
        decided = self._decisions.pop(instance.uuid, None)
        if decided is None:
            return
        request, d, state, plan = (decided.request, decided.demand,
                                   decided.state, decided.plan)
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

    def decide(self, instance, request, topology, state, allocated,
               host_cells, refuse, dry_run=False, view=None):
        """The compute's one decision for ``instance`` with Nova's NUMA
        ``topology`` (its pinning included) on ``state``: its demand, and
        the host's plan with it reserved (only decided, with
        ``dry_run``).  Raises planner.CannotHonour when the host cannot
        give what the request asks at all, ``refuse(reason=...)`` when
        there is no room."""
        d = guest_rdt.demand(request, instance.flavor.vcpus, topology,
                             state, host_cells,
                             self.monitor_default(request))
        return d, self.claim(instance, request, d, state, allocated,
                             refuse, dry_run=dry_run, view=view)

    def claim(self, instance, request, d, state, allocated, refuse,
                   dry_run=False, view=None):
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
        if self.placer is None:
            raise refuse(reason="nova-rdt: this host has no resctrl (RDT)")
        try:
            # Every new group takes an RMID on a monitoring host (mkdir:
            # "Out of RMIDs"); the planner counts ways and CLOS only.
            eff = self.placer.effective(state, exclude=instance.uuid,
                                        view=view)
            if (d.needs_clos or d.monitor) and eff.mon_capable \
                    and eff.rmids_free < 1 and instance.name not in allocated:
                raise refuse(reason="nova-rdt: no free RMID (monitoring "
                                    "ID) left on this host")
            cls = (eff.classes or {}).get(rdt_class) if rdt_class else None
            why = eff.class_problem(cls) \
                if cls is not None and not cls.exists else None
            if why:
                raise refuse(reason=f"nova-rdt: rdt:class={rdt_class}: its "
                                    f"group cannot be made: {why}")
            plan = self.placer.claim(
                instance.uuid, instance.name, hostplan.ways_of(d.cache),
                pmd_share=sharing and self.placer.pmd_cos,
                rdt_class=rdt_class,
                movable=slo != "latency", dry_run=dry_run,
                mb_only=bool(d.mb) and not d.cache and rdt_class is None,
                monitor=d.monitor, view=view)
        except placement.NoPlacement as e:
            raise refuse(reason=f"nova-rdt: {e}") from e
        except (rdt_errors.ResctrlError, OSError) as e:
            raise refuse(reason=f"nova-rdt: resctrl: {e}") from e
        if not dry_run:
            self._released.discard(instance.uuid)
            # resctrl is as this operation read it; only the book changed.
            self.publish(view)
        return plan

    def release(self, uuid: str) -> None:
        self._released.add(uuid)
        self._incoming.discard(uuid)
        if self.placer is not None and self.placer.release(uuid):
            self.publish()

    def reserved(self) -> set[str]:
        """The instances holding a reservation here (claimed, running,
        stopped, or arriving by live migration)."""
        return self.placer.uuids() if self.placer is not None else set()

    def publish(self, view: HostView | None = None) -> None:
        """The host's new state to the scheduler now, not at the next
        periodic task.  Never from inside the resource tracker's own calls
        (get_available_resource, update_provider_tree), which hold its
        lock: only from a claim or a release made on Nova's build, delete
        and move paths."""
        if self.virtapi is not None:
            publish_mod.publish(
                self.virtapi, lambda: self._stats(self.host_state(view)))


    def _refuse_or_ignore(self, instance, request, reason):
        if request is None:
            LOG.debug("nova-rdt: no monitoring: %s", reason,
                      instance=instance)
            return
        if ComputeOptions.now().missing_rdt_policy == "ignore":
            LOG.warning("nova-rdt: booting without the flavor's RDT "
                        "isolation: %s", reason, instance=instance)
            return
        raise exception.ComputeResourcesUnavailable(
            reason=f"nova-rdt: {reason}")


    # -- live migration ------------------------------------------------

    def destination_claim(self, instance, topology, dry_run=False):
        """Plan ``instance`` here as a spawn would, PMD share included;
        reserve its ways unless ``dry_run``.  Raises
        MigrationPreCheckError naming what this host cannot give."""
        request = self.request(instance)
        if request is None:
            return
        live = self.live()
        if live is None:
            if ComputeOptions.now().missing_rdt_policy == "ignore":
                return
            raise exception.MigrationPreCheckError(
                reason=f"nova-rdt: {self._host_name()} has no resctrl (RDT)")
        state, allocated = live
        try:
            d = guest_rdt.demand(request, instance.flavor.vcpus, topology,
                                 state, self.host_cells(),
                                 self.monitor_default(request))
        except planner.CannotHonour as e:
            raise exception.MigrationPreCheckError(
                reason=f"nova-rdt: {self._host_name()} cannot honour the "
                       f"instance's RDT request: {e}") from e
        if not dry_run:
            # Before the claim publishes: the source reads the decided
            # masks from what this host publishes.
            self._incoming.add(instance.uuid)
        try:
            self.claim(instance, request, d, state, allocated,
                       functools.partial(_precheck_error, self._host_name()),
                       dry_run=dry_run)
        except BaseException:
            if not dry_run:
                self._incoming.discard(instance.uuid)
            raise

    def destination_xml(self, context, instance, dest, xml):
        request = self.request(instance)
        # Before any database read: an instance without RDT must migrate
        # exactly as with Nova's own driver, and a read here, inside
        # Nova's migration path, was seen to deadlock its test fixtures'
        # cell lock against a periodic task.
        if request is None and not self.monitor_default(None):
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
                                 self.monitor_default(request))
        except planner.CannotHonour as e:
            # The destination's claim passed, but its published state has
            # changed since (a class undefined, ways taken): stop here
            # rather than hand libvirt XML it would refuse.
            raise exception.MigrationError(
                reason=f"nova-rdt: {dest} can no longer honour the "
                       f"instance's RDT request: {e}") from e
        caches, mems = guest_rdt.tunes(d, state)
        meta = guest_rdt.metadata(request, d, state)
        # The destination decided where the ways go when it reserved them
        # (pre_live_migration, before this); its hook writes them before
        # the migrated guest runs.  An older destination publishes none:
        # its hook then places the domain itself.
        meta.masks = hoststate.incoming_masks(node.stats, instance.uuid)
        LOG.info("nova-rdt: destination %s gets L3 %s at %s, MB %s", dest,
                 dict(d.cache), {k: hex(m) for k, m in meta.masks.items()}
                 or "its hook's choice", dict(d.mb), instance=instance)
        return guest_rdt.rewrite_xml(xml, caches + mems, meta)

    def arrived(self, instance) -> None:
        """A live migration landed here.  Its hook wrote the decided masks
        the source put in the XML, when they were still safe; written
        again here in case they were not (a source too old to carry them,
        a neighbour in the way)."""
        if instance.uuid in self._incoming:
            self._incoming.discard(instance.uuid)
            self.publish()
        if self.placer is None or not self.placer.masks_of(instance.uuid):
            return
        try:
            group = self.placer.enforce(instance.uuid)
        except (placement.NoPlacement, rdt_errors.ResctrlError,
                OSError) as e:
            LOG.error("nova-rdt: the migrated instance keeps libvirt's "
                      "ways, not its decided ones: %s", e,
                      instance=instance)
            return
        LOG.info("nova-rdt: decided masks of the arrived instance written "
                 "into %s", group, instance=instance)

    # -- what the host publishes ---------------------------------------

    def stats(self) -> dict[str, str]:
        """The ``rdt`` and ``rdt_degraded`` stats to merge into the compute
        node's; none for a host that never had resctrl."""
        return self._stats(self.host_state())

    def stats_and_traits(self) -> tuple[dict[str, str], set[str]]:
        """:meth:`stats` and the host's ``CUSTOM_RDT_*`` traits, from one
        look at the host."""
        state = self.host_state()
        return self._stats(state), state.traits() if state else set()

    def _stats(self, state: hoststate.HostRdtState | None
               ) -> dict[str, str]:
        if state is not None:
            return {**state.to_stats(), DEGRADED_STAT: "",
                    hoststate.INCOMING_STAT: self._incoming_stat()}
        if self.degraded is not None:
            # Nova's resource tracker merges stats into the old ones: an
            # absent key would leave the last good state published.  An
            # empty one reads as "no RDT" to RDTFilter.
            return {hoststate.STATS_KEY: "",
                    DEGRADED_STAT: self.degraded.reason,
                    hoststate.INCOMING_STAT: ""}
        return {}

    def _forget_failed_incoming(self) -> None:
        """Release the live migrations reserved here that Nova no longer
        runs.  A plain instance's migration that fails on the source, with
        a shared instance path, reaches neither
        rollback_live_migration_at_destination nor
        drop_move_claim_at_destination (Nova calls the latter only for
        NUMA instances): without this, its ways stayed reserved here for
        CLAIM_GRACE_S."""
        if not self._incoming:
            return
        me = self._host_name()
        ctxt = nova_context.get_admin_context()
        for uuid in sorted(self._incoming):
            try:
                running = objects.MigrationList.get_in_progress_by_instance(
                    ctxt, uuid, "live-migration")
            except Exception:
                LOG.debug("nova-rdt: cannot read the migrations of %s",
                          uuid, exc_info=True)
                continue
            if any(m.dest_compute == me for m in running):
                continue
            self._incoming.discard(uuid)
            self._released.add(uuid)
            if self.placer is not None and self.placer.release(uuid):
                LOG.info("nova-rdt: the live migration of %s to this host "
                         "ended without it; its reservation is released",
                         uuid)

    def _incoming_stat(self) -> str:
        placer = self.placer
        if placer is None:
            return ""
        masks = {}
        for uuid in sorted(self._incoming):
            decided = placer.masks_of(uuid)
            if decided:
                masks[uuid] = placer_mod.by_kind(decided)
        return hoststate.incoming_stat(masks)

    # -- starting domains ----------------------------------------------

    def decides(self, instance) -> bool:
        """Whether a start of ``instance`` must wait for its masks, or
        be serialised with the starts that do (a class member: its
        class group goes where the plan put it)."""
        return (self.enforce_on_create and self.placer is not None
                and self.placer.lays_out(instance.uuid))

    @contextlib.contextmanager
    def starting(self, instance):
        """Around a domain's creation, started paused: then its decided
        masks are written into libvirt's group, before it runs.  Starts
        are serialised with placements, so one start's temporary ways
        never meet another's plan.  A failure to write raises with the
        guest still paused: never a VM running without the isolation its
        flavor asked for."""
        assert self.placer is not None
        with self.placer.starting():
            self._adopt(only_running=True)
            try:
                self.placer.make_room(instance.uuid)
            except (placement.NoPlacement, rdt_errors.ResctrlError,
                    OSError) as e:
                raise exception.InstanceUnacceptable(
                    instance_id=instance.uuid,
                    reason=f"nova-rdt: cannot make room for its cache "
                           f"ways: {e}") from e
            yield
            try:
                failpoints.hit("driver.before_enforce")
                group, seen = self.placer.enforce_seen(instance.uuid)
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
        # Its group exists now, at its decided masks (and the PMD COS
        # spans a sharer's): published from the walk enforce read, with
        # its writes laid over it.
        self.publish(seen)
