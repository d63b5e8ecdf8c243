"""Monitoring: read ``mon_data`` and turn counters into safe rates.

The kernel prints "Unavailable" when a counter cannot be read (a fresh
RMID, a domain going offline) and "Error" on hardware errors; both come
back as ``None`` and never as zero, so a rate is never computed across a
gap.
"""

from __future__ import annotations

from collections.abc import Hashable
from collections.abc import Iterable
import dataclasses
import os
import re

EVENTS = ("llc_occupancy", "mbm_total_bytes", "mbm_local_bytes")
_DOMAIN_DIR = re.compile(r"^mon_(?P<res>[A-Z0-9]+)_(?P<id>\d+)$")
U64 = 1 << 64


@dataclasses.dataclass(frozen=True)
class Reading:
    resource: str
    domain: int
    llc_occupancy: int | None = None
    mbm_total_bytes: int | None = None
    mbm_local_bytes: int | None = None


def parse_value(text: str) -> int | None:
    text = text.strip()
    if text in ("Unavailable", "Error", ""):
        return None
    return int(text)


def read_small(path: str, chunk: int = 4096) -> str:
    """A resctrl file's text in as few read(2)s as it takes (one for a
    counter): kernfs files report size 0, so Python's read() would ask
    again for EOF."""
    fd = os.open(path, os.O_RDONLY)
    try:
        parts = [os.read(fd, chunk)]
        while len(parts[-1]) == chunk:
            parts.append(os.read(fd, chunk))
    finally:
        os.close(fd)
    return b"".join(parts).decode()


def mon_dir_name(resource: str, domain: int) -> str:
    """The kernel's name of a domain's directory in ``mon_data``."""
    return f"mon_{resource}_{domain:02d}"


def read_mon_data(group_path: str,
                  domains: Iterable[tuple[str, int]] | None = None,
                  events: Iterable[str] = EVENTS) -> list[Reading]:
    """Every domain's readings for the group at ``group_path``.

    ``domains`` ((resource, id), as capabilities list them) saves listing
    ``mon_data``; ``events`` limits the files read to what the platform
    has.  Files a platform lacks (no MBM on Haswell) are left ``None``.
    """
    base = os.path.join(group_path, "mon_data")
    if domains is None:
        try:
            names = sorted(os.listdir(base))
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            m = _DOMAIN_DIR.match(name)
            if m:
                found.append((m.group("res"), int(m.group("id"))))
        domains = found
    out = []
    events = tuple(events)
    for res, dom in domains:
        d = os.path.join(base, mon_dir_name(res, dom))
        values = {}
        for event in events:
            try:
                values[event] = parse_value(
                    read_small(os.path.join(d, event)))
            except (OSError, ValueError):
                # A read can fail outright (EIO, ENOENT on a domain that
                # just went offline); that is a gap, not a crash.
                values[event] = None
        out.append(Reading(res, dom, **values))
    return out


def counter_delta(prev: int, cur: int, modulus: int = U64) -> int | None:
    """Increase of a wrapping counter from ``prev`` to ``cur``.

    A counter that went down either wrapped or was reset (the group was
    recreated and got a fresh RMID).  A wrap leaves a small remainder to
    the top; a reset leaves a huge one.  Returns None for a reset, so no
    rate is made from it.
    """
    if cur >= prev:
        return cur - prev
    wrapped = modulus - prev + cur
    return wrapped if wrapped < modulus // 2 else None


class RateTracker:
    """Per-key rates and monotonic totals from wrap-prone counters.

    ``observe`` returns bytes/second since the previous observation, or
    None when there is no previous one, the value is unavailable, or the
    counter was reset.  ``total`` only ever grows, which is what a
    Prometheus counter needs.
    """

    def __init__(self, modulus: int = U64):
        self.modulus = modulus
        self._last: dict[Hashable, tuple[int, float]] = {}
        self._total: dict[Hashable, int] = {}

    def observe(self, key: Hashable, value: int | None,
                now: float) -> float | None:
        prev = self._last.get(key)
        if value is None:
            # Keep the baseline: the next good reading bridges the gap.
            return None
        self._last[key] = (value, now)
        if prev is None:
            self._total.setdefault(key, 0)
            return None
        pvalue, ptime = prev
        delta = counter_delta(pvalue, value, self.modulus)
        if delta is None:
            return None
        self._total[key] = self._total.get(key, 0) + delta
        dt = now - ptime
        return delta / dt if dt > 0 else None

    def total(self, key: Hashable) -> int:
        return self._total.get(key, 0)

    def forget(self, keep: Iterable[Hashable]) -> None:
        """Drop state for keys not in ``keep`` (groups that went away)."""
        kept = set(keep)
        for k in [k for k in self._last if k not in kept]:
            del self._last[k]
        for k in [k for k in self._total if k not in kept]:
            del self._total[k]
