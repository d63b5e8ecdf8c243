"""``[rdt_controller] slo`` entries: ``INSTANCE=TARGET@SOURCE``.  Pure.

``SOURCE`` is ``file:PATH`` or ``prometheus:QUERY``; the query is the
rest of the entry, so it may hold ``=`` and ``@`` itself.
"""

from __future__ import annotations

import dataclasses
import math
import re

from nova_rdt import exception

# Domain names, instance names, uuids, resctrl group names.
INSTANCE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}\Z")
KINDS = ("file", "prometheus")


class SloSpecError(exception.NovaRdtError, ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class SloSpec:
    instance: str
    target: float
    kind: str            # "file" or "prometheus"
    where: str           # the path or the query


def parse(text: str) -> SloSpec:
    where = f"[rdt_controller] slo {text!r}"
    name, eq, rest = text.strip().partition("=")
    target_text, at, source = rest.partition("@")
    if not eq or not at:
        raise SloSpecError(f"{where}: expected INSTANCE=TARGET@file:PATH or "
                           f"INSTANCE=TARGET@prometheus:QUERY")
    name = name.strip()
    if not INSTANCE_RE.match(name):
        raise SloSpecError(f"{where}: {name!r} is not an instance name, "
                           f"uuid or group name")
    try:
        target = float(target_text.strip())
    except ValueError:
        target = math.nan
    if not math.isfinite(target) or target <= 0:
        raise SloSpecError(f"{where}: the target {target_text.strip()!r} "
                           f"must be a positive number")
    kind, colon, body = source.partition(":")
    kind = kind.strip()
    if not colon or kind not in KINDS or not body.strip():
        raise SloSpecError(f"{where}: the source must be file:PATH or "
                           f"prometheus:QUERY")
    return SloSpec(name, target, kind, body.strip())


def parse_all(texts) -> dict[str, SloSpec]:
    out: dict[str, SloSpec] = {}
    for text in texts or ():
        s = parse(text)
        if s.instance in out:
            raise SloSpecError(f"[rdt_controller] slo: {s.instance} is "
                               f"given twice")
        out[s.instance] = s
    return out


def parse_value(text: str) -> float | None:
    """A signal's value from a file or a sample: a finite number, or
    None (never a guess: no signal means no SLO decision)."""
    parts = text.split()
    if not parts:
        return None
    try:
        v = float(parts[0])
    except ValueError:
        return None
    return v if math.isfinite(v) and v >= 0 else None
