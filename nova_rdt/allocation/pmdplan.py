"""What the OVS-DPDK PMD COS should hold.  Pure.

In the ONP layout the PMD cores share ways with every forwarding VM:
the PMD mask is the configured base ways joined with the ways of each
running instance that asks to share (``rdt:pmd_share``).  libvirt counts
every group's ways as used, so the PMD mask may only ever cover ways that
are already taken (base, sharing VMs) and must never run ahead of them.
When nothing is shared and there is no base, the PMDs share the host's
reserved ways instead: a CBM may not be empty.
"""

from __future__ import annotations

import dataclasses

from nova_rdt.resctrl.schemata import Schemata


@dataclasses.dataclass(frozen=True)
class PmdPlan:
    schemata: Schemata
    sharing: tuple[str, ...]      # instance uuids whose ways are included


def plan(resources: dict[str, list[int]], base: Schemata | None,
         root: Schemata, shares: dict[str, Schemata],
         mb_full: dict[str, int] | None = None) -> PmdPlan:
    """The PMD group's schemata.

    ``resources`` maps each cache resource (L3, or L3CODE/L3DATA) to its
    cache ids; ``shares`` maps instance uuid to the schemata of its group.
    MB resources in ``mb_full`` are set to their maximum: PMDs are never
    throttled.
    """
    lines: dict[str, dict[int, int]] = {}
    for res, ids in resources.items():
        lines[res] = {}
        for cid in ids:
            mask = base.get(res, cid) or 0 if base else 0
            for s in shares.values():
                mask |= s.get(res, cid) or 0
            if not mask:
                mask = root.get(res, cid) or 0
            lines[res][cid] = mask
    for res, full in (mb_full or {}).items():
        ids = root.domains(res) if res in root.resources() else {}
        lines[res] = {cid: full for cid in ids}
    return PmdPlan(Schemata(lines), tuple(sorted(shares)))
