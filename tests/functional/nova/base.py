"""The Nova functional tests' base classes, which the lab's Nova cloud
shares (see :mod:`nova_rdt.lab.cloud.testbase`); here fakelibvirt gets
the test double of libvirt's allocator (:mod:`tests.libvirt_model`),
since no real libvirtd makes the groups in these tests."""

from nova_rdt.lab.cloud import testbase
from nova_rdt.lab.cloud.testbase import CapturedXML  # noqa: F401
from nova_rdt.lab.cloud.testbase import LibvirtMigrationMixin  # noqa: F401
from nova_rdt.lab.cloud.testbase import RdtHost  # noqa: F401
from nova_rdt.lab.cloud.testbase import libvirt_resctrl_caps  # noqa: F401
from nova_rdt.lab.cloud.testbase import register_rdt_opts  # noqa: F401
from tests import libvirt_model


class RdtServersTestBase(testbase.RdtServersTestBase):
    RDT_LIBVIRT_ALLOCATOR = libvirt_model


class RdtMigrationTestBase(testbase.RdtMigrationTestBase):
    RDT_LIBVIRT_ALLOCATOR = libvirt_model
