"""The Host lab: a real NFV compute host in a temp directory.

libvirtd, QEMU/KVM, ovsdb-server and ovs-vswitchd-dpdk run for real; only
the RDT hardware is emulated (:mod:`nova_rdt.emulator`), unless the
machine has real resctrl.  Integration tests and ``nova-rdt lab`` build
on it.

* ``allinone``: ``--scenario cloud``: an all-in-one cloud of real processes;
* ``cloud``: Nova's functional framework on hosts that look like RDT hosts;
* ``demo``: ``nova-rdt lab``: the whole of nova-rdt on one machine;
* ``faults``: ``--scenario faults``: failpoints and host faults, recovered;
* ``guest``: the lab's real Linux guest: a forwarder or a noisy neighbour;
* ``host``: the Host lab itself, and the steps that build it;
* ``interrupt``: Ctrl-C and SIGTERM for the lab's runners;
* ``isolation``: ``--scenario isolation``: the isolation procedure here;
* ``libvirtd``: virtlogd and libvirtd of its own, with diskless guests;
* ``mountns``: a mount namespace showing lab directories at system paths;
* ``netns``: a traffic network namespace joined to the host by veth pairs;
* ``nova_paste``: where the installed Nova keeps its api-paste.ini;
* ``ovsdpdk``: ovsdb-server, ovs-vswitchd-dpdk and a testpmd VNF;
* ``procs``: the processes it starts: a log each, stopped by pid;
* ``run``: one ``nova-rdt lab`` run, whatever the scenario;
* ``scenarios``: the seed documents' layouts and the relations proving them;
* ``sharedfs``: the two-compute cloud's shared instances path, over FUSE;
* ``tcg_qemu``: QEMU for kvm-typed domains where KVM cannot boot Linux.
"""

from nova_rdt.lab.host import Lab
from nova_rdt.lab.host import real_resctrl_present
from nova_rdt.lab.libvirtd import diskless_domain_xml
from nova_rdt.lab.procs import LabError

__all__ = ["Lab", "LabError", "diskless_domain_xml", "real_resctrl_present"]
