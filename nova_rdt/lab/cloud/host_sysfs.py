"""The sysfs cache topology of a fake Nova host: ``cpuN/cache/index3``
for its CPUs, with L3 cache id i covering NUMA node i, so that what the
driver reads from sysfs agrees with fakelibvirt's NUMA topology."""

from __future__ import annotations

import os

from nova_rdt.emulator import profiles as emu_profiles
from nova_rdt.emulator import topology as emu_topology
from nova_rdt.resctrl.capabilities import format_cpu_list


def write_host_sysfs(profile: emu_profiles.Profile,
                     banks: dict[int, list[int]], root: str) -> str:
    """Write the tree under ``root`` (cache id -> CPUs ``banks``), and
    ``online``; returns ``root``."""
    all_cpus = sorted(c for cpus in banks.values() for c in cpus)
    nbits = max(all_cpus) + 1
    for cache_id, cpus in banks.items():
        files = emu_topology.index3_files(profile, cache_id, sorted(cpus),
                                          nbits)
        for cpu in cpus:
            d = os.path.join(root, f"cpu{cpu}", "cache", "index3")
            os.makedirs(d, exist_ok=True)
            for name, text in files.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
    with open(os.path.join(root, "online"), "w") as f:
        f.write(format_cpu_list(all_cpus) + "\n")
    return root
