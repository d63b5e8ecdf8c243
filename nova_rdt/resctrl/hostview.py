"""A snapshot of one host's resctrl state, and the way map.

Built once from the filesystem, then rendered as text for people or as a
stable JSON document for scripts (``nova-rdt host show``).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
import dataclasses
import string
from typing import Any
from typing import TypeVar

from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import Group
from nova_rdt.resctrl.groups import Resctrl

T = TypeVar("T")

JSON_VERSION = 1


@dataclasses.dataclass(frozen=True)
class GroupState:
    name: str
    kind: str
    owner: str
    parent: str | None
    mode: str | None
    schemata: dict[str, dict[int, int]]
    cpus: tuple[int, ...]
    # None: not read.  The root's ``tasks`` lists every thread on the
    # host; only a person's view (``host show``) wants the counts.
    task_count: int | None


@dataclasses.dataclass(frozen=True)
class HostView:
    caps: caps_mod.Capabilities
    groups: list[GroupState]

    @classmethod
    def collect(cls, fs: Resctrl, tasks: bool = True) -> HostView:
        """One walk of the groups; the capabilities are the mount's, read
        once per mount (:mod:`~nova_rdt.resctrl.capcache`), not per walk.
        ``tasks=False``: no ``tasks`` file read (task_count None), for a
        walk that plans and never shows the counts."""
        caps = fs.capabilities()
        return cls(caps, [_group_state(g, tasks) for g in fs.groups()])

    def holders(self, resource: str, domain: int) -> list[list[str]]:
        """For each way of ``resource`` in ``domain``: the groups on it."""
        n = self.caps.cache[resource].cbm_len
        out: list[list[str]] = [[] for _ in range(n)]
        for g in self.groups:
            mask = g.schemata.get(resource, {}).get(domain)
            if mask is None:
                continue
            for way in range(n):
                if mask >> way & 1:
                    out[way].append(g.name)
        return out

    def used_mask(self, resource: str, domain: int) -> int:
        used = 0
        for g in self.groups:
            used |= g.schemata.get(resource, {}).get(domain, 0)
        return used

    def free_runs(self, resource: str, domain: int) -> list[cbm.Run]:
        """Ways no group holds, the root included: what libvirt can use."""
        return cbm.free_runs(self.used_mask(resource, domain),
                             self.caps.cache[resource].cbm_len)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": JSON_VERSION,
            "capabilities": self.caps.to_dict(),
            "groups": [{
                "name": g.name, "kind": g.kind, "owner": g.owner,
                "parent": g.parent, "mode": g.mode,
                "schemata": {r: {str(d): (f"{v:x}" if r in self.caps.cache
                                          else v)
                                 for d, v in doms.items()}
                             for r, doms in g.schemata.items()},
                "cpus": caps_mod.format_cpu_list(g.cpus),
                "task_count": g.task_count,
            } for g in self.groups],
            "free_runs": {
                res: {str(d): [{"start": r.start, "ways": r.length,
                                "mask": f"{r.mask:x}"}
                               for r in self.free_runs(res, d)]
                      for d in info.domains}
                for res, info in self.caps.cache.items()},
            "way_map": {
                res: {str(d): self.holders(res, d) for d in info.domains}
                for res, info in self.caps.cache.items()},
        }

    def render(self) -> str:
        return "\n".join(_render(self)) + "\n"


def _group_state(g: Group, tasks: bool = True) -> GroupState:
    def optional(fn: Callable[[], T], default: T) -> T:
        try:
            return fn()
        except (errors.GroupNotFound, FileNotFoundError):
            # Raced with a removal, or a monitor group's missing file.
            return default
    sch = optional(g.schemata, None) if g.kind == "ctrl" else None
    return GroupState(
        name=g.display_name, kind=g.kind, owner=g.owner,
        parent=None if g.parent is None else (g.parent or "/"),
        mode=optional(g.mode, None) if g.kind == "ctrl" else None,
        schemata={k: dict(v) for k, v in sch.lines.items()} if sch else {},
        cpus=tuple(sorted(optional(g.cpus, set[int]()))),
        task_count=len(optional(g.tasks, list[int]())) if tasks else None)


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n} B"


def _render(v: HostView) -> Iterator[str]:
    c = v.caps
    yield f"resctrl root: {c.root}"
    yield (f"CLOS: {c.clos_count} ({c.usable_clos} for groups besides the "
           f"root) | CDP: {'on' if c.cdp else 'off'} | "
           f"MB mode: {'MBps' if c.mba_mbps else 'default'}")
    for r in c.cache.values():
        yield (f"{r.name}: {r.cbm_len} ways (cbm_mask {r.cbm_mask:x}), "
               f"min_cbm_bits {r.min_cbm_bits}, shareable_bits "
               f"{r.shareable_bits:x}, sparse_masks "
               f"{int(r.sparse_masks)}, {r.num_closids} CLOS")
        for d in r.domains.values():
            yield (f"  cache id {d.id}: {_size(d.size)}, "
                   f"{_size(r.way_size(d.id))} per way, CPUs "
                   f"{caps_mod.format_cpu_list(d.cpus) or '?'}")
    for bw in c.bandwidth.values():
        yield (f"{bw.name}: granularity {bw.bandwidth_gran}, min "
               f"{bw.min_bandwidth}, max {bw.max_bandwidth or '-'}, units "
               f"{bw.units}, delay_linear {int(bw.delay_linear)}, "
               f"{bw.num_closids} CLOS, domains "
               f"{','.join(map(str, bw.domain_ids))}")
    for m in c.monitoring.values():
        yield (f"{m.resource} monitoring: {', '.join(m.features) or 'none'}; "
               f"{m.num_rmids} RMIDs")
    if not c.cache and not c.bandwidth:
        yield "no allocation resources"

    yield ""
    yield "Groups"
    rows: list[tuple[str, ...]] = [
        ("GROUP", "OWNER", "MODE", "SCHEMATA", "CPUS", "TASKS")]
    for g in v.groups:
        sch = " ".join(
            f"{r}:" + ";".join(
                f"{d}={val:x}" if r in c.cache else f"{d}={val}"
                for d, val in sorted(doms.items()))
            for r, doms in g.schemata.items())
        rows.append((g.name, g.owner, g.mode or "-", sch or "-",
                     caps_mod.format_cpu_list(g.cpus) or "-",
                     "-" if g.task_count is None else str(g.task_count)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        yield "  " + "  ".join(s.ljust(w)
                               for s, w in zip(row, widths)).rstrip()

    for res, info in c.cache.items():
        yield ""
        yield (f"{res} free contiguous runs (ways no group holds, root "
               f"included: what libvirt can allocate)")
        for dom in info.domains:
            free = v.free_runs(res, dom)
            yield f"  cache id {dom}: " + (
                ", ".join(f"{f.length} ways at {f.start} (mask {f.mask:x})"
                          for f in free) or "none")
        yield from _render_waymap(v, res)


def _render_waymap(v: HostView, res: str) -> Iterator[str]:
    info = v.caps.cache[res]
    n = info.cbm_len
    letters: dict[str, str] = {}
    for g in v.groups:
        if g.schemata.get(res):
            letters[g.name] = (string.ascii_uppercase + string.ascii_lowercase
                               + string.digits)[len(letters) % 62]
    yield ""
    yield f"{res} way map (way {n - 1} left, way 0 right, as in a mask)"
    yield "  '.' free, a letter: the one group holding the way, '#': shared"
    yield "  cache  " + " ".join(f"{w:>2}" for w in reversed(range(n)))
    shared: set[tuple[int, int, tuple[str, ...]]] = set()
    for d in info.domains:
        cells = []
        for way, holders in reversed(list(enumerate(v.holders(res, d)))):
            if not holders:
                cells.append(" .")
            elif len(holders) == 1:
                cells.append(" " + letters[holders[0]])
            else:
                cells.append(" #")
                shared.add((d, way, tuple(holders)))
        yield f"  {d:>5}  " + " ".join(cells)
    yield "  legend: " + ", ".join(f"{letter}={name}"
                                   for name, letter in letters.items())
    for dom, way, names in sorted(shared):
        yield f"  shared: cache {dom} way {way}: {', '.join(names)}"
