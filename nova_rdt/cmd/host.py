"""``nova-rdt host show``: this host's RDT state."""

from __future__ import annotations

import json
import sys

from nova_rdt.cmd import common


def register(sub) -> None:
    host = sub.add_parser("host", help="this host's RDT state")
    host_sub = host.add_subparsers(dest="host_cmd", required=True)
    show = host_sub.add_parser(
        "show", help="capabilities, groups, free ways and the way map")
    common.add_root_args(show)
    show.add_argument("--json", action="store_true",
                      help="the same state as one JSON document on stdout, "
                           "for scripts; its \"version\" changes when a "
                           "field changes meaning")
    common.add_log_arg(show)
    show.set_defaults(func=show_cmd, exit_codes=EXIT_CODES)


EXIT_CODES = {
    0: "the host's state was printed",
    1: "no resctrl at --resctrl-root, or it could not be read",
    2: "usage: a bad flag",
}


def show_cmd(args) -> int:
    from nova_rdt.resctrl.groups import Resctrl
    from nova_rdt.resctrl.hostview import HostView

    fs = Resctrl(args.resctrl_root, sysfs_cpu=args.sysfs_cpu_root)
    view = HostView.collect(fs)
    if args.json:
        json.dump(view.to_dict(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(view.render())
    return 0
