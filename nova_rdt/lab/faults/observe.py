"""Reading the faults lab's host into a :class:`check.Observed`, and its
foreign groups: made as their owners would, compared byte for byte."""

from __future__ import annotations

import os

from nova_rdt import naming
from nova_rdt.host import records as records_mod
from nova_rdt.lab.faults import check
from nova_rdt.resctrl.schemata import Schemata

#: A group of another tool (pqos' naming), and a libvirt monitor group of
#: a domain nova-rdt does not manage.
FOREIGN_CTRL = "COS_foreign"
FOREIGN_MON = "mon_groups/qemu-97-foreign-vcpus_0"
FOREIGN = (FOREIGN_CTRL, FOREIGN_MON)
_FILES = ("schemata", "cpus_list", "mode", "tasks")


def make_foreign(root: str) -> None:
    """The foreign groups, as their owners make them.  The control group
    gets the host's (root's) ways, so that it takes none from libvirt's
    allocator."""
    with open(os.path.join(root, "schemata")) as f:
        l3 = [ln for ln in f.read().splitlines() if ln.strip()
              .startswith("L3")]
    ctrl = os.path.join(root, FOREIGN_CTRL)
    if not os.path.isdir(ctrl):
        os.mkdir(ctrl)
    with open(os.path.join(ctrl, "schemata"), "w") as f:
        f.write("\n".join(l3) + "\n")
    mon = os.path.join(root, FOREIGN_MON)
    if not os.path.isdir(mon):
        os.mkdir(mon)


def foreign_files(root: str) -> dict[str, dict[str, bytes]]:
    out = {}
    for g in FOREIGN:
        d = os.path.join(root, g)
        if not os.path.isdir(d):
            continue
        files = {}
        for name in _FILES:
            try:
                with open(os.path.join(d, name), "rb") as f:
                    files[name] = f.read()
            except FileNotFoundError:
                continue
        out[g] = files
    return out


def groups(root: str) -> dict[str, dict[str, dict[int, int]]]:
    """Control group -> its cache masks ("/" for the root)."""
    names = [""] + sorted(
        d for d in os.listdir(root)
        if d not in naming.NOT_GROUPS and os.path.isdir(os.path.join(root, d)))
    out = {}
    for name in names:
        with open(os.path.join(root, name, "schemata")) as f:
            s = Schemata.parse(f.read())
        out[name or "/"] = {r: dict(v) for r, v in s.lines.items()
                            if not r.startswith("MB")}
    return out


def records(state_path: str) -> dict[str, tuple[str, bool, str | None]]:
    recs, _bad = records_mod.Records(state_path).all()
    return {r.uuid: (r.name, r.pmd_share, r.group) for r in recs}


def rules(fs) -> dict[str, check.CacheRules]:
    caps = fs.capabilities()
    return {name: check.CacheRules(res.cbm_len, res.min_cbm_bits,
                                   res.sparse_masks)
            for name, res in caps.cache.items()}


def observe(lab, servers, foreign_before, cache_rules) -> check.Observed:
    """One reading.  Raises OSError while resctrl is not readable."""
    active = servers.active()
    roles = {u: servers.role(s) for u, s in active.items()}
    driver = servers.cloud.rdt_driver
    # The reservations nova-compute holds in memory.
    claims = driver.rdt.reserved()
    return check.Observed(
        groups=groups(lab.resctrl_root),
        records=records(servers.state_path),
        claims=claims,
        running=set(lab.libvirt.domains(running_only=True)),
        instances={u: servers.domain(s) for u, s in active.items()},
        class_members={u: "be" for u, r in roles.items() if r == "be"},
        pmd_sharing={u for u, r in roles.items() if r == "fwd"},
        foreign_before=foreign_before,
        foreign_now=foreign_files(lab.resctrl_root),
        rules=cache_rules)
