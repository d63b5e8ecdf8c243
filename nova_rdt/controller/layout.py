"""Between schemata and the policies' two numbers per class.  Pure.

A policy thinks in "MB" and "ways per cache id"; a class group holds a
schemata with masks per cache resource and id (L3, or L3CODE and L3DATA
under CDP) and MB per node.  ``ways`` is the smallest way count over the
class's static masks; giving a class ``w`` ways takes the same number of
ways, ``static_ways - w``, from every static mask, from the top (see
:mod:`~nova_rdt.controller.masks`).
"""

from __future__ import annotations

import dataclasses

from nova_rdt.controller import masks
from nova_rdt.controller import model as m
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.schemata import CACHE_RESOURCES
from nova_rdt.resctrl.schemata import Schemata


@dataclasses.dataclass(frozen=True)
class CacheRules:
    """What the kernel requires of a mask for one cache resource."""

    cbm_len: int
    min_cbm_bits: int
    sparse: bool


def static_ways(static: Schemata) -> int | None:
    counts = [cbm.popcount(v) for r in static.resources()
              if r in CACHE_RESOURCES for v in static.domains(r).values()]
    return min(counts) if counts else None


def current_ways(static: Schemata, current: Schemata) -> int | None:
    """Ways by the same measure as :func:`target`: static count minus the
    most ways taken from any static mask."""
    sw = static_ways(static)
    if sw is None:
        return None
    taken = 0
    for r in static.resources():
        if r not in CACHE_RESOURCES:
            continue
        for d, smask in static.domains(r).items():
            cur = current.get(r, d)
            if cur is None:
                continue
            taken = max(taken, cbm.popcount(smask) - cbm.popcount(cur))
    return max(sw - taken, 0)


def mb_value(s: Schemata) -> int | None:
    vals = list(s.domains("MB").values())
    return min(vals) if vals else None


def observe(name: str, static: Schemata, current: Schemata,
            bandwidth=None, local=None, occupancy=None) -> m.ClassState:
    return m.ClassState(name, mb_value(current), mb_value(static),
                        current_ways(static, current), static_ways(static),
                        bandwidth, local, occupancy)


def target(static: Schemata, mb: int | None, ways: int | None,
           rules: dict[str, CacheRules]) -> Schemata:
    """The schemata for ``mb`` and ``ways``: inside ``static`` always.

    Every mask is checked with the kernel's rules before it is returned
    (:class:`~nova_rdt.resctrl.cbm.CbmError` otherwise); MB never goes
    above a node's static value.
    """
    sw = static_ways(static)
    lines: dict[str, dict[int, int]] = {}
    for r in static.resources():
        doms = static.domains(r)
        if r in CACHE_RESOURCES:
            rule = rules[r]
            take = 0 if ways is None or sw is None else max(sw - ways, 0)
            lines[r] = {d: masks.class_mask(
                smask, cbm.popcount(smask) - take, rule.cbm_len,
                rule.min_cbm_bits, rule.sparse) for d, smask in doms.items()}
        elif r == "MB":
            lines[r] = {d: v if mb is None else min(mb, v)
                        for d, v in doms.items()}
    return Schemata(lines)


def others_masks(schematas) -> dict[tuple[str, int], int]:
    """(resource, cache id) -> the ways other groups hold."""
    used: dict[tuple[str, int], int] = {}
    for s in schematas:
        for r in s.resources():
            if r in CACHE_RESOURCES:
                for d, v in s.domains(r).items():
                    used[r, d] = used.get((r, d), 0) | v
    return used


def new_sharing(now: dict[str, Schemata],
                then: dict[str, Schemata]) -> dict[tuple[str, int], int]:
    """Ways other groups hold now that they did not hold when the class
    was adopted (a group that shared with the class from the start, such
    as a foreign one with every way, is not a new sharer)."""
    used: dict[tuple[str, int], int] = {}
    for name, s in now.items():
        before = then.get(name)
        for r in s.resources():
            if r not in CACHE_RESOURCES:
                continue
            for d, v in s.domains(r).items():
                old = before.get(r, d) or 0 if before is not None else 0
                used[r, d] = used.get((r, d), 0) | (v & ~old)
    return used


def regains_taken_ways(target: Schemata, current: Schemata,
                       used: dict[tuple[str, int], int]) -> bool:
    """Whether ``target`` would take back a way that another group got
    while the class was smaller (libvirt sees the ways a class gave up
    as free, and may give them to a new instance)."""
    for r in target.resources():
        if r not in CACHE_RESOURCES:
            continue
        for d, v in target.domains(r).items():
            gained = v & ~(current.get(r, d) or 0)
            if gained & used.get((r, d), 0):
                return True
    return False


def keep_caches(target: Schemata, current: Schemata) -> Schemata:
    """``target`` with the cache masks left as they are now."""
    lines = {r: dict(target.domains(r)) for r in target.resources()}
    for r in lines:
        if r in CACHE_RESOURCES:
            lines[r] = {d: current.get(r, d) or v
                        for d, v in lines[r].items()}
    return Schemata(lines)
