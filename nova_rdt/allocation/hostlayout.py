"""Host layout: split the cache into the HOST and MANAGED domains (pure).

libvirt allocates only ways that no group holds, and after mount the root
group holds them all.  So before any instance can get ways, the root's L3
masks are shrunk to the reserved host ways (the HOST domain of the
BarbequeRTRM split), and the OVS-DPDK PMD group gets its shared base ways
at the top of the mask.  Everything between is what nova-rdt hands out.
:mod:`nova_rdt.host.prep` writes the layout; this module only plans it.
"""

from __future__ import annotations

import dataclasses

from nova_rdt import exception
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.schemata import Schemata


class HostPrepError(exception.NovaRdtError, ValueError):
    """The [rdt] configuration cannot be honoured on this host."""


@dataclasses.dataclass(frozen=True)
class Layout:
    """The masks host preparation writes, per cache resource."""

    root: Schemata
    pmd: Schemata | None
    managed_ways: int            # ways per cache id left for instances


def plan(caps: caps_mod.Capabilities, reserved_ways: int,
         pmd_ways: int) -> Layout:
    """Compute the layout, or raise HostPrepError saying what to change."""
    if not caps.allocation_enabled:
        raise HostPrepError(f"resctrl at {caps.root} offers no cache or "
                            f"bandwidth allocation")
    root: dict[str, dict[int, int]] = {}
    pmd: dict[str, dict[int, int]] = {}
    managed = None
    for name in ("L3CODE", "L3DATA") if caps.cdp else ("L3",):
        res = caps.cache.get(name)
        if res is None:
            continue
        n, low = res.cbm_len, res.min_cbm_bits
        if reserved_ways < max(low, 1):
            raise HostPrepError(
                f"[rdt] reserved_host_ways={reserved_ways} is below {name}'s "
                f"min_cbm_bits={low}")
        if pmd_ways and pmd_ways < max(low, 1):
            raise HostPrepError(
                f"[rdt] pmd_shared_ways={pmd_ways} is below {name}'s "
                f"min_cbm_bits={low}")
        left = n - reserved_ways - pmd_ways
        if left < max(low, 1):
            raise HostPrepError(
                f"[rdt] reserved_host_ways={reserved_ways} + "
                f"pmd_shared_ways={pmd_ways} leave {max(left, 0)} of "
                f"{name}'s {n} ways for instances; at least "
                f"{max(low, 1)} are needed")
        managed = left if managed is None else min(managed, left)
        root[name] = {d: cbm.full_mask(reserved_ways) for d in res.domains}
        if pmd_ways:
            top = cbm.Run(n - pmd_ways, pmd_ways).mask
            pmd[name] = {d: top for d in res.domains}
    if pmd and "MB" in caps.bandwidth:
        bw = caps.bandwidth["MB"]
        pmd["MB"] = {d: bw.unthrottled for d in bw.domain_ids}
    return Layout(Schemata(root), Schemata(pmd) if pmd else None,
                  managed or 0)
