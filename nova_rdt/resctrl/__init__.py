"""The resctrl library: nova-rdt's one way to the kernel's RDT interface.

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
