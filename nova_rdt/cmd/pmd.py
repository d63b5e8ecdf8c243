"""``nova-rdt pmd sync``: re-derive the OVS-DPDK PMD COS."""

from __future__ import annotations

from nova_rdt.cmd import common

EXIT_CODES = {
    0: "the PMD group was written from the base ways, the sharing "
       "instances and OVS's PMD cores (a warning says when OVS could not "
       "be asked and the group kept its CPUs, or when a sharing instance "
       "could not be covered: --json's degraded)",
    1: "resctrl refused or is not there, or nova-compute has not "
       "prepared the host yet (nothing is written)",
    2: "usage: a bad flag, or a missing or invalid configuration file",
}


def register(sub) -> None:
    pmd = sub.add_parser("pmd", help="the OVS-DPDK PMD COS")
    pmd_sub = pmd.add_subparsers(dest="pmd_cmd", required=True)
    sync = pmd_sub.add_parser(
        "sync", help="re-derive the PMD group from scratch: base ways, "
                     "sharing instances, PMD cores from OVS")
    common.add_settings_args(sync)
    common.add_json_arg(sync)
    common.add_log_arg(sync)
    sync.set_defaults(func=sync_cmd, exit_codes=EXIT_CODES)


def sync_cmd(args) -> int:
    from nova_rdt.host.agent import Agent
    from nova_rdt.host.pmdcos import NotPrepared

    agent = Agent(common.settings(args))
    try:
        summary = agent.sync_pmd(prepared_only=True)
    except NotPrepared as e:
        return common.fail(str(e), common.EXIT_FAILURE)
    plan = agent.last_pmd_plan
    doc = {"summary": summary}
    if plan is not None:
        doc.update(schemata=plan.schemata.format().strip().splitlines(),
                   sharing=list(plan.sharing), dropped=list(plan.dropped),
                   degraded=plan.degraded)
    common.report(args, doc, summary)
    return 0
