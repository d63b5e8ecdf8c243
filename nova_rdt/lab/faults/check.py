"""Whether the host's four kinds of state agree again after a fault: pure.

The runner reads the host into an :class:`Observed` (resctrl groups with
their masks, the hook's records, the driver's claims, what libvirt runs,
what Nova says exists, the foreign groups' files) and :func:`judge`
says what is leaked, missing or touched.  Kept apart from the I/O so
that every rule is tested without a lab.
"""

from __future__ import annotations

import dataclasses

from nova_rdt import naming
from nova_rdt.resctrl import cbm


@dataclasses.dataclass(frozen=True)
class CacheRules:
    cbm_len: int
    min_cbm_bits: int
    sparse: bool = False


@dataclasses.dataclass
class Observed:
    """One reading of the host (names as resctrl and libvirt show them)."""

    #: ctrl group name -> {resource: {cache id: mask}} ("/" is the root).
    groups: dict[str, dict[str, dict[int, int]]]
    #: record uuid -> (domain name, pmd_share, libvirt group or None).
    records: dict[str, tuple[str, bool, str | None]]
    #: instance uuids the driver holds a claim for.
    claims: set[str]
    #: domain names libvirt runs.
    running: set[str]
    #: Nova's instances on this host that should run: uuid -> domain name.
    instances: dict[str, str]
    #: instance uuids that ask for a class (uuid -> class name).
    class_members: dict[str, str]
    #: instance uuids that share their ways with the PMDs.
    pmd_sharing: set[str]
    #: foreign group -> {file: bytes}, before and now.
    foreign_before: dict[str, dict[str, bytes]]
    foreign_now: dict[str, dict[str, bytes]]
    #: cache resource -> rules of its masks (L3, L3CODE, ...).
    rules: dict[str, CacheRules]
    prefix: str = naming.DEFAULT_PREFIX
    #: whether the PMD COS is managed (False: no PMD check).
    pmd_cos: bool = True


@dataclasses.dataclass
class Verdict:
    leaked_groups: list[str] = dataclasses.field(default_factory=list)
    missing_groups: list[str] = dataclasses.field(default_factory=list)
    leaked_claims: list[str] = dataclasses.field(default_factory=list)
    leaked_records: list[str] = dataclasses.field(default_factory=list)
    missing_records: list[str] = dataclasses.field(default_factory=list)
    #: Nova instances libvirt does not run, or the reverse.
    vm_mismatch: list[str] = dataclasses.field(default_factory=list)
    foreign_touched: list[str] = dataclasses.field(default_factory=list)
    pmd_problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def pmd_mask_valid(self) -> bool:
        return not self.pmd_problems

    @property
    def converged(self) -> bool:
        return not any(dataclasses.astuple(self))

    def why(self) -> str:
        """The first few things that keep it from converging."""
        parts = [f"{f.name}: {', '.join(map(str, getattr(self, f.name)))}"
                 for f in dataclasses.fields(self) if getattr(self, f.name)]
        return "; ".join(parts) or "converged"


def _libvirt_groups(groups, running: set[str]) -> tuple[set, set]:
    """(libvirt groups of running domains, those of no running domain)."""
    live, dead = set(), set()
    for g in groups:
        if naming.libvirt_group_machine(g) is None:
            continue
        ours = any(naming.is_libvirt_group_of(g, n) for n in running)
        (live if ours else dead).add(g)
    return live, dead


def judge(o: Observed) -> Verdict:
    v = Verdict()
    wanted = set(o.instances.values())
    # Only domains Nova knows are nova-rdt's business: a foreign domain
    # (and its libvirt group) is the foreign check's.
    ours_running = {n for n in o.running if n in wanted}
    v.vm_mismatch = sorted(
        [f"{n} not running" for n in wanted - o.running]
        + [f"{n} running without an instance" for n in
           o.running - wanted if n.startswith("instance-")])
    foreign = set(o.foreign_before)
    live, dead = _libvirt_groups(set(o.groups) - foreign, o.running)
    v.leaked_groups = sorted(dead)
    # A running RDT instance (one with a record naming a group, or a
    # class) must have its group.
    for _uuid, (name, _share, group) in sorted(o.records.items()):
        if name in ours_running and group and group not in o.groups:
            v.missing_groups.append(group)
    members = {c for u, c in o.class_members.items() if u in o.instances}
    for g in sorted(o.groups):
        cls = naming.class_of_group(o.prefix, g)
        if cls is not None and cls not in members:
            v.leaked_groups.append(g)
    for cls in sorted(members):
        g = naming.class_group(o.prefix, cls)
        if g not in o.groups:
            v.missing_groups.append(g)
    v.leaked_claims = sorted(o.claims - set(o.instances))
    rec_names = {}
    for uuid, (name, _s, _g) in o.records.items():
        rec_names[uuid] = name
        if name not in ours_running:
            v.leaked_records.append(uuid)
    v.leaked_records.sort()
    v.missing_records = sorted(u for u, n in o.instances.items()
                               if n in ours_running and u not in rec_names)
    for g in sorted(set(o.foreign_before) | set(o.foreign_now)):
        if o.foreign_before.get(g) != o.foreign_now.get(g):
            v.foreign_touched.append(g)
    if o.pmd_cos:
        v.pmd_problems = pmd_problems(o)
    return v


def pmd_problems(o: Observed) -> list[str]:
    """A PMD COS that is not a valid mask covering every sharing VM."""
    pmd = naming.pmd_group(o.prefix)
    masks = o.groups.get(pmd)
    if masks is None:
        return [f"{pmd} is missing"]
    out = []
    for res, rules in sorted(o.rules.items()):
        for cid, mask in sorted(masks.get(res, {}).items()):
            try:
                cbm.check(mask, rules.cbm_len, rules.min_cbm_bits,
                          rules.sparse)
            except cbm.CbmError as e:
                out.append(f"{res}:{cid}={mask:x}: {e}")
    for uuid in sorted(o.pmd_sharing & set(o.instances)):
        rec = o.records.get(uuid)
        if rec is None or rec[2] is None:
            continue      # the missing record/group is reported already
        for res, per in o.groups.get(rec[2], {}).items():
            if res not in o.rules:
                continue
            for cid, vm in per.items():
                have = masks.get(res, {}).get(cid, 0)
                if vm & ~have:
                    out.append(f"{res}:{cid}={have:x} does not cover "
                               f"{rec[0]}'s {vm:x}")
    return out
