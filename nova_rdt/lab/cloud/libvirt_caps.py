"""The ``<cache>`` and ``<memory_bandwidth>`` capabilities elements that
libvirt 9.0 reports on an RDT host, for an emulator profile.

From libvirt's virCapabilitiesFormatCaches/-MemoryBandwidth and
virResctrlInfoGetCache; fakelibvirt reports neither, so the Nova harness
adds them to its hosts' capabilities.
"""

from __future__ import annotations

from lxml import etree

from nova_rdt.emulator import kernel as emu_kernel
from nova_rdt.emulator import profiles as emu_profiles
from nova_rdt.resctrl.capabilities import format_cpu_list


def _format_int_pretty(value: int) -> tuple[int, str]:
    """libvirt's virFormatIntPretty(): the largest unit that divides."""
    unit = "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value == 0 or value % 1024:
            break
        value //= 1024
        unit = bigger
    return value, unit


def _cache_control(granularity: int, minimum: int, scope: str,
                   max_allocs: int) -> str:
    """One ``<control/>`` of a cache bank (virCapabilitiesFormatCaches)."""
    gran_short, unit = _format_int_pretty(granularity)
    min_short, min_unit = _format_int_pretty(minimum)
    if min_short:
        # Both values in the smaller of the two units.
        gran_div = granularity // gran_short
        min_div = minimum // min_short
        if min_div > gran_div:
            min_short *= min_div // gran_div
        elif min_div < gran_div:
            unit = min_unit
            gran_short *= gran_div // min_div
    attrs = f"granularity='{gran_short}'"
    if min_short:
        attrs += f" min='{min_short}'"
    return (f"<control {attrs} unit='{unit}' type='{scope}' "
            f"maxAllocs='{max_allocs}'/>")


def _monitor(profile: emu_profiles.Profile, prefix: str) -> str:
    """``<monitor>`` for features starting with ``prefix`` ('' if none)."""
    mon = profile.monitor
    features = [f for f in (mon.features if mon else ()) if
                f.startswith(prefix)]
    if not features:
        return ""
    attrs = ""
    if prefix == "llc_":
        # The kernel's max_threshold_occupancy, as the emulator computes it.
        threshold = ((profile.l3.size // mon.num_rmids)
                     // emu_kernel.MON_SCALE * emu_kernel.MON_SCALE)
        attrs = f"level='3' reuseThreshold='{threshold}' "
    body = "".join(f"<feature name='{f}'/>" for f in features)
    return f"<monitor {attrs}maxMonitors='{mon.num_rmids}'>{body}</monitor>"


def libvirt_resctrl_caps(profile: emu_profiles.Profile,
                         banks: dict[int, list[int]]
                         ) -> tuple[str, str | None]:
    """``<cache>`` and ``<memory_bandwidth>`` (or None) as libvirt 9.0 would
    report them for ``profile`` with L3 cache id -> CPUs ``banks``.

    The bank size is sysfs ``index3/size``; granularity = size /
    popcount(cbm_mask); ``min`` only when min_cbm_bits != 1; one control
    per info/L3* directory (type both, or code and data under CDP) with
    maxAllocs = its num_closids; the MB node of each L3 bank has
    granularity = bandwidth_gran, min = min_bandwidth and maxAllocs = MB's
    num_closids.  ``<monitor>`` elements follow the banks/nodes when
    info/L3_MON lists llc_*/mbm_* features.  A host with MBM but no MBA
    (e7-8890-v4) gets a ``<memory_bandwidth>`` holding only a
    ``<monitor>``: libvirt 9.0 formats exactly that, although its own
    capability.rng wants at least one ``<node>``.
    """
    l3 = profile.l3
    if profile.cdp:
        scopes = [("code", l3.num_closids // 2), ("data", l3.num_closids // 2)]
    else:
        scopes = [("both", l3.num_closids)]
    granularity = l3.size // l3.cbm_len
    minimum = l3.min_cbm_bits * granularity if l3.min_cbm_bits != 1 else 0
    size, size_unit = _format_int_pretty(l3.size)
    parts = ["<cache>"]
    for cache_id, cpus in sorted(banks.items()):
        controls = "".join(_cache_control(granularity, minimum, scope, n)
                           for scope, n in scopes)
        parts.append(
            f"<bank id='{cache_id}' level='{l3.level}' type='both' "
            f"size='{size}' unit='{size_unit}' "
            f"cpus='{format_cpu_list(cpus)}'>{controls}</bank>")
    parts.append(_monitor(profile, "llc_"))
    parts.append("</cache>")
    cache_xml = "".join(parts)

    mb = next((b for b in profile.bandwidth if b.name == "MB"), None)
    nodes = []
    if mb is not None:
        for cache_id, cpus in sorted(banks.items()):
            nodes.append(
                f"<node id='{cache_id}' cpus='{format_cpu_list(cpus)}'>"
                f"<control granularity='{mb.bandwidth_gran}' "
                f"min='{mb.min_bandwidth}' maxAllocs='{mb.num_closids}'/>"
                f"</node>")
    mon = _monitor(profile, "mbm_")
    membw_xml = (f"<memory_bandwidth>{''.join(nodes)}{mon}</memory_bandwidth>"
                 if nodes or mon else None)
    return cache_xml, membw_xml


def inject_resctrl_caps(caps_xml: str, cache_xml: str,
                        memory_bandwidth_xml: str | None) -> str:
    """Put a host's ``<cache>``/``<memory_bandwidth>`` where libvirt does:
    after the NUMA ``<topology>``, before ``<secmodel>``."""
    root = etree.fromstring(caps_xml)
    host_el = root.find("host")
    anchor = host_el.find("topology")
    pos = (list(host_el).index(anchor) + 1 if anchor is not None
           else len(host_el.findall("*")))
    for fragment in (cache_xml, memory_bandwidth_xml):
        if fragment:
            host_el.insert(pos, etree.fromstring(fragment))
            pos += 1
    return etree.tostring(root, encoding="unicode")
