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


# (what the layout reads of the hardware, the two settings) -> the layout
# or the refusal.  Every walk of the compute and the hook asks for it, and
# only a remount or a settings change can change it.
_PLANS: dict[tuple[object, ...], Layout | HostPrepError] = {}
_MAX_PLANS = 64


def _key(caps: caps_mod.Capabilities, reserved_ways: int,
         pmd_ways: int) -> tuple[object, ...]:
    bw = caps.bandwidth.get("MB")
    return (caps.root, reserved_ways, pmd_ways, caps.allocation_enabled,
            tuple((name, r.cbm_len, r.min_cbm_bits, tuple(sorted(r.domains)))
                  for name, r in sorted(caps.cache.items())),
            None if bw is None else (bw.unthrottled, tuple(bw.domain_ids)))


def plan(caps: caps_mod.Capabilities, reserved_ways: int,
         pmd_ways: int) -> Layout:
    """The layout, or HostPrepError saying what to change; worked out once
    per hardware and settings."""
    key = _key(caps, reserved_ways, pmd_ways)
    found = _PLANS.get(key)
    if found is None:
        try:
            found = _plan(caps, reserved_ways, pmd_ways)
        except HostPrepError as e:
            found = e
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = found
    if isinstance(found, HostPrepError):
        raise HostPrepError(str(found))
    return found


def _plan(caps: caps_mod.Capabilities, reserved_ways: int,
          pmd_ways: int) -> Layout:
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
