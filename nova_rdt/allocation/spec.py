"""The ``rdt:`` flavor extra-spec language.

Pure parsing and checking, no Nova import, so the API validators, the
scheduler filter and the driver share one reading of a flavor.

Keys (``.N`` after a size or MB key applies it to guest NUMA node N only;
without it the value applies to every node)::

    rdt:l3_cache_ways=4            unified L3, in ways
    rdt:l3_cache_size=6656KiB      unified L3, in B, KiB or MiB (2.75MiB)
    rdt:l3_code_ways / rdt:l3_data_ways / rdt:l3_code_size / rdt:l3_data_size
                                   CDP: code and data, always as a pair
    rdt:mb_percent=50              memory bandwidth, percent (1-100)
    rdt:mb_mbps=2000               memory bandwidth, MBps (mba_MBps hosts)
    rdt:vcpus=all | 2-3,5          which vCPUs the allocation covers
    rdt:monitor=true|false         CMT/MBM monitoring for the instance
    rdt:pmd_share=true|false       let the OVS-DPDK PMD COS overlap our ways
    rdt:class=low_priority         join a shared best-effort class group

:func:`check_value` checks one key on its own (what Nova's per-key API
validators can see); :func:`parse` checks the whole flavor, including the
rules that span keys and the flavor's vCPU count.
"""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses
import re
from typing import Any
from typing import cast

from nova_rdt import exception
from nova_rdt import naming
from nova_rdt.resctrl import cpulist

PREFIX = "rdt:"
MAX_NODES = 64
# vCPU ids, as libvirt and QEMU number them (and the hook reads them).
MAX_VCPUS = 4096
# L3 amounts: no cache way is smaller than 1 KiB, and no cache domain
# today is near 4 GiB; anything outside is a typo, not a request.
MIN_SIZE = 1 << 10
MAX_SIZE = 1 << 32
# Values are short; a longer one is refused before any parsing.
MAX_VALUE_LEN = 255

# ASCII only ([0-9], not \d, which also matches '٤' and '４'); \Z, not $,
# which would let a trailing newline through.  A fraction (2.75MiB) must
# come to whole bytes.
_SIZE_RE = re.compile(r"(?P<n>[1-9][0-9]{0,12}|0(?=\.))"
                      r"(?:\.(?P<frac>[0-9]{1,6}))?"
                      r"(?P<unit>B|KiB|MiB|K|M)?\Z")
_UNITS = {None: 1, "B": 1, "K": 1024, "KiB": 1024, "M": 1 << 20,
          "MiB": 1 << 20}
_CLASS_RE = naming.CLASS_NAME_RE
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}

CACHE_KINDS = ("cache", "code", "data")          # unified, CDP code, data
NODE_KEYS = tuple(f"l3_{k}_{u}" for k in CACHE_KINDS
                  for u in ("ways", "size")) + ("mb_percent", "mb_mbps")
PLAIN_KEYS = ("vcpus", "monitor", "pmd_share", "class", "slo")
# rdt:slo: what the runtime controller protects (nova-rdt controller).
SLO_VALUES = ("latency",)


class SpecError(exception.NovaRdtError, ValueError):
    """A bad ``rdt:`` spec; ``key`` names the offending extra spec."""

    def __init__(self, key: str, reason: str):
        self.key = key
        self.reason = reason
        super().__init__(f"{key}: {reason}")


@dataclasses.dataclass(frozen=True)
class CacheAmount:
    """An L3 amount: exactly one of ``ways`` or ``size`` (bytes)."""

    ways: int | None = None
    size: int | None = None

    def to_ways(self, way_size: int) -> int:
        """Ways on a host whose ways hold ``way_size`` bytes.

        A size that is not a whole number of ways is refused rather than
        rounded, as libvirt refuses it.
        """
        if self.ways is not None:
            return self.ways
        assert self.size is not None      # one of the two, by construction
        if self.size % way_size:
            raise ValueError(
                f"{self.size} bytes is not a whole number of "
                f"{way_size}-byte ways")
        return self.size // way_size


@dataclasses.dataclass(frozen=True)
class NodeRequest:
    """What one guest NUMA node asks for."""

    cache: CacheAmount | None = None      # unified L3
    code: CacheAmount | None = None       # CDP
    data: CacheAmount | None = None
    mb_percent: int | None = None
    mb_mbps: int | None = None

    @property
    def cdp(self) -> bool:
        return self.code is not None


@dataclasses.dataclass(frozen=True)
class RdtRequest:
    nodes: tuple[NodeRequest, ...]        # one per guest NUMA node
    vcpus: frozenset[int] | None          # None: all vCPUs
    monitor: bool | None                  # None: the host's default
    pmd_share: bool = False
    rdt_class: str | None = None
    slo: str | None = None

    @property
    def wants_cache(self) -> bool:
        return any(n.cache or n.code for n in self.nodes)

    @property
    def wants_cdp(self) -> bool:
        return any(n.cdp for n in self.nodes)

    @property
    def wants_mb(self) -> bool:
        return any(n.mb_percent or n.mb_mbps for n in self.nodes)

    @property
    def wants_allocation(self) -> bool:
        """Whether it needs a CLOS of its own (a class shares one)."""
        return self.rdt_class is None and (self.wants_cache or self.wants_mb)


_DIGITS = frozenset("0123456789")


def parse_number(key: str, value: str, lo: int, hi: int) -> int:
    """The one number reader of the language: a decimal in ``lo..hi``.

    ASCII digits only, no sign, no spaces, no leading zeros, no ``_``
    (``int()`` takes ``'４'``, ``' 4'`` and ``'1_0'``; ``str.isdigit()``
    takes ``'²'``), and at most as many digits as ``hi`` has, so a
    5000-digit value costs nothing.
    """
    if not isinstance(value, str) or not value \
            or not _DIGITS.issuperset(value) \
            or (value[0] == "0" and value != "0") \
            or len(value) > len(str(hi)) or not lo <= int(value) <= hi:
        raise SpecError(key, f"{_show(value)} must be {lo}-{hi}, in "
                             f"ASCII digits")
    return int(value)


def _show(value: object) -> str:
    """A value quoted for an error message, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _split(key: str) -> tuple[str, int | None]:
    """``rdt:l3_cache_ways.1`` -> (``l3_cache_ways``, 1)."""
    name = key[len(PREFIX):]
    base, dot, node = name.partition(".")
    if not dot:
        return base, None
    if base not in NODE_KEYS:
        raise SpecError(key, f"'{base[:40]}' takes no '.N' node suffix")
    # Canonical decimals only: '.1' and '.01' would name one node twice.
    return base, parse_number(key, node, 0, MAX_NODES - 1)


def parse_size(key: str, value: str, units_required: bool = False) -> int:
    """An L3 size in bytes, from ``6656KiB``, ``2.75MiB`` or ``13M``.

    ``units_required``: a bare number is refused, with the unit it
    probably meant.  The API asks for that: ``2816`` (bytes) is what a
    StarlingX ``hw:cache_l3`` value (KiB) becomes when copied over, and
    it would pass here only to fail in the scheduler.  Flavors stored
    before units were required still read as bytes.
    """
    m = _SIZE_RE.match(value) if len(value) <= 24 else None
    if not m:
        raise SpecError(key, f"{_show(value)} is not a size such as "
                             f"6656KiB, 2.75MiB or 13MiB")
    unit, frac = m.group("unit"), m.group("frac") or ""
    if unit is None and units_required:
        raise SpecError(key, _no_unit(value, m.group("n"), frac))
    scaled = int(m.group("n") + frac) * _UNITS[unit]
    decimals: int = 10 ** len(frac)
    size, rest = divmod(scaled, decimals)
    if rest:
        raise SpecError(key, f"{_show(value)} is not a whole number of "
                             f"bytes")
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise SpecError(key, f"{_show(value)} must be between 1KiB and "
                             f"{MAX_SIZE >> 20}MiB")
    return size


def _no_unit(value: str, n: str, frac: str) -> str:
    """The refusal of a bare number, with the sizes it may have meant."""
    if frac:
        return (f"{_show(value)} has no unit: write KiB or MiB after it "
                f"(such as 2.75MiB)")
    count = int(n)
    meant = []
    if MIN_SIZE <= count * 1024 <= MAX_SIZE:
        mib = f"{count / 1024:.3f}".rstrip("0").rstrip(".")
        exact = count * 1000 % 1024 == 0
        meant.append(f"{n}KiB" + (f" (or {mib}MiB)" if exact else "")
                     + " if it counts KiB, as StarlingX's hw:cache_l3 does")
    if MIN_SIZE <= count <= MAX_SIZE:
        meant.append(f"{n}B if it counts bytes")
    return (f"{_show(value)} has no unit: sizes need B, KiB or MiB"
            + (f"; write {', or '.join(meant)}" if meant else ""))


def _positive_int(key: str, value: str, hi: int) -> int:
    return parse_number(key, value, 1, hi)


def parse_bool(key: str, value: str) -> bool:
    v = value.lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise SpecError(key, f"{_show(value)} is not true or false "
                         f"(true/false, yes/no, on/off, 1/0)")


def parse_cpu_list(key: str, value: str) -> frozenset[int]:
    try:
        # cpulist takes the kernel's trailing newline; a flavor may not.
        cpus = None if value.endswith("\n") \
            else cpulist.parse(value, MAX_VCPUS)
    except ValueError as e:
        raise SpecError(key, f"{e}; use 'all' or a vCPU list such as "
                             f"0-1,3") from None
    if not cpus:
        raise SpecError(key, "use 'all' or a vCPU list such as 0-1,3")
    return frozenset(cpus)


def check_value(key: str, value: str, units_required: bool = False
                ) -> object:
    """Check one key's value on its own; return the parsed value.

    Raises SpecError naming the key.  Unknown ``rdt:`` keys are errors, so
    a typo is caught at ``flavor set`` rather than silently ignored.
    ``units_required``: what the API sets (see :func:`parse_size`).
    """
    if not key.startswith(PREFIX):
        raise SpecError(key, f"not an {PREFIX} extra spec; the namespace "
                             f"is lower case ({PREFIX}...)")
    if not isinstance(value, str):
        raise SpecError(key, f"the value must be a string, not "
                             f"{type(value).__name__}")
    if len(value) > MAX_VALUE_LEN:
        raise SpecError(key, f"a value of {len(value)} characters is "
                             f"refused (at most {MAX_VALUE_LEN})")
    if value != value.strip():
        raise SpecError(key, f"{_show(value)} has surrounding whitespace")
    base, _node = _split(key)
    if base.endswith("_ways"):
        return CacheAmount(ways=_positive_int(key, value, 64))
    if base.endswith("_size"):
        return CacheAmount(size=parse_size(key, value, units_required))
    if base == "mb_percent":
        return _positive_int(key, value, 100)
    if base == "mb_mbps":
        return _positive_int(key, value, 0xFFFFFFFF)
    if base == "vcpus":
        return None if value == "all" else parse_cpu_list(key, value)
    if base in ("monitor", "pmd_share"):
        return parse_bool(key, value)
    if base == "slo":
        if value not in SLO_VALUES:
            raise SpecError(key, f"{_show(value)} must be one of "
                                 f"{', '.join(SLO_VALUES)}")
        return value
    if base == "class":
        if not _CLASS_RE.match(value):
            raise SpecError(key, f"{_show(value)} must be 1-32 of a-z, "
                                 f"0-9, '_' and '-', starting with a "
                                 f"letter or digit")
        return value
    known = ", ".join(PREFIX + k for k in NODE_KEYS + PLAIN_KEYS)
    raise SpecError(key, f"unknown rdt: extra spec; known: {known}")


def is_rdt_key(key: str) -> bool:
    """Whether ``key`` is in the rdt namespace, however it is written.

    Nova keeps ``RDT:x`` and `` rdt:x`` as keys of a namespace it does
    not know; read as not ours they would give a flavor no isolation
    without a word, so they are ours, and refused.
    """
    return isinstance(key, str) and \
        key.lstrip()[:len(PREFIX)].lower() == PREFIX


def rdt_specs(extra_specs: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in extra_specs.items() if is_rdt_key(k)}


def parse(extra_specs: Mapping[str, str], vcpus: int,
          numa_nodes: int = 1, units_required: bool = False
          ) -> RdtRequest | None:
    """The whole flavor's request, or None when it asks for nothing.

    ``vcpus`` and ``numa_nodes`` are the flavor's; they bound the vCPU
    list and the ``.N`` node suffixes.  ``units_required``: the API's
    reading (the paste filter's); the scheduler and the driver read
    stored flavors, which may predate it.
    """
    specs = rdt_specs(extra_specs)
    if not specs:
        return None
    if not 1 <= numa_nodes <= MAX_NODES:
        raise SpecError("hw:numa_nodes",
                        f"{numa_nodes} NUMA nodes: rdt: extra specs "
                        f"support 1-{MAX_NODES}")
    values = {k: check_value(k, v, units_required)
              for k, v in sorted(specs.items())}
    per_node: list[dict[str, tuple[str, Any]]] = [
        {} for _ in range(numa_nodes)]
    plain: dict[str, object] = {}
    for key, value in values.items():
        base, node = _split(key)
        if base in PLAIN_KEYS:
            plain[base] = value
            continue
        if node is not None and node >= numa_nodes:
            raise SpecError(key, f"the flavor has {numa_nodes} NUMA "
                                 f"node(s), numbered from 0")
        targets = range(numa_nodes) if node is None else [node]
        for n in targets:
            # A node-specific key beats the all-nodes one.
            if node is not None or base not in per_node[n]:
                per_node[n][base] = (key, value)
    nodes = tuple(_node_request(d) for d in per_node)

    cpus = cast("frozenset[int] | None", plain.get("vcpus"))
    if cpus is not None and max(cpus) >= vcpus:
        raise SpecError(PREFIX + "vcpus",
                        f"vCPU {max(cpus)} is out of range: the flavor has "
                        f"{vcpus} vCPUs (0-{vcpus - 1})")
    req = RdtRequest(nodes=nodes, vcpus=cpus,
                     monitor=cast("bool | None", plain.get("monitor")),
                     pmd_share=bool(plain.get("pmd_share", False)),
                     rdt_class=cast("str | None", plain.get("class")),
                     slo=cast("str | None", plain.get("slo")))
    if req.slo and req.rdt_class:
        raise SpecError(PREFIX + "slo",
                        "a protected instance cannot be in a best-effort "
                        "rdt:class; drop one of the two")
    if req.rdt_class and (req.wants_cache or req.wants_mb):
        key = next(k for k in specs if _split(k)[0] in NODE_KEYS)
        raise SpecError(key, "an instance in rdt:class shares the class's "
                             "ways and bandwidth; drop one of the two")
    if req.pmd_share and not req.wants_cache:
        raise SpecError(PREFIX + "pmd_share",
                        "needs L3 ways of the instance's own to share "
                        "(rdt:l3_cache_ways or rdt:l3_cache_size)")
    return req


def _node_request(d: dict[str, tuple[str, Any]]) -> NodeRequest:
    def amount(kind: str) -> tuple[str, CacheAmount] | None:
        ways, size = d.get(f"l3_{kind}_ways"), d.get(f"l3_{kind}_size")
        if ways and size:
            raise SpecError(size[0], f"give {ways[0]} or {size[0]}, not both")
        return ways or size

    cache, code, data = amount("cache"), amount("code"), amount("data")
    if cache and (code or data):
        raise SpecError((code or data or cache)[0],
                        f"CDP code/data sizes cannot be mixed with the "
                        f"unified {cache[0]}")
    if bool(code) != bool(data):
        have, missing = (code, "data") if code else (data, "code")
        assert have is not None
        raise SpecError(have[0], f"CDP needs both code and data: add "
                                 f"{PREFIX}l3_{missing}_ways or _size")
    mbp, mbm = d.get("mb_percent"), d.get("mb_mbps")
    if mbp and mbm:
        raise SpecError(mbm[0], f"give {mbp[0]} or {mbm[0]}, not both")
    if mbm and not (cache or code):
        # libvirt cannot express MBps; nova-rdt's hook writes it into
        # libvirt's group of the instance, which only L3 ways create.
        raise SpecError(mbm[0], f"needs L3 ways for the same vCPUs "
                                f"({PREFIX}l3_cache_ways or _size)")
    return NodeRequest(
        cache=cache[1] if cache else None,
        code=code[1] if code else None,
        data=data[1] if data else None,
        mb_percent=mbp[1] if mbp else None,
        mb_mbps=mbm[1] if mbm else None)
