"""The resctrl library: nova-rdt's one way to the kernel's RDT interface.

* ``capabilities``: what the host offers, from ``info/`` and sysfs caches;
* ``capcache``: the capabilities, discovered once per mount;
* ``cbm``: capacity bitmask (CBM) arithmetic;
* ``cbmrules``: what a resource's masks may be, and the ways others hold;
* ``cpulist``: the kernel's cpulist syntax (``0-3,8``), read with bounds;
* ``errors``: typed resctrl errors, with errno and the kernel's words;
* ``groups``: resource groups: list, create, delete, configure;
* ``hostview``: a snapshot of one host's resctrl, and the way map;
* ``monitoring``: ``mon_data`` read and turned into safe rates;
* ``mounts``: ``/proc/self/mountinfo``, parsed;
* ``schemata``: the ``schemata`` file: parse, format and merge.

It imports nothing from Nova, so the hook, the agent and the exporter use
it as they are.
"""

from nova_rdt.resctrl.capabilities import Capabilities
from nova_rdt.resctrl.capabilities import discover
from nova_rdt.resctrl.errors import ResctrlError
from nova_rdt.resctrl.groups import Group
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata

__all__ = ["Capabilities", "Group", "Resctrl", "ResctrlError", "Schemata",
           "discover"]
