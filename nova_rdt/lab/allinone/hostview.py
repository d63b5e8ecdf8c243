"""What one compute of the cloud holds for one instance, read where the
truth is (its resctrl, its libvirtd, its nova-rdt records), and the
judgement of it after a move.

Reading (:func:`observe`) is I/O; judging (:func:`judge_holds`,
:func:`judge_clean`) is pure, so that the rules are tested on their own.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess

from nova_rdt import naming

_CPU_THREAD = re.compile(r"CPU \d+/(KVM|TCG)\Z")


@dataclasses.dataclass(frozen=True)
class Group:
    #: L3 cache id -> mask (CDP's code masks are not read: the cloud's
    #: profile has none).
    l3: dict[int, int]
    tasks: frozenset[int]


@dataclasses.dataclass(frozen=True)
class Seen:
    """One compute, as far as one instance is concerned."""

    host: str
    #: The domain runs.
    domain: bool
    vcpu_tids: frozenset[int]
    groups: dict[str, Group]
    record: bool
    #: The live domain's XML (libvirt's) has a ``<cachetune>``.
    cachetune: bool = False
    #: The domain is paused: an incoming migration's, before it resumes
    #: (its QEMU and vCPU threads exist).
    paused: bool = False

    def group_of_vcpus(self) -> str | None:
        """The group whose tasks hold every vCPU thread (None: none)."""
        if not self.vcpu_tids:
            return None
        for name, g in self.groups.items():
            if self.vcpu_tids <= g.tasks:
                return name
        return None


@dataclasses.dataclass(frozen=True)
class Side:
    """Where one compute keeps what :func:`observe` reads (host paths)."""

    host: str
    resctrl_root: str
    libvirt_uri: str
    qemu_run_dir: str
    state_path: str


def _l3(schemata: str) -> dict[int, int]:
    for line in schemata.splitlines():
        res, _, doms = line.strip().partition(":")
        if res.strip() == "L3":
            return {int(c): int(m, 16) for c, m in
                    (d.split("=") for d in doms.split(";") if "=" in d)}
    return {}


def read_groups(root: str) -> dict[str, Group]:
    """Every control group, the default one as ``.``."""
    out = {}
    for name in [".", *sorted(os.listdir(root))]:
        path = os.path.join(root, name)
        if name in naming.NOT_GROUPS or not os.path.isdir(path):
            continue
        try:
            with open(os.path.join(path, "schemata")) as f:
                l3 = _l3(f.read())
            with open(os.path.join(path, "tasks")) as f:
                tasks = frozenset(int(t) for t in f.read().split())
        except (OSError, ValueError):
            continue            # removed while read
        out[name] = Group(l3, tasks)
    return out


def vcpu_threads(qemu_run_dir: str, domain: str) -> frozenset[int]:
    try:
        with open(os.path.join(qemu_run_dir, f"{domain}.pid")) as f:
            pid = int(f.read().strip())
        tids = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if _CPU_THREAD.match(f.read().strip()):
                    tids.append(int(tid))
        return frozenset(tids)
    except (OSError, ValueError):
        return frozenset()


def observe(side: Side, domain: str, uuid: str) -> Seen:
    res = subprocess.run(["virsh", "-q", "-c", side.libvirt_uri, "domstate",
                          domain], capture_output=True, text=True,
                         timeout=60)
    state = res.stdout.strip() if res.returncode == 0 else ""
    live = state in ("running", "paused")
    xml = subprocess.run(["virsh", "-q", "-c", side.libvirt_uri, "dumpxml",
                          domain], capture_output=True, text=True,
                         timeout=60).stdout if live else ""
    return Seen(
        host=side.host, domain=state == "running",
        vcpu_tids=vcpu_threads(side.qemu_run_dir, domain) if live
        else frozenset(),
        groups=read_groups(side.resctrl_root),
        record=os.path.exists(os.path.join(side.state_path, "domains",
                                           f"{uuid}.json")),
        cachetune="<cachetune" in xml, paused=state == "paused")


def pmd_mask(seen: Seen, prefix: str = naming.DEFAULT_PREFIX
             ) -> dict[int, int]:
    g = seen.groups.get(naming.pmd_group(prefix))
    return dict(g.l3) if g else {}


def judge_holds(seen: Seen, domain: str, ways: int | None,
                rdt_class: str | None = None, pmd_share: bool = False,
                prefix: str = naming.DEFAULT_PREFIX,
                arriving: bool = False) -> list[str]:
    """What is wrong with ``seen`` for an instance that must run there:
    its vCPUs in libvirt's group of the domain with exactly ``ways`` ways
    on every cache (or in its class's group), a sharer's ways inside the
    PMD COS on some cache, and its record.  ``arriving``: the domain is
    an incoming migration's, paused until it resumes, and must hold all
    of that already.  [] when all holds."""
    bad = []
    if not (seen.domain or arriving and seen.paused):
        return [f"no running domain {domain} on {seen.host}"
                + (" (it is paused)" if seen.paused else "")]
    if not seen.vcpu_tids:
        return [f"no vCPU threads of {domain} found on {seen.host}"]
    group = seen.group_of_vcpus()
    if rdt_class:
        want = naming.class_group(prefix, rdt_class)
        if group != want:
            bad.append(f"vCPUs in {group or 'no one group'}, not class "
                       f"group {want}")
    elif ways:
        if not seen.cachetune:
            bad.append(f"libvirt's XML of {domain} on {seen.host} has no "
                       f"<cachetune>")
        if group is None or not naming.is_libvirt_group_of(group, domain):
            bad.append(f"vCPUs in {group or 'no one group'}, not a group "
                       f"libvirt made for {domain}")
        else:
            masks = seen.groups[group].l3
            wrong = {c: m for c, m in masks.items()
                     if bin(m).count("1") != ways}
            if not masks or wrong:
                bad.append(f"{group} holds {masks_text(masks)}, not "
                           f"{ways} ways on every cache")
            if pmd_share:
                pmd = pmd_mask(seen, prefix)
                if not any(c in pmd and m & pmd[c] == m
                           for c, m in masks.items()):
                    bad.append(f"sharer's ways {masks_text(masks)} inside "
                               f"the PMD COS ({masks_text(pmd)}) on no "
                               f"cache")
    elif group is not None and group != ".":
        bad.append(f"an instance with no RDT ways runs in {group}")
    if (ways or rdt_class) and not seen.record:
        bad.append(f"no nova-rdt record on {seen.host}")
    return bad


def judge_clean(seen: Seen, domain: str, pmd_before: dict[int, int] | None,
                prefix: str = naming.DEFAULT_PREFIX) -> list[str]:
    """What of the instance is left on a compute it left: its domain, a
    group libvirt made for it, its record; and a PMD COS that no longer
    matches what it was before the instance came (``pmd_before``, None:
    not checked).  [] when nothing is left."""
    bad = []
    if seen.domain or seen.paused:
        bad.append(f"domain {domain} "
                   f"{'still runs' if seen.domain else 'is still paused'} "
                   f"on {seen.host}")
    left = [g for g in seen.groups if naming.is_libvirt_group_of(g, domain)]
    if left:
        bad.append(f"group(s) {', '.join(left)} left on {seen.host}")
    if seen.record:
        bad.append(f"nova-rdt record left on {seen.host}")
    if pmd_before is not None:
        now = pmd_mask(seen, prefix)
        if now != pmd_before:
            bad.append(f"PMD COS {masks_text(now)} on {seen.host}, "
                       f"{masks_text(pmd_before)} before the instance came")
    return bad


def free_ways(seen: Seen, cbm_bits: int) -> int:
    """Ways no group holds, on the fullest cache."""
    caches: dict[int, int] = {}
    for g in seen.groups.values():
        for c, m in g.l3.items():
            caches[c] = caches.get(c, 0) | m
    if not caches:
        return 0
    return min(cbm_bits - bin(m).count("1") for m in caches.values())


def masks_text(masks: dict[int, int]) -> str:
    """``0=c;1=600``, as a schemata line spells a group's masks."""
    return ";".join(f"{c}={m:x}" for c, m in sorted(masks.items())) or "-"
