"""Privileged resctrl writes for nova-compute, through oslo.privsep.

nova-compute does not run as root; resctrl files are root's.  Reads need
no privilege, so only the writes cross into the privileged daemon, and
each entry point takes plain values and does one narrow job.
"""

from oslo_privsep import capabilities
from oslo_privsep import priv_context

from nova_rdt import hostprep
from nova_rdt.resctrl.groups import Resctrl

sys_admin_pctxt = priv_context.PrivContext(
    "nova_rdt",
    cfg_section="nova_rdt_privileged",
    pypath=__name__ + ".sys_admin_pctxt",
    # Writing root-owned resctrl files and mkdir/rmdir in the mount.
    capabilities=[capabilities.CAP_DAC_OVERRIDE, capabilities.CAP_FOWNER],
)


@sys_admin_pctxt.entrypoint
def prepare_host(root: str, sysfs_cpu: str, prefix: str,
                 lock_timeout: float, reserved_ways: int,
                 pmd_ways: int) -> dict:
    fs = Resctrl(root, prefix=prefix, sysfs_cpu=sysfs_cpu,
                 lock_timeout=lock_timeout)
    return hostprep.prepare(fs, int(reserved_ways), int(pmd_ways))


@sys_admin_pctxt.entrypoint
def reconcile_host(settings: dict) -> dict:
    """Run the host agent's reconcile (which re-syncs the PMD COS).

    ``settings`` is :class:`HookSettings` as a dict, resolved by the
    caller from its own configuration: the daemon reads no config files.
    """
    import dataclasses

    from nova_rdt.hook.agent import Agent
    from nova_rdt.hook.settings import HookSettings

    report = Agent(HookSettings.from_dict(settings)).reconcile()
    return dataclasses.asdict(report)
