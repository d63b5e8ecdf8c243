"""The lab's tables as text: pure functions of a resctrl snapshot (see
:func:`nova_rdt.lab.scenarios.snapshot`) and the names of its groups."""

from __future__ import annotations

from collections.abc import Sequence

from nova_rdt import naming

#: Way-map letters of the groups that are not instances.
HOST_LETTER = "H"
PMD_LETTER = "P"


def table(rows: Sequence[Sequence], head: Sequence[str]) -> str:
    """Left-aligned columns, a dashed rule under the heading."""
    widths = [max(len(str(r[i])) for r in [*rows, head])
              for i in range(len(head))]
    line = "  ".join(f"{{:{w}}}" for w in widths)
    out = [line.format(*head), line.format(*("-" * w for w in widths))]
    out += [line.format(*map(str, r)) for r in rows]
    return "\n".join(out)


def cos_rows(snap: dict, names: dict[str, str]
             ) -> list[tuple[str, str, str, str]]:
    """(group, owner, L3 mask per cache id [and MB], CPUs / tasks)."""
    rows = []
    for group, g in snap.items():
        l3 = g["schemata"].get("L3", {})
        mb = g["schemata"].get("MB", {})
        mask = ";".join(f"{i}=0x{v:x}" for i, v in sorted(l3.items()))
        if mb:
            mask += f" MB {','.join(str(v) for _i, v in sorted(mb.items()))}"
        cpus = ",".join(map(str, sorted(g["cpus"]))) or "-"
        if len(cpus) > 20:
            cpus = f"{len(g['cpus'])} CPUs"
        rows.append((group, names.get(group, ""), mask,
                     f"{cpus} / {g['tasks']} tasks"))
    return rows


COS_HEAD = ("group", "owner", "L3 mask (per cache id)", "CPUs / threads")


def letters(snap: dict) -> dict[str, str]:
    """One letter per group: H for the root, P for the PMD COS, and for
    the others the letter of their position in the snapshot (a is the
    first group), so a group keeps its letter whatever precedes it."""
    out: dict[str, str] = {}
    for n, group in enumerate(snap):
        if group == "/":
            out[group] = HOST_LETTER
        elif group.endswith("-pmd"):
            out[group] = PMD_LETTER
        else:
            out[group] = chr(ord("a") + n % 26)
    return out


def way_map(snap: dict, names: dict[str, str], n_ways: int) -> str:
    """Per L3 cache id, one row of ways (highest first) per group."""
    out = []
    marks = letters(snap)
    for cid in sorted(snap["/"]["schemata"].get("L3", {})):
        out.append(f"L3 cache id {cid} (way {n_ways - 1} ... 0):")
        for group, g in snap.items():
            m = g["schemata"].get("L3", {}).get(cid, 0)
            cells = "".join(marks[group] if m >> w & 1 else "."
                            for w in reversed(range(n_ways)))
            out.append(f"  {cells}  {group} {names.get(group, '')}".rstrip())
    return "\n".join(out)


def group_names(snap: dict, servers: Sequence[dict]
                ) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(group -> who owns it, role -> the groups of its instances).

    libvirt names an instance's group ``qemu-<id>-<domain>-vcpus_<list>``
    (the domain name in libvirt's machine-name form).
    """
    names: dict[str, str] = {}
    roles: dict[str, list[str]] = {}
    for s in servers:
        for g in snap:
            if naming.is_libvirt_group_of(g, s["domain"]):
                names[g] = f"{s['name']} ({s['flavor']})"
                roles.setdefault(s["role"], []).append(g)
    names["/"] = "host (OS)"
    for g in snap:
        if g.endswith("-pmd"):
            names[g] = "OVS PMD COS"
        elif "-class-" in g:
            names[g] = f"class {g.split('-class-', 1)[1]}"
    return names, roles
