"""The profile's cache topology, as sysfs ``cpu*/cache/index3`` files
(and ``index2`` for a profile with L2 CAT).

libvirt and the library take cache ids and sizes from sysfs, not from
resctrl, so an emulated host must show both.  Two forms:

* :func:`write_tree` writes a whole ``cpu*/cache/index3`` tree for every
  profile CPU, for readers that take a sysfs root (the library).
* :func:`bind_over_host` lays the profile's values over the host's own
  files inside a private mount namespace, for readers that hard-code
  ``/sys/devices/system/cpu`` (libvirtd).  Host CPU *n* is put on cache id
  ``n % domains``, so a 2-CPU machine shows both sockets of a 2-socket
  profile.
"""

from __future__ import annotations

import glob
import os
import subprocess

from nova_rdt.emulator.profiles import CacheProfile
from nova_rdt.emulator.profiles import Profile
from nova_rdt.resctrl.capabilities import format_cpu_list

SYSFS_CPU = "/sys/devices/system/cpu"


def _cpumap(cpus, nbits: int) -> str:
    value = sum(1 << c for c in cpus)
    nchunks = max((nbits + 31) // 32, 1)
    return ",".join(f"{(value >> (32 * i)) & 0xFFFFFFFF:08x}"
                    for i in reversed(range(nchunks)))


def index3_files(profile: Profile, domain: int, cpus: list[int],
                 nbits: int) -> dict[str, str]:
    return _cache_files(profile.l3, domain, cpus, nbits)


def index2_files(profile: Profile, l2: int, cpus: list[int],
                 nbits: int) -> dict[str, str]:
    """The L2 of a profile with L2 CAT (Unified, as on every part that
    has it)."""
    assert profile.l2 is not None
    return _cache_files(profile.l2, l2, cpus, nbits)


def _cache_files(cache: CacheProfile, cache_id: int, cpus: list[int],
                 nbits: int) -> dict[str, str]:
    return {
        "id": f"{cache_id}\n",
        "level": f"{cache.level}\n",
        "type": "Unified\n",
        "size": f"{cache.size // 1024}K\n",
        "ways_of_associativity": f"{cache.cbm_len}\n",
        "shared_cpu_list": format_cpu_list(cpus) + "\n",
        "shared_cpu_map": _cpumap(cpus, nbits) + "\n",
    }


def write_tree(profile: Profile, root: str) -> str:
    """Write ``<root>/cpuN/cache/index3/*`` (and ``index2`` with L2 CAT)
    for every profile CPU."""
    n = profile.num_cpus
    for cpu in range(n):
        dom = profile.domain_of_cpu(cpu)
        indexes = {"index3": index3_files(profile, dom,
                                          profile.cpus_of_domain(dom), n)}
        if profile.l2 is not None:
            l2 = profile.l2_of_cpu(cpu)
            indexes["index2"] = index2_files(profile, l2,
                                             profile.cpus_of_l2(l2), n)
        for index, files in indexes.items():
            d = os.path.join(root, f"cpu{cpu}", "cache", index)
            os.makedirs(d, exist_ok=True)
            for name, text in files.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
    with open(os.path.join(root, "online"), "w") as f:
        f.write(f"0-{n - 1}\n")
    return root


def host_cpus(sysfs_cpu: str = SYSFS_CPU) -> list[int]:
    return sorted(int(os.path.basename(p)[3:]) for p in
                  glob.glob(os.path.join(sysfs_cpu, "cpu[0-9]*")))


def bind_over_host(profile: Profile, staging: str,
                   sysfs_cpu: str = SYSFS_CPU) -> list[str]:
    """Bind the profile's index3 (and index2) values over the host's files.

    Only call this in a private mount namespace: outside one it would
    change what every process on the host sees.  Returns the bound paths.
    Host CPU *n* is on L3 ``n % domains`` and, with L2 CAT, on L2
    ``n % L2 ids``.
    """
    cpus = host_cpus(sysfs_cpu)
    by_domain: dict[int, list[int]] = {}
    by_l2: dict[int, list[int]] = {}
    n_l2 = len(profile.l2_ids) or 1
    for cpu in cpus:
        by_domain.setdefault(cpu % profile.domains, []).append(cpu)
        by_l2.setdefault(cpu % n_l2, []).append(cpu)
    nbits = (max(cpus) + 1) if cpus else 1
    bound = []
    for cpu in cpus:
        src_dir = os.path.join(staging, f"cpu{cpu}")
        os.makedirs(src_dir, exist_ok=True)
        files = {"index3": index3_files(profile, cpu % profile.domains,
                                        by_domain[cpu % profile.domains],
                                        nbits)}
        if profile.l2 is not None:
            files["index2"] = index2_files(profile, cpu % n_l2,
                                           by_l2[cpu % n_l2], nbits)
        for index, values in files.items():
            target_dir = os.path.join(sysfs_cpu, f"cpu{cpu}", "cache", index)
            if not os.path.isdir(target_dir):
                continue  # sysfs files cannot be created, only covered
            for name, text in values.items():
                target = os.path.join(target_dir, name)
                if not os.path.exists(target):
                    continue
                src = os.path.join(src_dir, f"{index}-{name}")
                with open(src, "w") as f:
                    f.write(text)
                subprocess.run(["mount", "--bind", src, target], check=True)
                bound.append(target)
    return bound
