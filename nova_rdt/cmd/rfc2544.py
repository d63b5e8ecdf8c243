"""``nova-rdt rfc2544 run``: arguments only; the command is
:mod:`nova_rdt.rfc2544.cli`."""

from __future__ import annotations

import argparse

from nova_rdt.cmd import common

EXIT_CODES = {
    0: "the report was written (its verdicts are in report.json)",
    1: "the traffic generator failed, or the report could not be written",
    2: "usage: a bad flag, a bad configuration file, or the rfc2544 extra "
       "is not installed",
}


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
        rr.set_defaults(func=_missing, missing=str(e),
                        exit_codes=EXIT_CODES)
        return
    cli.add_arguments(rr)
    rr.set_defaults(func=run, exit_codes=EXIT_CODES)


def run(args) -> int:
    from nova_rdt.rfc2544 import cli

    return cli.run(args)


def _missing(args) -> int:
    raise common.CliError(f"rfc2544 run needs the rfc2544 extra "
                          f"(pip install 'nova-rdt[rfc2544]'): "
                          f"{args.missing}")
