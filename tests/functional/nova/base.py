"""The harness lives in the package (``nova-rdt lab`` uses it too)."""

from nova_rdt.lab.nova_harness import *  # noqa: F401,F403
from nova_rdt.lab.nova_harness import LibvirtMigrationMixin  # noqa: F401
from nova_rdt.lab.nova_harness import RdtHost  # noqa: F401
from nova_rdt.lab.nova_harness import libvirt_resctrl_caps  # noqa: F401
from nova_rdt.lab.nova_harness import register_rdt_opts  # noqa: F401
