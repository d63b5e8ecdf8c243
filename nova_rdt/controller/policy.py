"""Policies: from an observation to the MB and ways each class should have.

Like the Kubernetes cpumanager's Policy, a policy is a small object with
one job and no I/O: :meth:`Policy.decide` reads an
:class:`~nova_rdt.controller.model.Observation` and returns one
:class:`~nova_rdt.controller.model.Decision` per class it wants changed.
Values it returns may be out of bounds or off-granularity; the
:mod:`~nova_rdt.controller.governor` clamps them, applies hysteresis and
the rate limit, so a policy stays a few lines of control law.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from nova_rdt.controller import model as m


class Policy(Protocol):
    name: str

    def decide(self, obs: m.Observation, bounds: m.Bounds,
               units: m.MbUnits) -> list[m.Decision]:
        ...


class StaticPolicy:
    """Keep every class at its static values: the baseline."""

    name = "static"

    def decide(self, obs, bounds, units):
        return [m.Decision(c.name, c.static_mb, c.static_ways, m.RESTORE)
                for c in obs.classes
                if (c.mb, c.ways) != (c.static_mb, c.static_ways)]


@dataclasses.dataclass
class SlackPolicy:
    """Heracles' top-level controller (Lo et al., ISCA'15), on MB and ways.

    The signal is the worst slack over protected instances,
    ``(target - latency) / target``:

    * below 0 (a violation): every class drops straight to the floor (MB
      at its minimum, ways at their minimum), as Heracles disables
      best-effort growth and cuts it back at once;
    * below ``low_slack``: MB comes down one step per period, and once
      MB is at its floor, a way goes;
    * above ``high_slack``: a way comes back first, then MB one step;
    * in between: hold (the band *is* the hysteresis: no oscillation
      around one threshold).

    Without any SLO signal this period it decides nothing.
    """

    low_slack: float = 0.10
    high_slack: float = 0.30
    name: str = "slack"

    def decide(self, obs, bounds, units):
        slacks = [p.slack for p in obs.protected if p.slack is not None]
        if not slacks:
            return []
        slack = min(slacks)
        out = []
        for c in obs.classes:
            mb_lo = _mb_floor(c, bounds, units)
            ways_lo = _ways_floor(c, bounds)
            if slack < 0:
                d = m.Decision(c.name, mb_lo, ways_lo, m.SLO_VIOLATED)
            elif slack < self.low_slack:
                if c.mb is not None and c.mb > mb_lo:
                    d = m.Decision(c.name, c.mb - bounds.mb_step, c.ways,
                                   m.SLO_LOW_SLACK)
                elif c.ways is not None and c.ways > ways_lo:
                    d = m.Decision(c.name, c.mb, c.ways - bounds.ways_step,
                                   m.SLO_LOW_SLACK)
                else:
                    continue
            elif slack > self.high_slack:
                if c.ways is not None and c.static_ways is not None \
                        and c.ways < c.static_ways:
                    d = m.Decision(c.name, c.mb, c.ways + bounds.ways_step,
                                   m.SLO_SLACK)
                elif c.mb is not None and c.static_mb is not None \
                        and c.mb < c.static_mb:
                    d = m.Decision(c.name, c.mb + bounds.mb_step, c.ways,
                                   m.SLO_SLACK)
                else:
                    continue
            else:
                continue
            if (d.mb, d.ways) != (c.mb, c.ways):
                out.append(d)
        return out


@dataclasses.dataclass
class BandwidthSharePolicy:
    """From MBM alone: keep the host's memory bandwidth below a target
    utilisation, giving protected instances first call on it.

    ``capacity`` (bytes/s) is the host's usable memory bandwidth (from
    STREAM or Intel MLC on the host); 0 learns it as the highest total
    ever observed, which underestimates until the host has been busy.
    Best effort may use ``capacity * utilisation - protected``, split over
    classes by their static MB.  A class above its share is scaled down
    in proportion (MB throttles a core's bandwidth about linearly); one
    below ``share * (1 - band)`` while throttled is raised in proportion
    too, aiming at the middle of the band (an idle class straight back to
    its static value).  The ``band`` is the hysteresis.  Ways are left
    alone: MBM says nothing about who needs cache.
    """

    capacity: float = 0.0
    utilisation: float = 0.7
    band: float = 0.25
    name: str = "bandwidth-share"

    def __post_init__(self) -> None:
        self._seen = self.capacity

    def decide(self, obs, bounds, units):
        prot = sum(p.bandwidth or 0.0 for p in obs.protected)
        be = sum(c.bandwidth or 0.0 for c in obs.classes)
        self._seen = max(self._seen, prot + be)
        cap = self.capacity or self._seen
        if cap <= 0:
            return []
        allowed = max(cap * self.utilisation - prot, 0.0)
        weights = {c.name: float(c.static_mb or 1) for c in obs.classes}
        total_w = sum(weights.values()) or 1.0
        out = []
        for c in obs.classes:
            if c.mb is None or c.bandwidth is None or c.static_mb is None:
                continue
            share = allowed * weights[c.name] / total_w
            if c.bandwidth > share and c.bandwidth > 0:
                want = c.mb * share / c.bandwidth
                mb = max(units.floor(want), _mb_floor(c, bounds, units))
                if mb < c.mb:
                    out.append(m.Decision(c.name, mb, c.ways,
                                          m.BW_OVER_SHARE))
            elif c.bandwidth < share * (1 - self.band) \
                    and c.mb < c.static_mb:
                # Back up in proportion too, aiming inside the band so
                # the next period does not cut again; an idle class
                # (no traffic) gets its static value at once.
                aim = share * (1 - self.band / 2)
                want = c.mb * aim / c.bandwidth if c.bandwidth > 0 \
                    else c.static_mb
                mb = min(units.floor(want), c.static_mb)
                if mb > c.mb:
                    out.append(m.Decision(c.name, mb, c.ways,
                                          m.BW_UNDER_SHARE))
        return out


def _mb_floor(c: m.ClassState, bounds: m.Bounds, units: m.MbUnits) -> int:
    lo = units.ceil(bounds.mb_min)
    return min(lo, c.static_mb) if c.static_mb is not None else lo


def _ways_floor(c: m.ClassState, bounds: m.Bounds) -> int | None:
    if c.static_ways is None:
        return None
    return min(bounds.ways_min, c.static_ways)


POLICIES = {
    "static": StaticPolicy,
    "slack": SlackPolicy,
    "bandwidth-share": BandwidthSharePolicy,
}


def make(name: str, **kwargs) -> Policy:
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(
            f"[rdt_controller] policy {name!r}: one of "
            f"{', '.join(sorted(POLICIES))}") from None
    made: Policy = cls(**kwargs)
    return made
