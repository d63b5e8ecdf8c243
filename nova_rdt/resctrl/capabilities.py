"""Host RDT capabilities, discovered from ``info/`` and sysfs cache topology.

Nothing here is vendor- or emulator-aware: every fact is read from the
files the kernel publishes, so the same code describes a Xeon, an EPYC or
the emulator.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import glob
import os
from typing import Any

from nova_rdt.resctrl import cpulist
from nova_rdt.resctrl import errors
from nova_rdt.resctrl import mounts
from nova_rdt.resctrl import schemata as schemata_mod
from nova_rdt.resctrl.cbm import popcount

DEFAULT_ROOT = "/sys/fs/resctrl"
DEFAULT_SYSFS_CPU = "/sys/devices/system/cpu"

# MB value units.  AMD programs bandwidth in 1/8 GB/s steps, not percent.
UNITS_PERCENT = "percent"
UNITS_MBPS = "MBps"
UNTHROTTLED_MBPS = (1 << 32) - 1
UNITS_AMD = "1/8GBps"


@dataclasses.dataclass(frozen=True)
class CacheDomain:
    id: int
    size: int | None          # bytes; None when sysfs does not say
    cpus: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class CacheResource:
    name: str
    level: int
    cbm_mask: int
    min_cbm_bits: int
    shareable_bits: int
    sparse_masks: bool
    num_closids: int
    # As read at discovery, which capcache keeps per mount: a diagnostic
    # of that moment (the groups' schemata are the live way map).
    bit_usage: str | None
    domains: dict[int, CacheDomain]

    @property
    def cbm_len(self) -> int:
        return popcount(self.cbm_mask)

    def way_size(self, domain: int) -> int | None:
        size = self.domains[domain].size
        return size // self.cbm_len if size else None


@dataclasses.dataclass(frozen=True)
class BandwidthResource:
    name: str
    bandwidth_gran: int
    min_bandwidth: int
    delay_linear: bool
    num_closids: int
    thread_throttle_mode: str | None
    units: str
    max_bandwidth: int | None   # None: no fixed ceiling (MBps mode)
    domain_ids: tuple[int, ...]

    @property
    def unthrottled(self) -> int:
        """The value that sets no limit: 100%, AMD's ceiling, or in MBps
        mode the kernel's MBA_MAX_MBPS (U32_MAX), its default for new
        groups; 100 there would be a 100 MBps throttle."""
        if self.max_bandwidth is not None:
            return self.max_bandwidth
        return UNTHROTTLED_MBPS if self.units == UNITS_MBPS else 100


@dataclasses.dataclass(frozen=True)
class Monitoring:
    resource: str              # "L3" for L3_MON
    features: tuple[str, ...]
    num_rmids: int
    max_threshold_occupancy: int | None


@dataclasses.dataclass(frozen=True)
class Capabilities:
    root: str
    cache: dict[str, CacheResource]
    bandwidth: dict[str, BandwidthResource]
    monitoring: dict[str, Monitoring]
    mba_mbps: bool

    @property
    def cdp(self) -> bool:
        return "L3CODE" in self.cache

    @property
    def l2_cdp(self) -> bool:
        return "L2CODE" in self.cache

    @property
    def clos_count(self) -> int:
        """CLOSIDs every control resource can honour, root's CLOSID 0 included.

        The kernel already halves num_closids for L3CODE/L3DATA under CDP,
        so the minimum over what it publishes is the answer.
        """
        counts = [r.num_closids for r in self.cache.values()]
        counts += [r.num_closids for r in self.bandwidth.values()]
        return min(counts, default=0)

    @property
    def usable_clos(self) -> int:
        """CLOSIDs left for groups other than the root."""
        return max(self.clos_count - 1, 0)

    @property
    def allocation_enabled(self) -> bool:
        return bool(self.cache or self.bandwidth)

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "cdp": self.cdp,
            "l2_cdp": self.l2_cdp,
            "mba_mbps": self.mba_mbps,
            "clos_count": self.clos_count,
            "usable_clos": self.usable_clos,
            "cache": {
                n: {
                    "level": r.level,
                    "cbm_mask": f"{r.cbm_mask:x}",
                    "ways": r.cbm_len,
                    "min_cbm_bits": r.min_cbm_bits,
                    "shareable_bits": f"{r.shareable_bits:x}",
                    "sparse_masks": r.sparse_masks,
                    "num_closids": r.num_closids,
                    "bit_usage": r.bit_usage,
                    "domains": {
                        str(d.id): {"size": d.size,
                                    "way_size": r.way_size(d.id),
                                    "cpus": list(d.cpus)}
                        for d in r.domains.values()},
                } for n, r in self.cache.items()},
            "bandwidth": {
                n: {
                    "bandwidth_gran": r.bandwidth_gran,
                    "min_bandwidth": r.min_bandwidth,
                    "delay_linear": r.delay_linear,
                    "num_closids": r.num_closids,
                    "thread_throttle_mode": r.thread_throttle_mode,
                    "units": r.units,
                    "max_bandwidth": r.max_bandwidth,
                    "domains": list(r.domain_ids),
                } for n, r in self.bandwidth.items()},
            "monitoring": {
                n: {"features": list(m.features), "num_rmids": m.num_rmids,
                    "max_threshold_occupancy": m.max_threshold_occupancy}
                for n, m in self.monitoring.items()},
        }


def discover(root: str = DEFAULT_ROOT,
             sysfs_cpu: str = DEFAULT_SYSFS_CPU) -> Capabilities:
    info = os.path.join(root, "info")
    if not os.path.isdir(info):
        raise errors.NotMounted(
            f"no resctrl filesystem at {root} (mount it with "
            f"'mount -t resctrl resctrl {root}', or point at an emulated one)",
            path=root)
    root_schemata = schemata_mod.Schemata.parse(
        _read(os.path.join(root, "schemata")))
    mbps = _mba_mbps(root, root_schemata)
    topology = cache_topology(sysfs_cpu)
    cache, bandwidth, monitoring = {}, {}, {}
    for name in sorted(os.listdir(info)):
        d = os.path.join(info, name)
        if not os.path.isdir(d):
            continue
        if name.endswith("_MON"):
            monitoring[name] = _monitoring(name, d)
        elif os.path.exists(os.path.join(d, "cbm_mask")):
            level = schemata_mod.cache_level(name)
            ids = root_schemata.domains(name)
            doms = {i: topology.get((level, i), CacheDomain(i, None, ()))
                    for i in sorted(ids)}
            cache[name] = _cache(name, d, level, doms)
        elif os.path.exists(os.path.join(d, "bandwidth_gran")):
            bandwidth[name] = _bandwidth(
                name, d, root_schemata.domains(name), mbps)
    return Capabilities(root, cache, bandwidth, monitoring, mbps)


def cache_topology(sysfs_cpu: str = DEFAULT_SYSFS_CPU
                   ) -> dict[tuple[int, int], CacheDomain]:
    """(level, cache id) -> size and CPUs, from ``cpu*/cache/index*``."""
    found: dict[tuple[int, int], CacheDomain] = {}
    for index in glob.glob(os.path.join(sysfs_cpu, "cpu[0-9]*", "cache",
                                        "index[0-9]*")):
        try:
            if _read(os.path.join(index, "type")).strip() == "Instruction":
                continue
            level = int(_read(os.path.join(index, "level")))
            cache_id = int(_read(os.path.join(index, "id")))
            size = parse_sysfs_size(_read(os.path.join(index, "size")))
            cpus = parse_cpu_list(
                _read(os.path.join(index, "shared_cpu_list")))
        except (OSError, ValueError):
            # Offline CPUs and caches without an id are not allocatable.
            continue
        found.setdefault((level, cache_id),
                         CacheDomain(cache_id, size, tuple(sorted(cpus))))
    return found


def parse_sysfs_size(text: str) -> int:
    """sysfs cache sizes read like ``36608K``."""
    text = text.strip()
    mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:].upper())
    return int(text[:-1]) * mult if mult else int(text)


def parse_cpu_list(text: str) -> set[int]:
    """Kernel cpulist syntax: ``0-3,8,10-11``.  Empty means none."""
    # The one bounded parser; surrounding whitespace as in kernel files
    # and /proc status lines ("Cpus_allowed_list:\t0-3").
    return cpulist.parse(text.strip())


def format_cpu_list(cpus: Iterable[int]) -> str:
    return cpulist.format(cpus)


def _cache(name: str, d: str, level: int,
           domains: dict[int, CacheDomain]) -> CacheResource:
    min_cbm_bits = _int(d, "min_cbm_bits", 1)
    sparse = _opt(d, "sparse_masks")
    return CacheResource(
        name=name, level=level,
        cbm_mask=int(_read(os.path.join(d, "cbm_mask")), 16),
        min_cbm_bits=min_cbm_bits,
        shareable_bits=int(_opt(d, "shareable_bits") or "0", 16),
        # Kernels before 6.7 have no sparse_masks file; they allow
        # non-contiguous masks only on AMD, the one vendor whose
        # min_cbm_bits is 0 (arch_has_sparse_bitmaps and
        # arch_has_empty_bitmaps go together there).
        sparse_masks=(int(sparse) == 1 if sparse is not None
                      else min_cbm_bits == 0),
        num_closids=_int(d, "num_closids"),
        bit_usage=_opt(d, "bit_usage"),
        domains=domains)


def _bandwidth(name: str, d: str, root_values: Mapping[int, int],
               mbps: bool) -> BandwidthResource:
    delay_linear = _int(d, "delay_linear", 1) == 1
    # The kernel accepts non-linear MB only where the vendor does not need
    # linear delay, which today means AMD and its 1/8 GB/s units.
    if mbps:
        units, ceiling = UNITS_MBPS, None
    elif not delay_linear:
        units, ceiling = UNITS_AMD, max(root_values.values(), default=None)
    else:
        units, ceiling = UNITS_PERCENT, 100
    return BandwidthResource(
        name=name,
        bandwidth_gran=_int(d, "bandwidth_gran", 1),
        min_bandwidth=_int(d, "min_bandwidth", 0),
        delay_linear=delay_linear,
        num_closids=_int(d, "num_closids"),
        thread_throttle_mode=_opt(d, "thread_throttle_mode"),
        units=units, max_bandwidth=ceiling,
        domain_ids=tuple(sorted(root_values)))


def _monitoring(name: str, d: str) -> Monitoring:
    feats = (_opt(d, "mon_features") or "").split()
    mto = _opt(d, "max_threshold_occupancy")
    return Monitoring(resource=name[:-len("_MON")], features=tuple(feats),
                      num_rmids=_int(d, "num_rmids", 0),
                      max_threshold_occupancy=int(mto) if mto else None)


def _mba_mbps(root: str, root_schemata: schemata_mod.Schemata) -> bool:
    """MBps mode: the per-group file kernels >= 6.14 add, the mount
    option, or a linear MB value above 100 in the root group, which the
    kernel refuses in percent mode (a copied tree has no mount options)."""
    if os.path.exists(os.path.join(root, "mba_MBps_event")):
        return True
    if "mba_MBps" in mount_options(root):
        return True
    mb = os.path.join(root, "info", "MB")
    return (_opt(mb, "delay_linear") == "1"
            and any(v > 100 for v in root_schemata.domains("MB").values()))


def mount_options(path: str) -> set[str]:
    """The per-mount and filesystem options of the mount at ``path``
    (empty when it is no mount point, as a copied tree is not)."""
    entry = mounts.entry_at(path)
    return set(entry.all_options) if entry else set()


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _opt(d: str, name: str) -> str | None:
    try:
        return _read(os.path.join(d, name)).strip()
    except FileNotFoundError:
        return None


def _int(d: str, name: str, default: int | None = None) -> int:
    v = _opt(d, name)
    if v is None:
        if default is None:
            raise errors.ResctrlError(f"missing {os.path.join(d, name)}",
                                      path=os.path.join(d, name))
        return default
    return int(v)
