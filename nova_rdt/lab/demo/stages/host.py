"""Stage 1: the Host lab, with two traffic ports cross-connected through
OVS-DPDK and the nova-rdt hook installed."""

from __future__ import annotations

EMULATION_NOTE = (
    "This host's RDT is emulated: the masks, groups and tasks are what "
    "libvirt and nova-rdt really wrote, but no hardware enforces them, so "
    "latency here shows the method, not the isolation.")

TRAFFIC_PORTS = ("p0", "p1")


def start(lab, scenario, say) -> None:
    say.stage(1, "Host")
    lab.start(traffic_ports=len(TRAFFIC_PORTS))
    lab.ovs.cross_connect(*TRAFFIC_PORTS)
    if lab.emulated:
        say(f"resctrl: EMULATED {scenario.profile}, as kernel "
            f"{lab.emulator.kernel} behaves (no RDT hardware is used; "
            f"{EMULATION_NOTE.split(':')[0].lower()})")
    else:
        say("resctrl: the machine's REAL resctrl at /sys/fs/resctrl")
    say(f"libvirtd ({lab.libvirt.domain_type}), OVS-DPDK (PMD cores "
        f"{sorted(t.core for t in lab.ovs.pmd_threads())}), "
        f"{len(TRAFFIC_PORTS)} traffic ports, nova-rdt hook installed")
