"""Between a policy and the hardware: bounds, hysteresis, rate limit.

Pure and clocked by the observation's ``now``, so it is tested without
sleeping.  What it guarantees whatever the policy says:

* MB stays a value the kernel keeps as written, between the operator's
  floor and the class's static value;
* ways stay between the floor (at least ``min_cbm_bits``) and the
  class's static count (the mask itself comes from
  :mod:`~nova_rdt.controller.masks`, inside the static mask);
* a class changes at most once per ``min_interval`` seconds, except to
  cut on an SLO violation (waiting then would only lengthen it);
* a raise happens only after ``raise_hold`` consecutive periods asking
  for one (give back slowly, take quickly: Heracles' asymmetry).
"""

from __future__ import annotations

import dataclasses

from nova_rdt.controller import model as m


@dataclasses.dataclass(frozen=True)
class Action:
    cls: str
    mb: int | None
    ways: int | None
    reason: str           # the policy's reason
    applied: bool         # False: held (see ``held``)
    held: str | None = None


@dataclasses.dataclass
class Governor:
    bounds: m.Bounds
    units: m.MbUnits | None
    min_cbm_bits: int = 1
    min_interval: float = 0.0
    raise_hold: int = 1
    _last_change: dict[str, float] = dataclasses.field(default_factory=dict)
    _raise_asks: dict[str, int] = dataclasses.field(default_factory=dict)

    def clamp(self, c: m.ClassState, d: m.Decision) -> tuple:
        mb = d.mb
        if mb is not None and c.static_mb is not None and \
                self.units is not None:
            lo = min(self.units.ceil(self.bounds.mb_min), c.static_mb)
            mb = min(max(self.units.floor(mb), lo), c.static_mb)
            if not self.units.valid(mb):
                # Only the static value itself may be off-granularity
                # (it was written by someone else); keep it as it is.
                mb = c.static_mb
        elif c.mb is None:
            mb = None
        else:
            mb = c.mb
        ways = d.ways
        if ways is not None and c.static_ways is not None:
            lo = min(max(self.bounds.ways_min, self.min_cbm_bits, 1),
                     c.static_ways)
            ways = min(max(ways, lo), c.static_ways)
        else:
            ways = c.ways
        return mb, ways

    def filter(self, obs: m.Observation,
               decisions: list[m.Decision]) -> list[Action]:
        by_name = {c.name: c for c in obs.classes}
        wanted = {d.cls for d in decisions}
        for name in list(self._raise_asks):
            if name not in wanted:
                self._raise_asks.pop(name)
        out = []
        for d in decisions:
            c = by_name.get(d.cls)
            if c is None:
                continue
            mb, ways = self.clamp(c, d)
            if (mb, ways) == (c.mb, c.ways):
                self._raise_asks.pop(d.cls, None)
                continue
            up = (mb or 0) > (c.mb or 0) or (ways or 0) > (c.ways or 0)
            down = (mb or 0) < (c.mb or 0) or (ways or 0) < (c.ways or 0)
            if up and not down:
                asks = self._raise_asks.get(d.cls, 0) + 1
                self._raise_asks[d.cls] = asks
                if asks < self.raise_hold:
                    out.append(Action(d.cls, mb, ways, d.reason, False,
                                      m.HOLD_HYSTERESIS))
                    continue
            else:
                self._raise_asks.pop(d.cls, None)
            last = self._last_change.get(d.cls)
            urgent = d.reason == m.SLO_VIOLATED and not up
            if last is not None and not urgent and \
                    obs.now - last < self.min_interval:
                out.append(Action(d.cls, mb, ways, d.reason, False,
                                  m.HOLD_RATE))
                continue
            self._last_change[d.cls] = obs.now
            self._raise_asks.pop(d.cls, None)
            out.append(Action(d.cls, mb, ways, d.reason, True))
        return out
