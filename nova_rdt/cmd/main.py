"""The ``nova-rdt`` command: a dispatcher over one module per command.

Each module in :mod:`nova_rdt.cmd` has ``register(subparsers)``, which
adds its parser and sets ``func``.  Every error a user can cause ends
here as one line on stderr and exit status 2; never a traceback.
"""

from __future__ import annotations

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


def build_parser() -> common.Parser:
    parser = common.Parser(
        prog=common.PROG,
        description="Intel RDT isolation for OpenStack Nova.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for command in COMMANDS:
        command.register(sub)
    # Parsed by nova_rdt.lab.demo (it must patch eventlet first); listed
    # here for --help.
    sub.add_parser("lab", add_help=False,
                   help="the seed scenarios end to end on this machine: "
                        "Host lab, Nova, libvirt, OVS-DPDK, exporter, "
                        "RFC 2544 (nova-rdt lab --help)")
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["lab"]:
        # nova_rdt.lab.demo patches eventlet itself, once its log file is
        # open (so the patching's deprecation notices go there), and
        # before anything imports oslo.messaging.
        from nova_rdt.lab import demo
        return demo.main(argv[1:])
    args = build_parser().parse_args(argv)
    from nova_rdt.resctrl import errors

    try:
        return args.func(args)
    except KeyboardInterrupt:
        return common.fail("interrupted", 130)
    except (errors.ResctrlError, ValueError, RuntimeError) as e:
        # CliError, SettingsError, SpecError... name what is wrong.
        return common.fail(str(e))
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        return common.fail(f"{where}{e.strerror or e}")


if __name__ == "__main__":
    sys.exit(main())
