"""The host agent: what the hook, ``nova-rdt`` and nova-compute call.

Called by the hook on libvirt's events, by ``nova-rdt pmd sync`` and
``nova-rdt reconcile``, and by the driver at start.  A facade over the
agent's parts, each with one job:

* :mod:`~nova_rdt.host.lifecycle`: a managed domain's events (prepare,
  started/reconnect, release);
* :mod:`~nova_rdt.host.domaingroup`: what libvirt's group of a domain
  gets beyond libvirt's writes (decided masks, a placement here, MBps);
* :mod:`~nova_rdt.host.classes`: class groups;
* :mod:`~nova_rdt.host.pmdcos`: the PMD COS;
* :mod:`~nova_rdt.host.reconcile`: reconcile.

Every change happens under the resctrl ``flock`` that libvirt's
allocator also takes, so libvirt never sees a half-updated mask.  It
never calls libvirt.
"""

from __future__ import annotations

from nova_rdt.allocation import pmdplan
from nova_rdt.allocation import rdtclass
from nova_rdt.host import classes as classes_mod
from nova_rdt.host import context
from nova_rdt.host import domaingroup
from nova_rdt.host import lifecycle
from nova_rdt.host import pmdcos
from nova_rdt.host import reconcile as reconcile_mod
from nova_rdt.host import records as records_mod
from nova_rdt.host.events import HookEvent
from nova_rdt.host.pmdcos import pmd_cache_ids
from nova_rdt.host.reconcile import ReconcileReport
from nova_rdt.host.settings import HookSettings
from nova_rdt.resctrl.groups import Resctrl

# Imported from here by the hook, the commands, the driver and the lab.
__all__ = ["Agent", "ReconcileReport", "pmd_cache_ids"]


class Agent:
    """The agent's parts over one host, as its callers use them.

    ``settings``, ``fs`` and ``records`` are read by reconcile's adoption
    and the commands; the parts themselves stay private.
    """

    def __init__(self, settings: HookSettings, fs: Resctrl | None = None,
                 records: records_mod.Records | None = None):
        """``fs`` and ``records`` default to direct access (the hook runs
        as root); nova-compute passes privsep-backed ones."""
        self.settings = settings
        self.fs = fs or Resctrl(settings.resctrl_root,
                                prefix=settings.group_prefix,
                                sysfs_cpu=settings.sysfs_cpu_root,
                                lock_timeout=settings.lock_timeout)
        self.records = records or records_mod.Records(settings.state_path)
        host = context.HostContext(settings, self.fs, self.records,
                                   rdtclass.parse_all(settings.classes))
        class_groups = classes_mod.ClassGroups(host)
        self._pmd = pmdcos.PmdCos(host)
        self._lifecycle = lifecycle.DomainLifecycle(
            host, domaingroup.DomainGroup(host), class_groups, self._pmd)
        self._reconciler = reconcile_mod.Reconciler(host, class_groups,
                                                    self._pmd)

    @property
    def last_pmd_plan(self) -> pmdplan.PmdPlan | None:
        """The plan of the last PMD COS sync, for ``nova-rdt pmd sync``."""
        return self._pmd.last_plan

    # -- events ----------------------------------------------------------

    def handle(self, event: HookEvent) -> None:
        self._lifecycle.handle(event)

    def started(self, event: HookEvent) -> None:
        """``started`` alone, for reconcile's adoption of a running domain
        the hook has no record of (:mod:`nova_rdt.hook.adopt`)."""
        self._lifecycle.started(event)

    # -- the PMD COS -----------------------------------------------------

    def sync_pmd(self, cores: set[int] | None = None,
                 prepared_only: bool = False) -> str:
        """``nova-rdt pmd sync`` (``cores``: the PMD cores, asked of OVS
        when not given)."""
        return self._pmd.sync(cores, prepared_only=prepared_only)

    # -- reconcile -------------------------------------------------------

    def reconcile(self) -> ReconcileReport:
        return self._reconciler.reconcile()
