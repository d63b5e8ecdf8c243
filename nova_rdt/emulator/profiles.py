"""Host profiles the emulator can present.

Each profile describes what the kernel would publish on that machine:
resctrl ``info/`` values, cache domains and sizes, CPUs and mount mode.
The first three are the seed hosts of DESIGN.md section 1.
"""

from __future__ import annotations

import dataclasses

KiB = 1024
MiB = 1024 * KiB


@dataclasses.dataclass(frozen=True)
class CacheProfile:
    level: int
    size: int                     # bytes per domain
    cbm_len: int                  # ways
    num_closids: int              # hardware CLOS, before CDP halving
    min_cbm_bits: int = 1
    shareable_bits: int = 0
    sparse_masks: bool = False
    cdp_capable: bool = False


@dataclasses.dataclass(frozen=True)
class BandwidthProfile:
    name: str                     # "MB" or "SMBA"
    num_closids: int
    bandwidth_gran: int
    min_bandwidth: int
    max_bandwidth: int            # default_ctrl: 100 (Intel) or 2048 (AMD)
    delay_linear: bool = True
    thread_throttle_mode: str | None = "max"
    data_width: int = 3           # digits the kernel pads MB values to


@dataclasses.dataclass(frozen=True)
class MonitorProfile:
    num_rmids: int
    features: tuple[str, ...] = ("llc_occupancy", "mbm_total_bytes",
                                 "mbm_local_bytes")


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    description: str
    domains: int                  # L3 cache ids (sockets, or CCDs on EPYC)
    cpus_per_domain: int
    l3: CacheProfile
    bandwidth: tuple[BandwidthProfile, ...] = ()
    monitor: MonitorProfile | None = None
    cdp: bool = False             # mounted with -o cdp
    mba_mbps: bool = False        # mounted with -o mba_MBps
    l3_ways_of_associativity: int | None = None
    # get_prefetch_disable_bits() knows the part: cache pseudo-locking
    # works (Broadwell-X and the Goldmont Atoms only).
    pseudo_locking: bool = False
    # L2 CAT: one resctrl domain per L2 cache id, each shared by
    # ``cpus_per_l2`` CPUs (the two threads of a core, or the cores of an
    # Atom module).
    l2: CacheProfile | None = None
    cpus_per_l2: int = 2
    cdp_l2: bool = False          # mounted with -o cdpl2

    @property
    def num_cpus(self) -> int:
        return self.domains * self.cpus_per_domain

    @property
    def l2_ids(self) -> list[int]:
        """The L2 cache ids, one per core (or module); none without L2
        CAT."""
        if self.l2 is None:
            return []
        return list(range(self.num_cpus // self.cpus_per_l2))

    def l2_of_cpu(self, cpu: int) -> int:
        """L2 cache id of ``cpu``.

        Linux numbers the first thread of every core before any second
        thread, so the siblings of a core are CPU *n* and *n* + cores:
        CPU ``c`` is on core ``c % cores``.  With ids a multiple of the
        L3 domains, every L2 lies inside the L3 of :meth:`domain_of_cpu`.
        """
        return cpu % len(self.l2_ids)

    def cpus_of_l2(self, l2: int) -> list[int]:
        return [c for c in range(self.num_cpus) if self.l2_of_cpu(c) == l2]

    def domain_of_cpu(self, cpu: int) -> int:
        """Cache id of ``cpu``.

        CPUs are numbered round-robin over domains, as Linux numbers the
        first thread of each core across sockets: on 2 sockets CPU 0 is on
        cache 0 and CPU 1 on cache 1.
        """
        return cpu % self.domains

    def cpus_of_domain(self, domain: int) -> list[int]:
        return [c for c in range(self.num_cpus)
                if self.domain_of_cpu(c) == domain]


_GOLD_6252_L3 = CacheProfile(level=3, size=36608 * KiB, cbm_len=11,
                             num_closids=16, cdp_capable=True)
_GOLD_6252_MB = BandwidthProfile(name="MB", num_closids=8, bandwidth_gran=10,
                                 min_bandwidth=10, max_bandwidth=100)
_CASCADE_LAKE_MON = MonitorProfile(num_rmids=176)
# Intel's RDT table (intel-cmt-cat README, 2021): L3 CAT with 4 CLOS, L2
# CAT and L2 CDP with 8 CLOS per L2, no L3 CDP, no CMT, MBM or MBA.  The
# Willow Cove core has a 1280 KiB 20-way L2; the L3 is 3 MiB 12-way
# slices, 8 of them (24 MiB) on this 8-core, 16-thread part.
_W_11865MRE_L3 = CacheProfile(level=3, size=24 * MiB, cbm_len=12,
                              num_closids=4)
_W_11865MRE_L2 = CacheProfile(level=2, size=1280 * KiB, cbm_len=20,
                              num_closids=8, cdp_capable=True)

PROFILES = {p.name: p for p in (
    Profile(
        name="gold-6252",
        description="2-socket Xeon Gold 6252 (Cascade Lake): 35.75 MiB L3, "
                    "11 ways, 16 CLOS; MBA gran 10, min 10, 8 CLOS; CMT/MBM",
        domains=2, cpus_per_domain=48,
        l3=_GOLD_6252_L3, bandwidth=(_GOLD_6252_MB,),
        monitor=_CASCADE_LAKE_MON),
    Profile(
        name="e7-8890-v4",
        description="4-socket Xeon E7-8890 v4 (Broadwell-X): 60 MiB L3, "
                    "20 ways, 16 CLOS; no MBA; cache pseudo-locking",
        domains=4, cpus_per_domain=48,
        l3=CacheProfile(level=3, size=61440 * KiB, cbm_len=20,
                        num_closids=16, cdp_capable=True),
        monitor=MonitorProfile(num_rmids=176), pseudo_locking=True),
    Profile(
        name="e5-2658-v3",
        description="2-socket Xeon E5-2658 v3 (Haswell, ONP app note): 30 MiB "
                    "L3, 20 ways, 4 CLOS, min 2 bits; CAT + CMT, no MBA",
        domains=2, cpus_per_domain=24,
        # Haswell server CAT, as cache_alloc_hsw_probe() sets it up: 4
        # CLOS, at least two bits per mask, ways 18-19 shared with
        # hardware (shareable_bits 0xc0000).
        l3=CacheProfile(level=3, size=30720 * KiB, cbm_len=20,
                        num_closids=4, min_cbm_bits=2,
                        shareable_bits=0xC0000),
        monitor=MonitorProfile(num_rmids=64, features=("llc_occupancy",))),
    Profile(
        name="amd-epyc",
        description="1-socket AMD EPYC 7313 (Milan): 4 CCDs of 32 MiB L3, "
                    "16 ways, sparse masks, 16 CLOS; MB in 1/8 GB/s units",
        domains=4, cpus_per_domain=8,
        # AMD L3 is CDP-capable, so max_name_width allows for "L3CODE"
        # even when mounted without cdp.
        l3=CacheProfile(level=3, size=32 * MiB, cbm_len=16, num_closids=16,
                        min_cbm_bits=0, sparse_masks=True,
                        cdp_capable=True),
        bandwidth=(BandwidthProfile(
            name="MB", num_closids=16, bandwidth_gran=1, min_bandwidth=0,
            max_bandwidth=2048, delay_linear=False,
            thread_throttle_mode=None, data_width=4),),
        monitor=MonitorProfile(num_rmids=256)),
    Profile(
        name="xeon-w-11865mre",
        description="1-socket Xeon W-11865MRE (Tiger Lake-H, edge): 24 MiB "
                    "L3, 12 ways, 4 CLOS; L2 CAT on 8 cores' 1.25 MiB, "
                    "20 ways, 8 CLOS; no MBA, no CMT",
        # 8 L2 cache ids, one per core, each shared by its two threads.
        domains=1, cpus_per_domain=16,
        l3=_W_11865MRE_L3, l2=_W_11865MRE_L2,
        cpus_per_l2=2),
    Profile(
        name="xeon-w-11865mre-cdpl2",
        description="Xeon W-11865MRE mounted with -o cdpl2: L2CODE/L2DATA, "
                    "4 L2 CLOS",
        domains=1, cpus_per_domain=16,
        l3=_W_11865MRE_L3, l2=_W_11865MRE_L2,
        cpus_per_l2=2, cdp_l2=True),
    Profile(
        name="gold-6252-cdp",
        description="Xeon Gold 6252 mounted with -o cdp: L3CODE/L3DATA, "
                    "8 CLOS",
        domains=2, cpus_per_domain=48,
        l3=_GOLD_6252_L3, bandwidth=(_GOLD_6252_MB,),
        monitor=_CASCADE_LAKE_MON, cdp=True),
    Profile(
        name="gold-6252-mbps",
        description="Xeon Gold 6252 mounted with -o mba_MBps: MB in MiB/s",
        domains=2, cpus_per_domain=48,
        l3=_GOLD_6252_L3, bandwidth=(_GOLD_6252_MB,),
        monitor=_CASCADE_LAKE_MON, mba_mbps=True),
)}

DEFAULT_PROFILE = "gold-6252"


def get(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(
            f"unknown profile {name!r}; known: {', '.join(sorted(PROFILES))}"
        ) from None
