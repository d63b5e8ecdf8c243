"""The seed documents' layouts as nova-rdt scenarios, and the relations
that prove each one: pure (they read a snapshot, not the filesystem).

A snapshot is ``{group: {"schemata": {res: {id: value}}, "cpus": set,
"tasks": int}}`` with ``"/"`` for the root, as :func:`snapshot` reads it.
"""

from __future__ import annotations

import dataclasses
import os

from nova_rdt.resctrl import cpulist
from nova_rdt.resctrl.schemata import Schemata


@dataclasses.dataclass(frozen=True)
class Flavor:
    name: str
    vcpus: int
    specs: dict
    role: str                     # forwarding | noisy | filler


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    profile: str
    reserved_host_ways: int
    pmd_shared_ways: int
    pmd_cos: bool
    classes: tuple[str, ...]
    flavors: tuple[Flavor, ...]
    boots: tuple[tuple[str, int], ...]     # (flavor name, count)
    filler: str                             # booted until no valid host
    bad_spec: tuple[str, str]
    seed_table: tuple[tuple[str, str], ...]  # (COS, what the seed shows)


SCENARIOS = {
    "onp": Scenario(
        name="onp", title="ONP app note, Table 3-1: PMD COS shared with "
                          "the forwarding VMs",
        profile="e5-2658-v3", reserved_host_ways=4, pmd_shared_ways=0,
        pmd_cos=True, classes=(),
        flavors=(Flavor("nfv.fwd", 2, {"rdt:l3_cache_ways": "8",
                                       "rdt:pmd_share": "true"},
                        "forwarding"),
                 Flavor("nfv.noisy", 2, {"rdt:l3_cache_ways": "8",
                                         "rdt:pmd_share": "true"}, "noisy"),
                 Flavor("nfv.small", 1, {"rdt:l3_cache_ways": "2"},
                        "filler")),
        boots=(("nfv.fwd", 1), ("nfv.noisy", 1)), filler="nfv.small",
        bad_spec=("rdt:l3_cache_ways", "lots"),
        seed_table=(("llc:0 OvS (PMD cores)", "0xfffff0"),
                    ("llc:1 VM0", "0xff000"), ("llc:2 VM1", "0x00ff0"),
                    ("llc:3 OS", "0x0000f"))),
    "mba": Scenario(
        name="mba", title="MBA: STREAM neighbours in a low-priority group "
                          "at MB 10%",
        profile="gold-6252", reserved_host_ways=3, pmd_shared_ways=0,
        pmd_cos=False, classes=("low_priority:l3_ways=1,mb=10",),
        flavors=(Flavor("nfv.fwd", 2, {"rdt:l3_cache_ways": "4"},
                        "forwarding"),
                 Flavor("be.stream", 1, {"rdt:class": "low_priority"},
                        "noisy"),
                 Flavor("nfv.small", 1, {"rdt:l3_cache_ways": "2"},
                        "filler")),
        boots=(("nfv.fwd", 1), ("be.stream", 3)), filler="nfv.small",
        bad_spec=("rdt:mb_percent", "150"),
        seed_table=(("forwarding VM", "own ways, MB 100%"),
                     ("STREAM neighbours", "one group, MB 10%"))),
    "cat": Scenario(
        name="cat", title="CAT: a 2-way special COS, noisy neighbours in "
                          "1 way",
        profile="gold-6252", reserved_host_ways=2, pmd_shared_ways=0,
        pmd_cos=False, classes=("noisy:l3_ways=1",),
        flavors=(Flavor("nfv.cat2", 2, {"rdt:l3_cache_ways": "2"},
                        "forwarding"),
                 Flavor("be.noisy", 1, {"rdt:class": "noisy"}, "noisy"),
                 Flavor("nfv.small", 1, {"rdt:l3_cache_ways": "2"},
                        "filler")),
        boots=(("nfv.cat2", 1), ("be.noisy", 3)), filler="nfv.small",
        bad_spec=("rdt:l3_cache_ways", "0"),
        seed_table=(("special COS", "2 ways"),
                    ("noisy neighbours", "1 way"))),
}


def snapshot(root: str, copy_to: str | None = None) -> dict:
    """Read every control group's schemata, CPUs and task count (and copy
    the raw files to ``copy_to``, for checks that trust no summary)."""
    out = {}
    names = [""] + sorted(
        d for d in os.listdir(root)
        if d not in ("info", "mon_groups", "mon_data")
        and os.path.isdir(os.path.join(root, d)))
    for name in names:
        files = {}
        for f in ("schemata", "cpus_list", "tasks"):
            with open(os.path.join(root, name, f)) as fh:
                files[f] = fh.read()
        if copy_to:
            d = os.path.join(copy_to, name or "_root")
            os.makedirs(d, exist_ok=True)
            for f, text in files.items():
                with open(os.path.join(d, f), "w") as fh:
                    fh.write(text)
        out[name or "/"] = {
            "schemata": {r: dict(v) for r, v in
                         Schemata.parse(files["schemata"]).lines.items()},
            "cpus": cpulist.parse(files["cpus_list"]),
            "tasks": len(files["tasks"].split())}
    return out


def _l3(snap, group) -> dict[int, int]:
    return snap[group]["schemata"].get("L3", {})


def check(scenario: Scenario, snap: dict, groups: dict[str, list[str]],
          pmd_cores: set[int] | None = None,
          pmd_ids: set[int] | None = None) -> list[tuple[str, bool]]:
    """(relation, holds) for the scenario.  ``groups`` maps a role
    (forwarding, noisy) to the resctrl groups of its instances;
    ``pmd_ids`` the L3 cache ids whose CPUs run the PMD threads (None:
    every id).  The seed's relations hold where the PMD cores are; on the
    other cache ids no PMD runs, there is nothing to share, and the PMD
    COS holds only the host's ways."""
    out = []
    root = _l3(snap, "/")
    fwd = groups.get("forwarding", [])
    noisy = groups.get("noisy", [])
    own = [g for g in fwd + noisy if g in snap]
    ids = sorted(root)
    disjoint = all(_l3(snap, a)[i] & _l3(snap, b)[i] == 0
                   for n, a in enumerate(own) for b in own[n + 1:]
                   for i in ids)
    out.append(("instances' ways are disjoint from each other", disjoint))
    out.append(("host (OS) ways overlap no instance", all(
        root[i] & _l3(snap, g)[i] == 0 for g in own for i in ids)))
    if scenario.pmd_cos:
        pmd = "nova-rdt-pmd"
        on = [i for i in ids if pmd_ids is None or i in pmd_ids]
        off = [i for i in ids if i not in on]
        where = f" on cache id(s) {', '.join(map(str, on))}" if off else ""
        union = {i: 0 for i in ids}
        for g in own:
            for i in ids:
                union[i] |= _l3(snap, g)[i]
        out.append((f"PMD COS = union of the sharing VMs' ways{where}",
                    pmd in snap and all(_l3(snap, pmd)[i] == union[i]
                                        for i in on)))
        out.append((f"PMD COS overlaps no host ways{where}",
                    pmd in snap and all(_l3(snap, pmd)[i] & root[i] == 0
                                        for i in on)))
        if off:
            out.append((f"PMD COS shares no instance's ways on cache id(s) "
                        f"{', '.join(map(str, off))} (no PMD core there)",
                        pmd in snap and all(
                            _l3(snap, pmd)[i] & union[i] == 0
                            for i in off)))
        if pmd_cores is not None:
            out.append((f"PMD COS holds exactly the PMD cores "
                        f"{sorted(pmd_cores)}",
                        pmd in snap and snap[pmd]["cpus"] == pmd_cores))
    for spec in scenario.classes:
        name, _, body = spec.partition(":")
        want = dict(kv.split("=") for kv in body.split(","))
        g = f"nova-rdt-class-{name}"
        ok = g in snap and all(bin(v).count("1") == int(want["l3_ways"])
                               for v in _l3(snap, g).values())
        out.append((f"class {name} has {want['l3_ways']} way(s)", ok))
        if "mb" in want:
            mb = snap.get(g, {}).get("schemata", {}).get("MB", {})
            out.append((f"class {name} is at MB {want['mb']}",
                        bool(mb) and all(v == int(want["mb"])
                                         for v in mb.values())))
        out.append((f"class {name} holds the neighbours' threads",
                    g in snap and snap[g]["tasks"] > 0))
        out.append((f"class {name} overlaps no other group", g in snap and all(
            _l3(snap, g)[i] & (_l3(snap, o)[i] if o != "/" else root[i]) == 0
            for o in own + ["/"] for i in ids)))
    return out
