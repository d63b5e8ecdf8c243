"""``nova-rdt reconcile``: clean up after dead domains, re-apply classes."""

from __future__ import annotations

import dataclasses
import os

from nova_rdt.cmd import common


def register(sub) -> None:
    rec = sub.add_parser(
        "reconcile", help="remove groups of domains that are gone, re-add "
                          "running instances to their classes, resync the "
                          "PMD COS; never touches foreign groups")
    common.add_settings_args(rec)
    common.add_json_arg(rec, "the report (removed_groups, rejoined, "
                             "restored_groups, unreadable_records, "
                             "degraded... every field always present)")
    common.add_log_arg(rec)
    rec.set_defaults(func=reconcile, exit_codes=EXIT_CODES)


# Exit status when something could not be repaired (the report's
# ``degraded`` says what): a runtime failure, as for every command.
EXIT_DEGRADED = common.EXIT_FAILURE

EXIT_CODES = {
    0: "the host converged (records that could not be read are listed, "
       "and left for the operator)",
    1: "something could not be repaired: resctrl unavailable, the state "
       "path full or read-only, a running instance's group not "
       "re-created (each listed under degraded)",
    2: "usage: a bad flag, or a missing or invalid configuration or "
       "settings file",
}

# The report's lists, in the order the text shows them.
_SECTIONS = (
    ("removed_groups", "removed groups of domains that are gone"),
    ("dropped_records", "dropped records of domains that are gone"),
    ("rejoined", "re-added to their class groups"),
    ("restored_groups", "restored groups of running instances"),
    ("adopted", "adopted running instances"),
    ("swept", "swept"),
    ("controller_restored", "classes restored from a stopped controller"),
    ("unreadable_records", "unreadable, left for the operator"),
    ("degraded", "NOT REPAIRED"),
)


def render(report: dict) -> str:
    """The report for a person: one line per kind of change, and a
    closing verdict."""
    lines = []
    for key, title in _SECTIONS:
        items = report.get(key) or []
        if items:
            lines.append(f"{title}: {', '.join(map(str, items))}")
    if report.get("restored_host"):
        lines.append("restored the root group's reserved ways")
    if report.get("pmd"):
        lines.append(f"PMD COS: {report['pmd']}")
    hard = _hard(report)
    lines.append("reconcile: " + (
        f"{len(hard)} problem(s) not repaired" if hard else
        "converged" + (" (nothing to do)" if not lines else "")))
    return "\n".join(lines)


def _hard(report: dict) -> list[str]:
    return [d for d in report["degraded"]
            if not d.startswith(("records_unreadable:",
                                 "controller_state:"))]


def reconcile(args) -> int:
    """Exit 0 when the host converged, even when some records were
    unusable: the report names each one (``unreadable_records``) and
    everything else was done.  Exit 1 when something else could not be
    repaired (resctrl unavailable, the state path full or read-only, a
    running instance's group not re-created): ``degraded`` names each,
    and each was logged once.

    A controller that died without restoring its classes left them
    throttled: they go back to their static values first (nothing is
    done while it runs, or after it stopped cleanly).  Here and not in
    the agent, because the controller builds on the host side.
    """
    from nova_rdt.controller import state as controller_state
    from nova_rdt.hook import adopt
    from nova_rdt.host import recovery
    from nova_rdt.host.agent import Agent
    from nova_rdt.host.agent import ReconcileReport

    settings = common.settings(args)
    agent = Agent(settings)
    state_file = os.path.join(settings.state_path, "controller.json")
    if not getattr(args, "settings", None):
        conf = common.load_conf(args.read_files)
        state_file = conf.rdt_controller.state_file or state_file
    restored: list[str] = []
    unreadable: list[str] = []
    degraded: list[str] = []
    try:
        restored = controller_state.restore(agent.fs, state_file)
    except controller_state.StateError as e:
        unreadable.append(f"{state_file}: {e}")
        degraded.append(f"controller_state: {state_file}: {e}")
    except Exception as e:
        # resctrl gone: the agent's reconcile below says so, once.
        if not recovery.resctrl_lost(e):
            raise
    adopted = ReconcileReport()
    if recovery.probe_resctrl(agent.fs.root) is None:
        adopt.adopt(agent, adopted)
    result = agent.reconcile()
    result.adopted = adopted.adopted
    report = dataclasses.asdict(result)
    report["controller_restored"] = restored
    report["unreadable_records"] = report["unreadable_records"] + unreadable
    report["degraded"] = report["degraded"] + degraded
    common.report(args, report, render(report))
    return EXIT_DEGRADED if _hard(report) else 0
