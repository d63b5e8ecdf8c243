"""The ``schemata`` file: parse, format and merge.

A schemata holds one line per resource, ``NAME:ID=VAL;ID=VAL``.  Cache
resources carry hex masks, bandwidth resources decimal values.  The kernel
right-aligns names and pads values when it prints; writers may send any
subset of lines and domains (a partial update), which the kernel merges
into the group's current configuration.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses

from nova_rdt import exception

CACHE_RESOURCES = ("L3", "L3CODE", "L3DATA", "L2", "L2CODE", "L2DATA")
BANDWIDTH_RESOURCES = ("MB", "SMBA")
KNOWN_RESOURCES = CACHE_RESOURCES + BANDWIDTH_RESOURCES


class SchemataSyntaxError(exception.NovaRdtError, ValueError):
    pass


def is_cache_resource(name: str) -> bool:
    return name in CACHE_RESOURCES


def cache_level(name: str) -> int:
    """3 for L3, L3CODE and L3DATA; 2 for the L2 family."""
    return int(name[1])


@dataclasses.dataclass(frozen=True)
class Schemata:
    """An ordered mapping resource name -> {domain id -> value}."""

    lines: Mapping[str, Mapping[int, int]] = dataclasses.field(
        default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Schemata:
        lines: dict[str, dict[int, int]] = {}
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line:
                continue
            name, sep, body = line.partition(":")
            name = name.strip()
            if not sep or not name:
                raise SchemataSyntaxError(
                    f"line {lineno}: {raw!r}: missing 'NAME:'")
            if name in lines:
                raise SchemataSyntaxError(
                    f"line {lineno}: resource {name} given twice")
            lines[name] = _parse_domains(name, body, lineno)
        return cls(lines)

    def format(self) -> str:
        """Text for a write: one line per resource, trailing newline.

        The kernel refuses a write without a trailing newline, with EINVAL
        and no last_cmd_status text, so it is always added here.
        """
        out = []
        for name, doms in self.lines.items():
            vals = ";".join(f"{d}={_format_value(name, v)}"
                            for d, v in sorted(doms.items()))
            out.append(f"{name}:{vals}\n")
        return "".join(out)

    def __str__(self) -> str:
        return self.format()

    def resources(self) -> list[str]:
        return list(self.lines)

    def domains(self, resource: str) -> Mapping[int, int]:
        return self.lines.get(resource, {})

    def get(self, resource: str, domain: int) -> int | None:
        return self.lines.get(resource, {}).get(domain)

    def merged(self, update: Schemata) -> Schemata:
        """This schemata with ``update``'s values laid over it.

        This is what the kernel keeps after a partial write: domains and
        resources the update does not name keep their value.
        """
        lines = {name: dict(doms) for name, doms in self.lines.items()}
        for name, doms in update.lines.items():
            lines.setdefault(name, {}).update(doms)
        return Schemata(lines)

    def restricted(self, resources: Iterable[str]) -> Schemata:
        keep = set(resources)
        return Schemata({n: d for n, d in self.lines.items() if n in keep})


def _format_value(resource: str, value: int) -> str:
    return f"{value:x}" if is_cache_resource(resource) else str(value)


def _parse_domains(name: str, body: str, lineno: int) -> dict[int, int]:
    doms: dict[int, int] = {}
    base = 16 if is_cache_resource(name) else 10
    for item in body.split(";"):
        item = item.strip()
        if not item:
            continue
        dom, sep, val = item.partition("=")
        try:
            dom_id = int(dom.strip(), 10)
            value = int(val.strip(), base)
        except ValueError:
            raise SchemataSyntaxError(
                f"line {lineno}: {name}: bad domain entry {item!r}") from None
        if not sep or dom_id < 0 or value < 0:
            raise SchemataSyntaxError(
                f"line {lineno}: {name}: bad domain entry {item!r}")
        if dom_id in doms:
            raise SchemataSyntaxError(
                f"line {lineno}: {name}: domain {dom_id} given twice")
        doms[dom_id] = value
    if not doms:
        raise SchemataSyntaxError(f"line {lineno}: {name}: no domains")
    return doms
