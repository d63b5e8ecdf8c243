"""nova-rdt's privileged context for nova-compute, through oslo.privsep.

nova-compute does not run as root; resctrl files and the hook's state
directory are root's.  As in ``nova/privsep/``, the context is small and
each entry point does one privileged write with plain values:

* ``opts``: the context's options, for the configuration reference;
* ``resctrl``: write schemata, ``tasks`` or ``cpus_list``; mkdir, rmdir;
* ``state``: remove one of the hook's records.

Everything else (reading resctrl, planning, the resctrl ``flock``, asking
OVS for its PMD threads) runs unprivileged in nova-compute.  Each entry
point checks again, in the daemon, that its target is a resctrl file of
a group nova-rdt may change, decided from the resolved path's structure.
"""

from oslo_privsep import capabilities
from oslo_privsep import priv_context

sys_admin_pctxt = priv_context.PrivContext(
    "nova_rdt",
    cfg_section="nova_rdt_privileged",
    pypath=__name__ + ".sys_admin_pctxt",
    # Writing root-owned resctrl files, mkdir/rmdir in the mount, and
    # unlinking root-owned records.
    capabilities=[capabilities.CAP_DAC_OVERRIDE, capabilities.CAP_FOWNER],
)
