"""``nova-rdt pmd sync``: re-derive the OVS-DPDK PMD COS."""

from __future__ import annotations

from nova_rdt.cmd import common


def register(sub) -> None:
    pmd = sub.add_parser("pmd", help="the OVS-DPDK PMD COS")
    pmd_sub = pmd.add_subparsers(dest="pmd_cmd", required=True)
    sync = pmd_sub.add_parser(
        "sync", help="re-derive the PMD group from scratch: base ways, "
                     "sharing instances, PMD cores from OVS")
    common.add_settings_args(sync)
    sync.set_defaults(func=sync_cmd)


def sync_cmd(args) -> int:
    from nova_rdt.host.agent import Agent

    print(Agent(common.settings(args)).sync_pmd())
    return 0
