"""Capacity bitmask (CBM) arithmetic.

Pure functions over integers: no I/O, so the allocator, the filter and the
emulator can share one definition of "contiguous", "free" and "fits", and it
can be tested exhaustively.

A CBM is an int whose bit *i* stands for cache way *i*.  ``cbm_len`` is the
number of ways (the popcount of ``info/<res>/cbm_mask``).
"""

from __future__ import annotations

import dataclasses

from nova_rdt import exception


@dataclasses.dataclass(frozen=True, order=True)
class Run:
    """Consecutive set bits: ``length`` ways starting at way ``start``."""

    start: int
    length: int

    @property
    def mask(self) -> int:
        return ((1 << self.length) - 1) << self.start

    def __str__(self) -> str:
        return f"{self.length}@{self.start}({self.mask:x})"


def full_mask(cbm_len: int) -> int:
    return (1 << cbm_len) - 1


def popcount(mask: int) -> int:
    return bin(mask).count("1")


def runs(mask: int) -> list[Run]:
    """Every maximal run of set bits, lowest first."""
    out = []
    pos = 0
    while mask:
        if mask & 1:
            start = pos
            while mask & 1:
                mask >>= 1
                pos += 1
            out.append(Run(start, pos - start))
        else:
            # Skip a whole block of zeros at once.
            skip = (mask & -mask).bit_length() - 1
            mask >>= skip
            pos += skip
    return out


def is_contiguous(mask: int) -> bool:
    """True for a single run of ones.  Zero is not contiguous."""
    if mask <= 0:
        return False
    low = mask & -mask
    return (mask + low) & mask == 0


def free_runs(used: int, cbm_len: int) -> list[Run]:
    """Maximal runs of ways that no mask in ``used`` holds."""
    return runs(~used & full_mask(cbm_len))


def largest_free_run(used: int, cbm_len: int) -> int:
    return max((r.length for r in free_runs(used, cbm_len)), default=0)


def best_fit(free: int, ways: int) -> int | None:
    """The mask of ``ways`` ways taken from the smallest free run that fits.

    Within that run the lowest ways are used.  This is libvirt's policy
    (virResctrlAllocFindUnused), so plans made here match what libvirt will
    really do when it allocates.  Ties go to the lowest run.
    """
    if ways <= 0:
        raise ValueError("ways must be positive")
    fitting = [r for r in runs(free) if r.length >= ways]
    if not fitting:
        return None
    best = min(fitting, key=lambda r: (r.length, r.start))
    return Run(best.start, ways).mask


class CbmError(exception.NovaRdtError, ValueError):
    """A mask the hardware would refuse; ``str()`` is the kernel's wording."""


def check(mask: int, cbm_len: int, min_cbm_bits: int = 1,
          sparse: bool = False) -> None:
    """Raise CbmError for a mask the kernel's cbm_validate() would refuse.

    Same order and wording as the kernel, so an error seen before a write
    reads the same as one quoted from ``last_cmd_status`` after it.
    """
    if (min_cbm_bits > 0 and mask == 0) or mask < 0 \
            or mask > full_mask(cbm_len):
        raise CbmError("Mask out of range")
    if mask == 0:
        return
    if not sparse and not is_contiguous(mask):
        raise CbmError(f"The mask {mask:x} has non-consecutive 1-bits")
    # The kernel counts only the lowest run, even for sparse masks.
    if runs(mask)[0].length < min_cbm_bits:
        raise CbmError(f"Need at least {min_cbm_bits} bits in the mask")


def ways_to_bytes(ways: int, cache_size: int, cbm_len: int) -> int:
    return ways * way_size(cache_size, cbm_len)


def way_size(cache_size: int, cbm_len: int) -> int:
    """Bytes per way: libvirt's "granularity" (size / popcount(cbm_mask))."""
    return cache_size // cbm_len


def bytes_to_ways(size: int, cache_size: int, cbm_len: int) -> int:
    """Ways for exactly ``size`` bytes; refuse sizes libvirt would refuse.

    libvirt requires a whole multiple of the granularity; rounding here
    would make nova-rdt promise one size and libvirt allocate another.
    """
    gran = way_size(cache_size, cbm_len)
    if size <= 0:
        raise ValueError("cache size must be positive")
    if size % gran:
        raise ValueError(
            f"{size} bytes is not a multiple of the way size {gran} bytes")
    return size // gran


def mb_round(value: int, gran: int, min_bw: int, max_bw: int) -> int:
    """Round an MB request exactly as the kernel's bw_validate() does.

    Range is checked on the raw value, then it is rounded *up* to the
    granularity (so 11 with gran 10 becomes 20, never 10).
    """
    if value < min_bw or value > max_bw:
        raise ValueError(
            f"MB value {value} out of range [{min_bw},{max_bw}]")
    if gran <= 1:
        return value
    return -(-value // gran) * gran
