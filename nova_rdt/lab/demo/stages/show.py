"""Stage 5: what resctrl holds, next to the seed's table: the COS table,
the way map per cache id and the scenario's relations, from the raw files
(also copied to ``<out>/resctrl`` for checks that trust no summary)."""

from __future__ import annotations

import dataclasses
import json
import os

from nova_rdt.host import agent as agent_mod
from nova_rdt.lab import scenarios
from nova_rdt.lab.demo import tables
from nova_rdt.resctrl.groups import Resctrl


@dataclasses.dataclass(frozen=True)
class Shown:
    cos_table: str
    seed_table: str
    way_map: str
    relations: list[tuple[str, bool]]


def _n_ways(resctrl_root: str) -> int:
    info = os.path.join(resctrl_root, "info")
    l3 = "L3" if os.path.isdir(os.path.join(info, "L3")) else "L3CODE"
    with open(os.path.join(info, l3, "cbm_mask")) as f:
        return bin(int(f.read(), 16)).count("1")


def run(lab, scenario, outcome, out_dir: str, say) -> Shown:
    say.stage(5, "Show")
    snap = scenarios.snapshot(lab.resctrl_root,
                              copy_to=os.path.join(out_dir, "resctrl"))
    names, roles = tables.group_names(snap, outcome.servers)
    with open(os.path.join(out_dir, "servers.json"), "w") as f:
        json.dump(outcome.servers, f, indent=2)
    cos = tables.table(tables.cos_rows(snap, names), tables.COS_HEAD)
    seed = tables.table(list(scenario.seed_table), ("seed COS", "mask"))
    ways = tables.way_map(snap, names, _n_ways(lab.resctrl_root))
    say(cos)
    say("\nThe seed's table:\n" + seed)
    say("\n" + ways)
    pmd_cores = ({t.core for t in lab.ovs.pmd_threads()}
                 if scenario.pmd_cos else None)
    pmd_ids = None
    if pmd_cores:
        caps = Resctrl(lab.resctrl_root,
                       sysfs_cpu=lab.sysfs_cpu_root).capabilities()
        pmd_ids = agent_mod.pmd_cache_ids(caps, pmd_cores)
    # Fillers are extra load for the no-valid-host story, not part of the
    # seed's relations.
    relations = scenarios.check(
        scenario, snap, {k: v for k, v in roles.items() if k != "filler"},
        pmd_cores, pmd_ids)
    say("")
    for text, ok in relations:
        say(f"  [{'ok' if ok else 'FAILED'}] {text}")
    return Shown(cos, seed, ways, relations)
