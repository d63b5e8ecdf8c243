"""What the OVS-DPDK PMD COS should hold.  Pure.

In the ONP layout the PMD cores share ways with every forwarding VM that
asks to (``rdt:pmd_share``): the PMD mask covers the configured base ways
and each sharing VM's ways, and no other VM's.

A CBM must be one run of ones unless ``info/<res>/sparse_masks`` is 1, so
the PMD mask is the *span* from the lowest to the highest of those ways.
Ways inside the span that no sharing VM holds are covered too (a sharer
in the middle left); libvirt counts every group's ways as used, so they
stay the PMDs' until a sharer takes them or the span shrinks.
:mod:`nova_rdt.allocation.placement` places sharers inside or next to
the span, so a plan it made never needs more.

If the span would cover a way of a non-sharing VM, of a class group or of
the host -- a domain placed by someone else, a moment before its decided
masks are written -- the mask is *degraded*: the largest valid mask that
keeps the base, dropping the sharing VMs it cannot reach.  Never an
invalid mask.  When nothing is shared and there is no base, the PMDs
share the host's reserved ways: a CBM may not be empty.
"""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Mapping
import dataclasses

from nova_rdt import naming
from nova_rdt.allocation import placement
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.schemata import Schemata

# libvirt's cache types (the planner's kinds) as resctrl resources.
RESOURCE_OF_KIND = naming.RESOURCE_OF_KIND


@dataclasses.dataclass(frozen=True)
class CacheRules:
    """What the kernel accepts for one cache resource."""

    cbm_len: int
    min_cbm_bits: int = 1
    sparse: bool = False


@dataclasses.dataclass(frozen=True)
class IdPlan:
    """The PMD mask of one cache id of one resource."""

    mask: int
    absorbed: int = 0                 # ways in the span no sharing VM holds
    dropped: tuple[str, ...] = ()     # sharing VMs the mask cannot cover


@dataclasses.dataclass(frozen=True)
class PmdPlan:
    schemata: Schemata
    sharing: tuple[str, ...]      # instance uuids whose ways are included
    dropped: tuple[str, ...] = ()     # sharing but not covered: degraded
    absorbed: Mapping[str, Mapping[int, int]] = dataclasses.field(
        default_factory=dict)         # resource -> id -> withheld free ways

    @property
    def degraded(self) -> bool:
        return bool(self.dropped)


def plan_id(rules: CacheRules, base: int, shares: Mapping[str, int],
            others: int, fallback: int) -> IdPlan:
    """The PMD mask on one cache id.

    ``shares`` maps each sharing instance to its mask here, ``others`` is
    the union of the masks it must not cover (the host's, other
    instances', class groups'; the PMD group excluded), and
    ``fallback`` what to share when there is nothing else (the host's
    ways).  The result always passes :func:`cbm.check`.
    """
    full = cbm.full_mask(rules.cbm_len)
    others &= full
    want = base
    for m in shares.values():
        want |= m
    if not want:
        return IdPlan(fallback)
    cover = placement.pmd_cover(want, rules.sparse)
    if not cover & others:
        return _valid(rules, IdPlan(cover, cover & ~want), fallback, shares)
    if rules.sparse:
        mask = want & ~others
        return _valid(rules, IdPlan(mask, 0, _uncovered(shares, mask)),
                      fallback, shares)
    # Degraded: within the run of ways free of other groups that holds
    # the base (or, without a base, that covers the most shared ways),
    # span what is wanted there.
    runs = [r.mask for r in cbm.runs(~others & full)]
    if base:
        chosen = next((r for r in runs if base & r == base), base)
    else:
        chosen = max(runs, key=lambda r: (cbm.popcount(want & r), -r),
                     default=0)
    mask = placement.span(want & chosen)
    return _valid(rules, IdPlan(mask, mask & ~want, _uncovered(shares, mask)),
                  fallback, shares)


def _uncovered(shares: Mapping[str, int], mask: int) -> tuple[str, ...]:
    return tuple(sorted(u for u, m in shares.items() if m & ~mask))


def _valid(rules: CacheRules, p: IdPlan, fallback: int,
           shares: Mapping[str, int]) -> IdPlan:
    try:
        cbm.check(p.mask, rules.cbm_len, rules.min_cbm_bits, rules.sparse)
    except cbm.CbmError:
        # Only reachable with a base the kernel refuses on its own (a
        # layout not made by host preparation): share the host's ways
        # rather than write a bad mask.
        return IdPlan(fallback, 0, tuple(sorted(u for u, m in shares.items()
                                                if m)))
    return p


def plan(resources: Mapping[str, list[int]], base: Schemata | None,
         root: Schemata, shares: Mapping[str, Schemata],
         mb_full: Mapping[str, int] | None = None,
         rules: Mapping[str, CacheRules] | None = None,
         others: Mapping[str, Mapping[int, int]] | None = None,
         pmd_ids: Collection[int] | None = None) -> PmdPlan:
    """The PMD group's schemata.

    ``resources`` maps each cache resource (L3, or L3CODE/L3DATA) to its
    cache ids; ``shares`` maps instance uuid to the schemata of its group;
    ``rules`` gives each resource's kernel rules (default: 32 contiguous
    ways); ``others`` the union of the masks of the groups the PMD COS
    must not cover (default: the root's).  MB resources
    in ``mb_full`` are set to their maximum: PMDs are never throttled.
    ``pmd_ids``: the cache ids whose CPUs run PMD threads (None: all).
    On the others no PMD runs, so there is nothing to share and no base
    to keep: the PMD group holds the host's ways there (a CBM may not be
    empty), and the base's ways go to instances, as
    :mod:`nova_rdt.allocation.placement` gives them.
    """
    lines: dict[str, dict[int, int]] = {}
    dropped: set[str] = set()
    absorbed: dict[str, dict[int, int]] = {}
    for res, ids in resources.items():
        lines[res] = {}
        r = (rules or {}).get(res) or CacheRules(32)
        for cid in ids:
            fallback = root.get(res, cid) or 0
            # libvirt copies the default group's mask into the cache ids
            # a domain did not ask for: that is no allocation to share.
            on_pmd = pmd_ids is None or cid in pmd_ids
            here = {u: m for u, m in ((u, s.get(res, cid) or 0)
                                      for u, s in shares.items())
                    if m != fallback} if on_pmd else {}
            p = plan_id(
                r, (base.get(res, cid) or 0) if base and on_pmd else 0,
                here,
                (others or {}).get(res, {}).get(cid, fallback), fallback)
            lines[res][cid] = p.mask
            dropped.update(p.dropped)
            if p.absorbed:
                absorbed.setdefault(res, {})[cid] = p.absorbed
    for res, full in (mb_full or {}).items():
        mb_ids = root.domains(res) if res in root.resources() else {}
        lines[res] = {cid: full for cid in mb_ids}
    return PmdPlan(Schemata(lines),
                   tuple(sorted(set(shares) - dropped)),
                   tuple(sorted(dropped)), absorbed)


def for_groups(caps: caps_mod.Capabilities,
               groups: Mapping[str, Schemata], prefix: str,
               sharers: Mapping[str, str], base: Schemata | None,
               pmd_ids: Collection[int] | None,
               keep_free: Schemata | None = None) -> PmdPlan:
    """The PMD COS of a host, from the schemata of its control groups.

    ``groups`` maps every control group's name (the root's is ``/``) to
    its schemata; ``sharers`` maps each instance that shares with the
    PMDs (uuid) to its group.  The one rule for the hook (which reads the
    groups as they are) and the driver (which passes the masks it just
    decided), so that whichever of them writes last writes the same.
    The PMD COS may not cover the root's ways, libvirt's groups' or
    nova-rdt's class groups'.  Foreign groups (pqos ``COS*``, ...)
    share nothing with instances and a new group starts with every way,
    so they are left out.  ``keep_free``: ways it may not cover either,
    for a moment (a domain about to start there: libvirt's allocator
    counts the PMD COS's ways as used).
    """
    pmd_name = naming.pmd_group(prefix)
    classes = prefix + naming.CLASS_INFIX
    share_set = set(sharers.values())
    others: dict[str, dict[int, int]] = {}
    for name, s in groups.items():
        if name != "/" and (name == pmd_name or name in share_set or not (
                naming.libvirt_group_machine(name)
                or name.startswith(classes))):
            continue
        for res in s.resources():
            if res not in caps.cache:
                continue
            per = others.setdefault(res, {})
            for cid, mask in s.domains(res).items():
                per[cid] = per.get(cid, 0) | mask
    if keep_free is not None:
        for res in keep_free.resources():
            per = others.setdefault(res, {})
            for cid, mask in keep_free.domains(res).items():
                per[cid] = per.get(cid, 0) | mask
    return plan(
        {name: sorted(res.domains) for name, res in caps.cache.items()},
        base, groups["/"],
        {u: groups[g] for u, g in sorted(sharers.items()) if g in groups},
        {name: bw.unthrottled for name, bw in caps.bandwidth.items()
         if name == "MB"},
        rules={name: CacheRules(res.cbm_len, res.min_cbm_bits,
                                res.sparse_masks)
               for name, res in caps.cache.items()},
        others=others, pmd_ids=pmd_ids)
