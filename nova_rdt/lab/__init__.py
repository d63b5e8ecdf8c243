"""The Host lab: a real NFV compute host in a temp directory.

libvirtd, QEMU/KVM, ovsdb-server and ovs-vswitchd-dpdk run for real; only
the RDT hardware is emulated (:mod:`nova_rdt.emulator`), unless the
machine has real resctrl.  Integration tests and ``nova-rdt lab`` build
on it.  See :mod:`nova_rdt.lab.host` for the steps.
"""

from nova_rdt.lab.host import Lab
from nova_rdt.lab.host import real_resctrl_present
from nova_rdt.lab.libvirtd import diskless_domain_xml
from nova_rdt.lab.procs import LabError

__all__ = ["Lab", "LabError", "diskless_domain_xml", "real_resctrl_present"]
