"""libvirt XML objects for RDT, in the style of nova.virt.libvirt.config.

Nova has no classes for ``<cachetune>``/``<memorytune>`` (its
``LibvirtConfigGuestMemoryTune`` is ``<memtune>``), so they live here.
:class:`LibvirtConfigGuestRdtCPUTune` extends Nova's ``<cputune>`` object
rather than replacing it, so vcpupin, emulatorpin, shares and vcpusched
render exactly as Nova made them.  Each object has ``format_dom`` and
``parse_dom``.
"""

from __future__ import annotations

from lxml import etree
from nova.virt.libvirt import config as vconfig

from nova_rdt import naming
from nova_rdt.allocation import metadata
from nova_rdt.resctrl import cpulist

NOVA_RDT_NS = naming.METADATA_NS
NOVA_RDT_PREFIX = naming.METADATA_PREFIX


def _vcpus(xmldoc) -> set[int]:
    # libvirt writes no surrounding space, but a hand-edited domain may.
    return cpulist.parse(xmldoc.get("vcpus", "").strip())


def _parse_children(xmldoc, kinds: dict) -> None:
    """Each child whose tag is in ``kinds`` (tag -> (class, list)) is
    parsed into a new object of that class and appended to that list;
    other children are libvirt's business, not ours."""
    for child in xmldoc:
        if child.tag in kinds:
            cls, into = kinds[child.tag]
            obj = cls()
            obj.parse_dom(child)
            into.append(obj)


class LibvirtConfigGuestCacheTuneCache(vconfig.LibvirtConfigObject):
    """``<cache id level type size unit/>``; size in KiB (libvirt's unit)."""

    def __init__(self, cache_id=None, level=3, cache_type="both",
                 size_kib=None, **kwargs):
        super().__init__(root_name="cache", **kwargs)
        self.id = cache_id
        self.level = level
        self.type = cache_type
        self.size_kib = size_kib

    def format_dom(self):
        e = super().format_dom()
        e.set("id", str(self.id))
        e.set("level", str(self.level))
        e.set("type", self.type)
        e.set("size", str(self.size_kib))
        e.set("unit", "KiB")
        return e

    def parse_dom(self, xmldoc):
        super().parse_dom(xmldoc)
        self.id = int(xmldoc.get("id"))
        self.level = int(xmldoc.get("level"))
        self.type = xmldoc.get("type")
        self.size_kib = _to_kib(int(xmldoc.get("size")),
                                xmldoc.get("unit", "B"))


class LibvirtConfigGuestRdtMonitor(vconfig.LibvirtConfigObject):
    """``<monitor vcpus/>``; ``level`` only inside ``<cachetune>``."""

    def __init__(self, vcpus=(), level=None, **kwargs):
        super().__init__(root_name="monitor", **kwargs)
        self.vcpus = set(vcpus)
        self.level = level

    def format_dom(self):
        e = super().format_dom()
        if self.level is not None:
            e.set("level", str(self.level))
        e.set("vcpus", cpulist.format(self.vcpus))
        return e

    def parse_dom(self, xmldoc):
        super().parse_dom(xmldoc)
        self.vcpus = _vcpus(xmldoc)
        lvl = xmldoc.get("level")
        self.level = int(lvl) if lvl is not None else None


class LibvirtConfigGuestCacheTune(vconfig.LibvirtConfigObject):
    def __init__(self, vcpus=(), **kwargs):
        super().__init__(root_name="cachetune", **kwargs)
        self.vcpus = set(vcpus)
        self.caches: list[LibvirtConfigGuestCacheTuneCache] = []
        self.monitors: list[LibvirtConfigGuestRdtMonitor] = []

    def format_dom(self):
        e = super().format_dom()
        e.set("vcpus", cpulist.format(self.vcpus))
        for c in self.caches + self.monitors:
            e.append(c.format_dom())
        return e

    def parse_dom(self, xmldoc):
        super().parse_dom(xmldoc)
        self.vcpus = _vcpus(xmldoc)
        _parse_children(xmldoc, {
            "cache": (LibvirtConfigGuestCacheTuneCache, self.caches),
            "monitor": (LibvirtConfigGuestRdtMonitor, self.monitors)})


class LibvirtConfigGuestMemoryTuneNode(vconfig.LibvirtConfigObject):
    def __init__(self, node_id=None, bandwidth=None, **kwargs):
        super().__init__(root_name="node", **kwargs)
        self.id = node_id
        self.bandwidth = bandwidth

    def format_dom(self):
        e = super().format_dom()
        e.set("id", str(self.id))
        e.set("bandwidth", str(self.bandwidth))
        return e

    def parse_dom(self, xmldoc):
        super().parse_dom(xmldoc)
        self.id = int(xmldoc.get("id"))
        self.bandwidth = int(xmldoc.get("bandwidth"))


class LibvirtConfigGuestRdtMemoryTune(vconfig.LibvirtConfigObject):
    """``<memorytune>`` (MBA), not to be confused with Nova's ``<memtune>``."""

    def __init__(self, vcpus=(), **kwargs):
        super().__init__(root_name="memorytune", **kwargs)
        self.vcpus = set(vcpus)
        self.nodes: list[LibvirtConfigGuestMemoryTuneNode] = []
        self.monitors: list[LibvirtConfigGuestRdtMonitor] = []

    def format_dom(self):
        e = super().format_dom()
        e.set("vcpus", cpulist.format(self.vcpus))
        for c in self.nodes + self.monitors:
            e.append(c.format_dom())
        return e

    def parse_dom(self, xmldoc):
        super().parse_dom(xmldoc)
        self.vcpus = _vcpus(xmldoc)
        _parse_children(xmldoc, {
            "node": (LibvirtConfigGuestMemoryTuneNode, self.nodes),
            "monitor": (LibvirtConfigGuestRdtMonitor, self.monitors)})


class LibvirtConfigGuestRdtCPUTune(vconfig.LibvirtConfigGuestCPUTune):
    """Nova's ``<cputune>`` plus cachetunes and memorytunes."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.cachetunes: list[LibvirtConfigGuestCacheTune] = []
        self.memorytunes: list[LibvirtConfigGuestRdtMemoryTune] = []

    @classmethod
    def extending(cls, base: vconfig.LibvirtConfigGuestCPUTune | None
                  ) -> LibvirtConfigGuestRdtCPUTune:
        """A copy of Nova's cputune that can also carry RDT elements."""
        new = cls()
        if base is not None:
            for name, value in vars(base).items():
                setattr(new, name, value)
        new.cachetunes = []
        new.memorytunes = []
        return new

    def format_dom(self):
        e = super().format_dom()
        for t in self.cachetunes + self.memorytunes:
            e.append(t.format_dom())
        return e

    def parse_dom(self, xmldoc):
        super().parse_dom(xmldoc)
        _parse_children(xmldoc, {
            "cachetune": (LibvirtConfigGuestCacheTune, self.cachetunes),
            "memorytune": (LibvirtConfigGuestRdtMemoryTune,
                           self.memorytunes)})


class LibvirtConfigGuestMetaNovaRdt(vconfig.LibvirtConfigObject):
    """nova-rdt's record in ``<metadata>``, as a Nova config object.

    The element itself is :class:`nova_rdt.allocation.metadata.RdtMetadata`,
    the class the libvirt hook reads it back with.
    """

    VERSION = metadata.VERSION

    def __init__(self):
        super().__init__(root_name="instance", ns_prefix=NOVA_RDT_PREFIX,
                         ns_uri=NOVA_RDT_NS)
        self.vcpus: set[int] = set()
        self.pmd_share = False
        self.rdt_class: str | None = None
        self.slo: str | None = None
        self.monitor = False
        self.cache: list[tuple[int, str, int]] = []    # id, type, ways
        self.mb: list[tuple[int, int, str]] = []       # id, value, unit
        # (id, type) -> decided mask, of the instance and of its class.
        self.masks: dict[tuple[int, str], int] = {}
        self.class_masks: dict[tuple[int, str], int] = {}

    def _record(self) -> metadata.RdtMetadata:
        return metadata.RdtMetadata(
            vcpus=frozenset(self.vcpus), pmd_share=self.pmd_share,
            rdt_class=self.rdt_class, monitor=self.monitor, slo=self.slo,
            cache=list(self.cache), mb=list(self.mb),
            masks=dict(self.masks), class_masks=dict(self.class_masks))

    def format_dom(self):
        return self._record().format_dom()

    def parse_dom(self, xmldoc):
        rec = metadata.RdtMetadata.parse_dom(xmldoc)
        self.vcpus = set(rec.vcpus)
        self.pmd_share, self.monitor = rec.pmd_share, rec.monitor
        self.rdt_class, self.slo = rec.rdt_class, rec.slo
        self.cache, self.mb = list(rec.cache), list(rec.mb)
        self.masks, self.class_masks = dict(rec.masks), dict(rec.class_masks)


def _to_kib(size: int, unit: str) -> int:
    scale = {"B": 1, "bytes": 1, "KiB": 1024, "K": 1024, "k": 1024,
             "MiB": 1 << 20, "M": 1 << 20, "GiB": 1 << 30, "G": 1 << 30}
    return size * scale[unit] // 1024


def strip_rdt(domain: etree._Element) -> None:
    """Remove cachetunes, memorytunes and our metadata from a domain XML."""
    cputune = domain.find("cputune")
    if cputune is not None:
        for tag in ("cachetune", "memorytune"):
            for el in cputune.findall(tag):
                cputune.remove(el)
    md = domain.find("metadata")
    if md is not None:
        for el in md.findall(f"{{{NOVA_RDT_NS}}}instance"):
            md.remove(el)
