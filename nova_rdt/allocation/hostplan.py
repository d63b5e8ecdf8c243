"""From resctrl as it is, plus what is reserved, to the placement
planner's input; and from its plan back to schemata.  Pure: it reads a
:class:`~nova_rdt.resctrl.hostview.HostView`, never the filesystem.

Which groups are whose is decided structurally: the root is the host's,
the PMD group and the class groups are nova-rdt's (by name under its
prefix *and* by being in the plan), a libvirt group is an instance's
only when its machine name is that of a domain holding a reservation.
Every other control group -- another tool's, a domain nobody reserved
for -- is foreign: its ways are avoided and it costs a CLOS, and it is
never written.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses

from nova_rdt import naming
from nova_rdt.allocation import placement
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.resctrl.schemata import Schemata

# libvirt's cache types as resctrl resources, and back.
RESOURCE_OF_KIND = naming.RESOURCE_OF_KIND
KIND_OF_RESOURCE = naming.KIND_OF_RESOURCE


def placed_resources(caps: caps_mod.Capabilities) -> tuple[str, ...]:
    """The cache resources nova-rdt places instances on: L3, or its code
    and data halves under CDP.  L2 is never placed: libvirt copies the
    root's L2 mask into every group it makes, as the kernel does for a
    new group, and nova-rdt leaves it so."""
    names = ("L3CODE", "L3DATA") if caps.cdp else ("L3",)
    return tuple(n for n in names if n in caps.cache)


@dataclasses.dataclass(frozen=True)
class Ownership:
    """Which control group is whose in one view of resctrl."""

    instances: Mapping[str, str]     # uuid -> its libvirt group
    classes: Mapping[str, str]       # class name -> its group
    pmd: str | None                  # the PMD group, when it exists
    foreign: tuple[str, ...]         # everything else but the root


def ownership(view: HostView, prefix: str, domains: Mapping[str, str],
              class_names: Iterable[str]) -> Ownership:
    """Sort the view's control groups.

    ``domains`` maps each reserved instance's uuid to its domain name;
    ``class_names`` the classes this host defines.
    """
    ctrl = [g for g in view.groups if g.kind == "ctrl" and g.name != "/"]
    machines = naming.LibvirtMachines(g.name for g in ctrl)
    instances = {}
    for uuid, name in domains.items():
        group = machines.group_of(name)
        if group is not None:
            instances[uuid] = group
    names = {g.name for g in ctrl}
    classes = {c: naming.class_group(prefix, c) for c in class_names
               if naming.class_group(prefix, c) in names}
    pmd_name = naming.pmd_group(prefix)
    pmd = pmd_name if pmd_name in names else None
    mine = set(instances.values()) | set(classes.values()) | {pmd_name}
    foreign = tuple(sorted(n for n in names if n not in mine))
    return Ownership(instances, classes, pmd, foreign)


def _masks(schemata: Mapping[str, Mapping[int, int]],
           resources: Iterable[str]) -> dict[str, dict[int, int]]:
    return {r: dict(schemata.get(r, {})) for r in resources}


def host_of(view: HostView, owners: Ownership, pmd_base: Schemata | None,
            pmd_cos: bool, cache_cpus: Mapping[int, frozenset[int]]
            | None = None) -> placement.Host:
    """The fixed part of the layout: rules, the host's ways, foreign
    groups, the PMD base and the cache ids its cores use, and the CLOS
    left for reservations and classes."""
    caps = view.caps
    res = placed_resources(caps)
    by_name = {g.name: g for g in view.groups if g.kind == "ctrl"}
    root = by_name["/"]
    foreign: dict[str, dict[int, int]] = {r: {} for r in res}
    for name in owners.foreign:
        for r in res:
            for cid, mask in by_name[name].schemata.get(r, {}).items():
                foreign[r][cid] = foreign[r].get(cid, 0) | mask
    pmd_ids: frozenset[int] | None = None
    if pmd_cos:
        ids = {cid for r in res for cid in caps.cache[r].domains}
        cores: set[int] = set()
        if owners.pmd is not None:
            cores = set(by_name[owners.pmd].cpus)
        if cores:
            cpus_of = cache_cpus or {
                cid: frozenset(caps.cache[res[0]].domains[cid].cpus)
                for cid in ids}
            pmd_ids = frozenset(cid for cid in ids
                                if cpus_of.get(cid, frozenset()) & cores)
        else:
            # PMD cores not known yet: the rule holds everywhere, the
            # safe side for isolation.
            pmd_ids = frozenset(ids)
    base = {r: dict(pmd_base.domains(r)) if pmd_base else {} for r in res}
    clos = caps.usable_clos - len(owners.foreign) \
        - (1 if pmd_cos or owners.pmd is not None else 0)
    return placement.Host(
        resources={r: placement.Resource(caps.cache[r].cbm_len,
                                         max(caps.cache[r].min_cbm_bits, 1),
                                         caps.cache[r].sparse_masks)
                   for r in res},
        ids={r: tuple(sorted(caps.cache[r].domains)) for r in res},
        host_ways=_masks(root.schemata, res),
        foreign=foreign, pmd_base=base if pmd_cos else {},
        pmd_ids=pmd_ids, clos=max(clos, 0))


def live_masks(view: HostView, owners: Ownership
               ) -> tuple[dict[str, placement.PerId],
                          dict[str, placement.PerId]]:
    """(uuid -> masks, class -> masks) as resctrl holds them now.

    An instance's group holds a line for every cache id; on the ids its
    ``<cachetune>`` did not name, libvirt copied the root's mask (as the
    kernel does for a new group).  That is no allocation and is left out.
    """
    res = placed_resources(view.caps)
    by_name = {g.name: g for g in view.groups}
    root = by_name["/"].schemata
    inst: dict[str, placement.PerId] = {}
    for u, g in owners.instances.items():
        masks = _masks(by_name[g].schemata, res)
        inst[u] = {r: {cid: m for cid, m in per.items()
                       if m != root.get(r, {}).get(cid)}
                   for r, per in masks.items()}
    cls: dict[str, placement.PerId] = {
        c: _masks(by_name[g].schemata, res)
        for c, g in owners.classes.items()}
    return inst, cls


def ways_of(cache: Mapping[int, Mapping[str, int]]) -> placement.PerId:
    """A Demand's ``cache`` (id -> libvirt type -> ways) per resource."""
    out: dict[str, dict[int, int]] = {}
    for cid, per in cache.items():
        for kind, ways in per.items():
            out.setdefault(RESOURCE_OF_KIND[kind], {})[cid] = ways
    return out


def schemata_of(masks: placement.PerId) -> Schemata:
    return Schemata({r: dict(per) for r, per in masks.items() if per})
