"""nova-rdt's ``<metadata>`` record: the contract between driver and hook.

The driver writes it into every domain it builds; the libvirt hook, which
runs as root on XML that anyone able to define a domain controls, reads
it back.  One class does both (``format_dom`` and ``parse_dom``, as
Nova's ``LibvirtConfigObject`` does), so the two cannot drift, and the
reading side is strict: bounded values, known versions, known names.
It marks the domain as managed by nova-rdt and carries what libvirt's
own elements cannot: PMD sharing, the class, MB in MBps, and the ways
asked for on each cache id.
"""

from __future__ import annotations

import dataclasses

from lxml import etree

from nova_rdt import exception
from nova_rdt import naming
from nova_rdt.resctrl import cpulist

VERSION = "1"
MAX_VCPU = 4095              # libvirt's and QEMU's largest vCPU id
MAX_ID = 9999                # cache and node ids
MAX_VALUE = 0xFFFFFFFF       # MB values are u32 in the kernel
CACHE_TYPES = ("both", "code", "data")
MB_UNITS = ("percent", "MBps")
SLO_VALUES = ("latency",)          # spec.SLO_VALUES, as the hook reads it


class MetadataError(exception.NovaRdtError, ValueError):
    """The record is not one this version writes."""


@dataclasses.dataclass
class RdtMetadata:
    vcpus: frozenset[int] = frozenset()
    pmd_share: bool = False
    rdt_class: str | None = None
    monitor: bool = False
    slo: str | None = None
    cache: list[tuple[int, str, int]] = dataclasses.field(
        default_factory=list)           # cache id, type, ways
    mb: list[tuple[int, int, str]] = dataclasses.field(
        default_factory=list)           # node id, value, unit
    # (cache id, type) -> the mask nova-rdt decided for those ways; the
    # driver and the hook write it into libvirt's group.  Absent in
    # records of older versions: the hook then places the domain itself.
    masks: dict[tuple[int, str], int] = dataclasses.field(
        default_factory=dict)
    # (cache id, type) -> the decided mask of the instance's class group,
    # for the hook that makes the group on the first member's start.
    class_masks: dict[tuple[int, str], int] = dataclasses.field(
        default_factory=dict)

    TAG = f"{{{naming.METADATA_NS}}}instance"

    def placed_cache(self) -> list[tuple[int, str, int, int | None]]:
        """(cache id, type, ways, decided mask or None) per cache line."""
        return [(cid, kind, ways, self.masks.get((cid, kind)))
                for cid, kind, ways in self.cache]

    def mb_mbps(self) -> tuple[tuple[int, int], ...]:
        """(node, MBps) pairs: what the hook writes for libvirt."""
        return tuple(sorted({i: v for i, v, u in self.mb
                             if u == "MBps"}.items()))

    # -- writing -------------------------------------------------------

    def format_dom(self) -> etree._Element:
        nsmap = {naming.METADATA_PREFIX: naming.METADATA_NS}
        e = etree.Element(self.TAG, nsmap=nsmap)
        e.set("version", VERSION)
        _text(e, "vcpus", cpulist.format(self.vcpus))
        _text(e, "pmd-share", _bool_text(self.pmd_share))
        _text(e, "monitor", _bool_text(self.monitor))
        if self.rdt_class:
            _text(e, "class", self.rdt_class)
        if self.slo:
            _text(e, "slo", self.slo)
        for cid, kind, ways in self.cache:
            c = etree.SubElement(e, _q("cache"), id=str(cid), type=kind,
                                 ways=str(ways))
            mask = self.masks.get((cid, kind))
            if mask:
                c.set("mask", f"{mask:x}")
        for (cid, kind), mask in sorted(self.class_masks.items()):
            etree.SubElement(e, _q("class-cache"), id=str(cid), type=kind,
                             mask=f"{mask:x}")
        for mid, value, unit in self.mb:
            etree.SubElement(e, _q("mb"), id=str(mid), value=str(value),
                             unit=unit)
        return e

    # -- reading (hostile input) ---------------------------------------

    @classmethod
    def parse_dom(cls, e: etree._Element) -> RdtMetadata:
        if e.tag != cls.TAG:
            raise MetadataError(f"not a nova-rdt <instance> element: "
                                f"{e.tag!r}")
        version = e.get("version")
        if version != VERSION:
            raise MetadataError(f"nova-rdt metadata version {version!r} is "
                                f"not understood by this version")

        # Not stripped: the driver writes no whitespace, and a value the
        # hook would read differently from the regex check is refused.
        def text(tag: str) -> str | None:
            found = e.find(_q(tag))
            if found is None or not found.text:
                return None
            return str(found.text)

        rdt_class = text("class")
        if rdt_class is not None and \
                not naming.CLASS_NAME_RE.match(rdt_class):
            raise MetadataError(f"nova-rdt metadata class {rdt_class!r} "
                                f"refused")
        slo = text("slo")
        if slo is not None and slo not in SLO_VALUES:
            raise MetadataError(f"nova-rdt metadata slo {slo!r} refused")
        cache = []
        masks: dict[tuple[int, str], int] = {}
        for c in e.findall(_q("cache")):
            kind = c.get("type") or ""
            if kind not in CACHE_TYPES:
                raise MetadataError(f"nova-rdt metadata cache type "
                                    f"{kind!r} refused")
            cid = _number(c.get("id"), "cache id", MAX_ID)
            ways = _number(c.get("ways"), "cache ways", 64)
            cache.append((cid, kind, ways))
            if c.get("mask") is not None:
                mask = _mask(c.get("mask"))
                if bin(mask).count("1") != ways:
                    raise MetadataError(
                        f"nova-rdt metadata cache mask {mask:x} does not "
                        f"hold its {ways} ways")
                masks[cid, kind] = mask
        class_masks = {}
        for c in e.findall(_q("class-cache")):
            kind = c.get("type") or ""
            if kind not in CACHE_TYPES:
                raise MetadataError(f"nova-rdt metadata class-cache type "
                                    f"{kind!r} refused")
            class_masks[_number(c.get("id"), "cache id", MAX_ID), kind] = \
                _mask(c.get("mask"))
        mb = []
        for m in e.findall(_q("mb")):
            unit = m.get("unit") or ""
            if unit not in MB_UNITS:
                raise MetadataError(f"nova-rdt metadata mb unit {unit!r} "
                                    f"refused")
            value = _number(m.get("value"), "mb value", MAX_VALUE)
            if value < 1:
                raise MetadataError("nova-rdt metadata mb value 0 refused")
            mb.append((_number(m.get("id"), "mb id", MAX_ID), value, unit))
        return cls(vcpus=_parse_cpus(text("vcpus") or ""),
                   pmd_share=_parse_bool(text("pmd-share"), "pmd-share"),
                   rdt_class=rdt_class,
                   monitor=_parse_bool(text("monitor"), "monitor"),
                   slo=slo, cache=cache, mb=mb, masks=masks,
                   class_masks=class_masks)


def _q(tag: str) -> str:
    return f"{{{naming.METADATA_NS}}}{tag}"


def _text(parent: etree._Element, tag: str, value: str) -> None:
    etree.SubElement(parent, _q(tag)).text = value


def _bool_text(value: bool) -> str:
    return "true" if value else "false"


def _parse_bool(text: str | None, what: str) -> bool:
    if text in (None, "false"):
        return False
    if text == "true":
        return True
    raise MetadataError(f"nova-rdt metadata {what}={text!r} is not true or "
                        f"false")


def _number(text: str | None, what: str, hi: int) -> int:
    # ASCII digits only (str.isdigit() also takes '²' and '٤'), and short
    # enough that int() is cheap.
    if not text or len(text) > 10 or not text.isascii() \
            or not text.isdigit() or int(text) > hi:
        raise MetadataError(f"nova-rdt metadata {what} {text!r} refused "
                            f"(0-{hi})")
    return int(text)


def _mask(text: str | None) -> int:
    # Lower-case hex as the driver writes it, at most 64 ways, never 0.
    if not text or len(text) > 16 or not all(
            ch in "0123456789abcdef" for ch in text) or int(text, 16) == 0:
        raise MetadataError(f"nova-rdt metadata mask {text!r} refused "
                            f"(1-16 lower-case hex digits, not 0)")
    return int(text, 16)


def _parse_cpus(text: str) -> frozenset[int]:
    # The driver writes no trailing newline; the shared parser would
    # accept one (kernel files end in one), so refuse it here.
    if text.endswith("\n"):
        raise MetadataError(f"nova-rdt metadata vCPUs {text!r} refused")
    try:
        return frozenset(cpulist.parse(text, MAX_VCPU + 1))
    except ValueError as e:
        raise MetadataError(f"nova-rdt metadata vCPUs refused: {e}") \
            from None
