"""``nova-rdt rfc2544 run``: arguments only; the command is
:mod:`nova_rdt.rfc2544.cli`."""

from __future__ import annotations

import argparse

from nova_rdt.cmd import common


def register(sub) -> None:
    rfc = sub.add_parser("rfc2544", help="RFC 2544 throughput and latency")
    rfc_sub = rfc.add_subparsers(dest="rfc_cmd", required=True)
    rr = rfc_sub.add_parser(
        "run", help="search throughput, then measure latency, per frame "
                    "size; write JSON, CSV and PNG plots")
    try:
        from nova_rdt.rfc2544 import cli
    except ImportError as e:
        # A compute node without the [rfc2544] extra still has every
        # other command; this one says what to install.
        rr.add_argument("rest", nargs=argparse.REMAINDER,
                        help=argparse.SUPPRESS)
        rr.set_defaults(func=_missing, missing=str(e))
        return
    cli.add_arguments(rr)
    rr.set_defaults(func=run)


def run(args) -> int:
    from nova_rdt.rfc2544 import cli

    return cli.run(args)


def _missing(args) -> int:
    raise common.CliError(f"rfc2544 run needs the rfc2544 extra "
                          f"(pip install 'nova-rdt[rfc2544]'): "
                          f"{args.missing}")
