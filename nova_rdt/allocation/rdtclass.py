"""Shared class groups: their definitions, from ``[rdt] class``.

A class is one resctrl group that many best-effort instances join
(``rdt:class=<name>``), so they cost one CLOS between them rather than one
each.  Each definition reads ``NAME:l3_ways=N[,mb=P]``, for example
``low_priority:l3_ways=1,mb=10`` (one way on every cache id, 10% MB on
every node).  Pure: parsing and checks only.
"""

from __future__ import annotations

from collections.abc import Iterable
import dataclasses

from nova_rdt import exception
from nova_rdt import naming

NAME_RE = naming.CLASS_NAME_RE


class ClassDefinitionError(exception.NovaRdtError, ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class RdtClass:
    name: str
    l3_ways: int
    mb: int | None = None          # percent, or MBps on an mba_MBps mount

    def group_name(self, prefix: str) -> str:
        return naming.class_group(prefix, self.name)


def parse_one(text: str) -> RdtClass:
    name, sep, body = text.strip().partition(":")
    where = f"[rdt] class {text.strip()!r}"
    if not sep:
        raise ClassDefinitionError(
            f"{where}: expected NAME:l3_ways=N[,mb=P]")
    if not NAME_RE.match(name):
        raise ClassDefinitionError(
            f"{where}: the name must match {NAME_RE.pattern}, as "
            f"rdt:class values do")
    values: dict[str, int] = {}
    for item in body.split(","):
        key, eq, value = item.strip().partition("=")
        if key not in ("l3_ways", "mb"):
            raise ClassDefinitionError(
                f"{where}: unknown setting {key!r} (l3_ways, mb)")
        if key in values:
            raise ClassDefinitionError(f"{where}: {key} given twice")
        # ASCII digits only: str.isdigit() also takes '²', which int()
        # refuses with a bare ValueError.
        if not eq or not (value.isascii() and value.isdigit()) \
                or len(value) > 10 or int(value) < 1:
            raise ClassDefinitionError(
                f"{where}: {key} must be a positive integer")
        values[key] = int(value)
    if "l3_ways" not in values:
        raise ClassDefinitionError(f"{where}: l3_ways is required")
    return RdtClass(name, values["l3_ways"], values.get("mb"))


def parse_all(texts: Iterable[str] | None) -> dict[str, RdtClass]:
    classes: dict[str, RdtClass] = {}
    for text in texts or ():
        c = parse_one(text)
        if c.name in classes:
            raise ClassDefinitionError(
                f"[rdt] class {c.name!r} is defined twice")
        classes[c.name] = c
    return classes
