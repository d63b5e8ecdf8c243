"""The options of nova-rdt's privsep context, for the configuration
reference.

oslo.privsep registers them under the context's ``cfg_section``
(``[nova_rdt_privileged]``) when the context is made; its own
``list_opts`` names them ``[privsep]``.  This lists them under the name
nova-compute reads, from the context itself, so the two cannot drift.
"""

from __future__ import annotations

import copy


def list_opts():
    from oslo_config import cfg
    from oslo_privsep import priv_context

    from nova_rdt import privsep

    section = privsep.sys_admin_pctxt.cfg_section
    group = cfg.OptGroup(
        section, title="nova-rdt's privileged helper",
        help="How nova-compute starts nova-rdt's privsep daemon "
             "(nova_rdt.privsep.sys_admin_pctxt), which writes resctrl "
             "files and removes the hook's records as root with "
             "CAP_DAC_OVERRIDE and CAP_FOWNER only.  With helper_command "
             "unset, nova-compute starts it as 'sudo nova-rootwrap "
             "<[DEFAULT] rootwrap_config> privsep-helper ...' (Nova's "
             "root helper), which etc/nova/rootwrap.d/nova-rdt.filters "
             "allows; 'nova-rdt status upgrade check' asks rootwrap "
             "whether it would.  These are oslo.privsep's options, set "
             "in nova.conf on computes.")
    return [(group, copy.deepcopy(priv_context.OPTS))]
