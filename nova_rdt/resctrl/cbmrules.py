"""What a cache resource's masks may be, and the ways other groups hold.

One definition of each for every layer: the placement solver, the state
a compute publishes, the hook's PMD COS and the controller all ask the
same two questions -- "which mask do these rules take for these ways?"
and "which ways does anyone else hold?" -- and must not answer them
differently.  Pure: integers and mappings in, integers out.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses

from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm

# resource -> cache id -> mask, as a group's schemata holds its cache lines.
Lines = Mapping[str, Mapping[int, int]]


def longest_run(mask: int) -> int:
    """The most ways in a row ``mask`` holds (0 for 0).

    libvirt makes a domain's group from its ``<cachetune>`` size and looks
    only for contiguous free runs (virResctrlAllocFindUnused),
    whatever ``sparse_masks`` says: the largest group it can make in free
    ways ``mask`` has this many ways."""
    return max((r.length for r in cbm.runs(mask)), default=0)


def span(mask: int) -> int:
    """The smallest contiguous mask covering ``mask`` (0 for 0)."""
    if not mask:
        return 0
    low = (mask & -mask).bit_length() - 1
    return cbm.Run(low, mask.bit_length() - low).mask


@dataclasses.dataclass(frozen=True)
class CbmRules:
    """The kernel's rules for one cache resource's masks: ``cbm_len``
    ways, at least ``min_bits`` in the lowest run, one run unless the
    resource takes ``sparse`` masks."""

    cbm_len: int
    min_bits: int = 1
    sparse: bool = False

    @classmethod
    def of(cls, resource: caps_mod.CacheResource) -> CbmRules:
        """The rules of one resource as resctrl reads them (a minimum of
        0 still means one way: a CBM may not be empty)."""
        return cls(resource.cbm_len, max(resource.min_cbm_bits, 1),
                   resource.sparse_masks)

    @property
    def full(self) -> int:
        return cbm.full_mask(self.cbm_len)

    def check(self, mask: int) -> None:
        """CbmError, in the kernel's words, for a mask it would refuse."""
        cbm.check(mask, self.cbm_len, self.min_bits, self.sparse)

    def valid(self, mask: int) -> bool:
        try:
            self.check(mask)
        except cbm.CbmError:
            return False
        return True

    def cover(self, ways: int) -> int:
        """The least one group must hold to hold ``ways`` under these
        rules: their span, or the ways themselves where masks may be
        sparse (0 for none)."""
        return ways if self.sparse else span(ways)


def union(groups: Iterable[Lines], resources: Iterable[str] | None = None
          ) -> dict[tuple[str, int], int]:
    """(resource, cache id) -> the ways any of ``groups`` holds there.

    "Used by others" is this over every group but the one asking; only
    ``resources`` count when given (the cache ones, leaving MB out).
    """
    wanted = None if resources is None else frozenset(resources)
    out: dict[tuple[str, int], int] = {}
    for lines in groups:
        for res, per in lines.items():
            if wanted is not None and res not in wanted:
                continue
            for cid, mask in per.items():
                out[res, cid] = out.get((res, cid), 0) | mask
    return out
