"""The hook's side of decided placement: write the masks nova-rdt decided
for a domain into libvirt's group of it, but only masks that are safe.

The masks come from the domain's XML, which whoever can define a domain
controls, and the hook runs as root.  So a decided mask is written only
when it gives the domain exactly the number of ways libvirt allocated
(its size, from its own ``<cachetune>``), passes the kernel's rules, and
overlaps no other group's ways (the host's, another domain's, a class's,
a foreign tool's); a sharer may overlap the PMD COS, which it joins.
Anything else keeps libvirt's choice and is said in the log.  Pure, but
for :func:`apply`.
"""

from __future__ import annotations

from collections.abc import Mapping

from nova_rdt import naming
from nova_rdt.resctrl import cbm

RESOURCE_OF_KIND = naming.RESOURCE_OF_KIND


def check(want: Mapping[tuple[int, str], int],
          current: Mapping[str, Mapping[int, int]],
          others: Mapping[str, Mapping[int, int]],
          rules: Mapping[str, tuple[int, int, bool]]
          ) -> tuple[dict[str, dict[int, int]], str | None]:
    """(the lines to write, why not) for the decided masks ``want``.

    ``current``: the group's schemata as libvirt wrote it; ``others``:
    per resource and cache id the union of every other group's mask the
    domain may not share (the PMD COS left out for a sharer); ``rules``:
    per resource (cbm_len, min_cbm_bits, sparse).  Only resources and
    ids the group already holds are written.
    """
    lines: dict[str, dict[int, int]] = {}
    for (cid, kind), mask in sorted(want.items()):
        res = RESOURCE_OF_KIND.get(kind)
        if res is None or res not in rules:
            return {}, f"no {kind} cache resource on this host"
        have = current.get(res, {}).get(cid)
        if have is None:
            return {}, f"the group has no {res} line for cache id {cid}"
        n, low, sparse = rules[res]
        try:
            cbm.check(mask, n, low, sparse)
        except cbm.CbmError as e:
            return {}, f"{res}:{cid}={mask:x}: {e}"
        if cbm.popcount(mask) != cbm.popcount(have):
            return {}, (f"{res}:{cid}={mask:x} holds {cbm.popcount(mask)} "
                        f"ways, libvirt allocated {cbm.popcount(have)}")
        taken = others.get(res, {}).get(cid, 0)
        if mask & taken:
            return {}, (f"{res}:{cid}={mask:x} overlaps other groups' ways "
                        f"{mask & taken:x}")
        if mask != have:
            lines.setdefault(res, {})[cid] = mask
    return lines, None
