"""The Nova functional tests' base classes, which the lab's Nova cloud
shares: see :mod:`nova_rdt.lab.cloud.testbase`."""

from nova_rdt.lab.cloud.testbase import CapturedXML  # noqa: F401
from nova_rdt.lab.cloud.testbase import LibvirtMigrationMixin  # noqa: F401
from nova_rdt.lab.cloud.testbase import RdtHost  # noqa: F401
from nova_rdt.lab.cloud.testbase import RdtMigrationTestBase  # noqa: F401
from nova_rdt.lab.cloud.testbase import RdtServersTestBase  # noqa: F401
from nova_rdt.lab.cloud.testbase import libvirt_resctrl_caps  # noqa: F401
from nova_rdt.lab.cloud.testbase import register_rdt_opts  # noqa: F401
