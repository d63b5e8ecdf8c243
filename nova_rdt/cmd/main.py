"""The ``nova-rdt`` command: a dispatcher over one module per command.

Each module in :mod:`nova_rdt.cmd` has ``register(subparsers)``, which
adds its parser and sets ``func`` and ``exit_codes`` (what each exit
status of the command means; doc/source/cli.rst's table is made from
them).  Every error a user can cause ends here as one line on stderr,
never a traceback: exit 2 for a bad flag, option value or configuration
(:class:`ValueError`, which :class:`~nova_rdt.cmd.common.CliError` is),
exit 1 for what the host could not do (resctrl, the filesystem, OVS).
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from nova_rdt.cmd import common
from nova_rdt.cmd import controller
from nova_rdt.cmd import emulate
from nova_rdt.cmd import exporter
from nova_rdt.cmd import hook
from nova_rdt.cmd import host
from nova_rdt.cmd import install_shim
from nova_rdt.cmd import pmd
from nova_rdt.cmd import reconcile
from nova_rdt.cmd import rfc2544
from nova_rdt.cmd import status

COMMANDS = (host, emulate, hook, pmd, reconcile, exporter, rfc2544,
            install_shim, status, controller)

# Long-running services set up their own logging (to stderr, which is
# their log); every other command is quiet but for its answer.
SERVICES = ("exporter", "controller")

LAB_EXIT_CODES = {
    0: "the scenario ran and every relation and verdict held",
    1: "a stage failed or a verdict did not hold (the report and its log "
       "say which)",
    2: "usage: a bad flag or option value",
}


def version() -> str:
    """The installed package's version, as pbr derived it."""
    from pbr import version as pbr_version

    try:
        return pbr_version.VersionInfo("nova-rdt").release_string()
    except Exception:       # not installed (a bare source tree)
        return "unknown (nova-rdt is not installed)"


class _Version(argparse.Action):
    """--version, resolved only when asked (pbr reads the metadata)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS,
                 default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default,
                         nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{common.PROG} {version()}")
        parser.exit(0)


def build_parser() -> common.Parser:
    parser = common.Parser(
        prog=common.PROG,
        description="Intel RDT isolation for OpenStack Nova.",
        epilog="Exit status: 0 success, 1 the host could not do it, 2 a "
               "bad flag, option value or configuration; 'status upgrade "
               "check' uses oslo.upgradecheck's 0/1/2/255.  Each "
               "command's --help has its own.")
    parser.add_argument("--version", action=_Version,
                        help="print nova-rdt's version and exit")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    # Parsed by nova_rdt.lab.demo (it must patch eventlet first); listed
    # here for --help.
    lab = sub.add_parser(
        "lab", add_help=False,
        help="the seed documents' scenarios end to end on this machine "
             "(doc: Seed documents): Host lab, Nova, libvirt, OVS-DPDK, "
             "exporter, RFC 2544 (nova-rdt lab --help)")
    lab.set_defaults(exit_codes=LAB_EXIT_CODES)
    _describe(parser)
    return parser


def _describe(parser: argparse.ArgumentParser) -> None:
    """Each command's own --help opens with what it does (the line its
    parent lists it with), and knows its parser, so that an unknown flag
    points at that command's --help."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        about = {a.dest: a.help for a in action._choices_actions}
        for name, child in action.choices.items():
            if child.description is None and about.get(name):
                text = about[name]
                child.description = text[0].upper() + text[1:] + "."
            child.set_defaults(command_parser=child)
            _describe(child)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["lab"]:
        # nova_rdt.lab.demo patches eventlet itself, once its log file is
        # open (so the patching's deprecation notices go there), and
        # before anything imports oslo.messaging.
        from nova_rdt.lab import demo
        return demo.main(argv[1:])
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        getattr(args, "command_parser", parser).error(
            f"unrecognized arguments: {' '.join(unknown)}")
    from nova_rdt.resctrl import errors

    quiet = (common.library_output(getattr(args, "log_file", None))
             if args.cmd not in SERVICES else contextlib.nullcontext())
    try:
        with quiet:
            return args.func(args)
    except KeyboardInterrupt:
        return common.fail("interrupted", common.EXIT_INTERRUPTED)
    except ValueError as e:
        # CliError, SettingsError, SpecError...: the input is wrong, and
        # the message names it.
        return common.fail(str(e), getattr(args, "usage_code",
                                           common.EXIT_USAGE))
    except (errors.ResctrlError, RuntimeError) as e:
        return common.fail(str(e), getattr(args, "failure_code",
                                           common.EXIT_FAILURE))
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        return common.fail(f"{where}{e.strerror or e}",
                           getattr(args, "failure_code",
                                   common.EXIT_FAILURE))


if __name__ == "__main__":
    sys.exit(main())
