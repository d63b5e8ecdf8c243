"""What the controller sees and what it may do: plain values, no I/O.

The vocabulary follows the BarbequeRTRM paper: the HOST domain is the
root group's reserved ways (never touched here); the MANAGED domain is
everything nova-rdt allocated.  Within it, *protected* instances are left
exactly as their flavors set them, and *best-effort classes* (the
``nova-rdt-class-<name>`` groups) are what the controller resizes.
"""

from __future__ import annotations

import dataclasses

PERCENT = "percent"
MBPS = "MBps"


@dataclasses.dataclass(frozen=True)
class MbUnits:
    """The host's MB values for one node, as the kernel keeps them.

    ``kind`` is percent (or AMD's units: ``max`` is then the ceiling) or
    MBps (``max`` None: no fixed ceiling).  The kernel rounds a written
    value *up* to ``gran`` (bw_validate()), so the controller only ever
    writes multiples of ``gran``: what it writes is what it gets.
    """

    kind: str
    min: int
    gran: int = 1
    max: int | None = 100

    def __post_init__(self) -> None:
        if self.kind not in (PERCENT, MBPS):
            raise ValueError(f"MB units {self.kind!r}: percent or MBps")
        if self.min < 1 or self.gran < 1:
            raise ValueError("MB min and granularity must be positive")
        if self.max is not None and self.lowest > self.max:
            raise ValueError("MB min above max")

    @property
    def lowest(self) -> int:
        return -(-self.min // self.gran) * self.gran

    def valid(self, value: int) -> bool:
        """Whether the kernel keeps ``value`` exactly as written."""
        return value >= self.min and value % self.gran == 0 and \
            (self.max is None or value <= self.max)

    def floor(self, value: float) -> int:
        """The largest valid value not above ``value`` (at least the
        lowest valid one)."""
        v = int(value // 1)
        if self.max is not None:
            v = min(v, self.max)
        v -= v % self.gran
        return max(v, self.lowest)

    def ceil(self, value: float) -> int:
        """The smallest valid value not below ``value`` (at most the
        highest valid one)."""
        v = max(-int(-value // 1), self.lowest)
        v = -(-v // self.gran) * self.gran
        if self.max is not None:
            v = min(v, self.max - self.max % self.gran)
        return v


@dataclasses.dataclass(frozen=True)
class Bounds:
    """Operator bounds.  A class never goes above its static values (its
    flavor's or ``[rdt] classes``'): the controller only lends back what
    it took."""

    mb_min: int                  # host units; raised to the host's min
    ways_min: int = 1            # per cache id; raised to min_cbm_bits
    mb_step: int = 10            # host units per raise
    ways_step: int = 1

    def __post_init__(self) -> None:
        for name in ("mb_min", "ways_min", "mb_step", "ways_step"):
            if getattr(self, name) < 1:
                raise ValueError(f"[rdt_controller] {name} must be >= 1")


@dataclasses.dataclass(frozen=True)
class ClassState:
    """One best-effort class group, as observed this period."""

    name: str
    mb: int | None               # current MB (None: host has no MBA)
    static_mb: int | None
    ways: int | None             # current ways per cache id (None: no CAT)
    static_ways: int | None
    bandwidth: float | None = None   # bytes/s, mbm_total over all domains
    local_bandwidth: float | None = None
    occupancy: int | None = None     # bytes, llc_occupancy summed


@dataclasses.dataclass(frozen=True)
class ProtectedState:
    """One protected instance: never changed, only watched."""

    name: str
    bandwidth: float | None = None
    occupancy: int | None = None
    slo: float | None = None     # the signal, e.g. p99 latency
    slo_target: float | None = None

    @property
    def slack(self) -> float | None:
        """Heracles' slack: (target - latency) / target; negative is a
        violation."""
        if self.slo is None or not self.slo_target:
            return None
        return (self.slo_target - self.slo) / self.slo_target


@dataclasses.dataclass(frozen=True)
class Observation:
    now: float
    classes: tuple[ClassState, ...]
    protected: tuple[ProtectedState, ...] = ()


@dataclasses.dataclass(frozen=True)
class Decision:
    """What a policy wants for one class, and why.  ``None`` keeps."""

    cls: str
    mb: int | None
    ways: int | None
    reason: str


# Reasons (the ``reason`` label of decisions_total).
SLO_VIOLATED = "slo_violated"
SLO_LOW_SLACK = "slo_low_slack"
SLO_SLACK = "slo_slack"
BW_OVER_SHARE = "bandwidth_over_share"
BW_UNDER_SHARE = "bandwidth_under_share"
RESTORE = "restore_static"
HOLD_RATE = "held_rate_limit"
HOLD_HYSTERESIS = "held_hysteresis"
DRY_RUN = "dry_run"
