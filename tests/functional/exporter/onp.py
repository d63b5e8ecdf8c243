"""The ONP app note's Table 3-1 layout, written straight into an emulated
E5-2658 v3 (20 ways), with hook records naming the two VMs."""

from __future__ import annotations

import os

from nova_rdt.host import records as records_mod

ROOT_MASK = 0x0000f
PMD = ("nova-rdt-pmd", 0xffff0)
VM0 = ("qemu-1-instance-00000001-vcpus_0", 0xff000,
       "6f1a3c86-5b1e-4c55-9a3a-000000000001", "vm0")
VM1 = ("qemu-2-instance-00000002-vcpus_0", 0x00ff0,
       "6f1a3c86-5b1e-4c55-9a3a-000000000002", "vm1")


def write_layout(root: str, state_path: str, domains=(0, 1)) -> None:
    def schemata(path, mask):
        line = ";".join(f"{d}={mask:x}" for d in domains)
        with open(os.path.join(path, "schemata"), "w") as f:
            f.write(f"L3:{line}\n")

    schemata(root, ROOT_MASK)
    recs = records_mod.Records(state_path)
    for group, mask, *vm in (PMD, VM0, VM1):
        os.mkdir(os.path.join(root, group))
        schemata(os.path.join(root, group), mask)
        if vm:
            uuid, name = vm
            recs.put(records_mod.Record(
                uuid=uuid, name=group.split("-", 2)[2].rsplit("-vcpus", 1)[0],
                pid=1, pid_start=None, pmd_share=True, rdt_class=None,
                group=group, instance_name=name, flavor="nfv.fwd"))
