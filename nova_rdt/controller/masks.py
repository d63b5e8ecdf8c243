"""Class masks the controller may write: always inside the static mask.

A class only ever shrinks inside the ways it was given at creation and
grows back to them, so its mask can never reach a protected instance's
ways, the HOST domain's, or anyone else's, and every mask stays one the
kernel accepts (checked with the kernel's own rules in
:func:`nova_rdt.resctrl.cbm.check`).
"""

from __future__ import annotations

from nova_rdt.resctrl import cbm


def lowest_bits(static: int, ways: int) -> int:
    """The ``ways`` lowest set bits of ``static``."""
    if ways < 0 or ways > cbm.popcount(static):
        raise ValueError(f"{ways} ways are not inside mask {static:x}")
    out = 0
    rest = static
    for _ in range(ways):
        low = rest & -rest
        out |= low
        rest &= ~low
    return out


def ways_range(static: int, min_cbm_bits: int, ways_min: int) -> range:
    """The way counts a class with ``static`` may be given."""
    lo = max(min_cbm_bits, ways_min, 1)
    hi = cbm.popcount(static)
    return range(min(lo, hi), hi + 1)


def class_mask(static: int, ways: int, cbm_len: int, min_cbm_bits: int,
               sparse: bool) -> int:
    """The mask for ``ways`` ways of a class whose static mask is
    ``static``: a subset of it, starting at its lowest way, so a
    contiguous static mask gives contiguous masks and a sparse one keeps
    its first run at least ``min_cbm_bits`` long.  Raises
    :class:`~nova_rdt.resctrl.cbm.CbmError` (kernel wording) otherwise.
    """
    cbm.check(static, cbm_len, min_cbm_bits, sparse)
    if ways < min_cbm_bits:
        raise cbm.CbmError(f"Need at least {min_cbm_bits} bits in the mask")
    mask = lowest_bits(static, ways)
    cbm.check(mask, cbm_len, min_cbm_bits, sparse)
    return mask
