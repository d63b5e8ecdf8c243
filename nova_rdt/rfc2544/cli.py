"""``nova-rdt rfc2544 run``: the configuration merged from the YAML file
and the flags, validated, then the run with its progress on the console.

The command module only parses arguments: ``add_arguments(parser)`` then
``run(args)``.  Importing this module needs no PyYAML or matplotlib (the
``rfc2544`` extra); running it does.  Exit codes: 0 done, 1 the
generator failed while running, 2 bad input (one line on stderr naming
the file, key or option and what is allowed; never a traceback).
"""

from __future__ import annotations

import argparse
import os
import sys

from nova_rdt import cliargs
from nova_rdt.rfc2544 import generators
from nova_rdt.rfc2544 import wording

PROG = "nova-rdt rfc2544"


def add_arguments(rr: argparse.ArgumentParser) -> None:
    rr.add_argument("--config", type=cliargs.path,
                    help="the run's settings as a YAML file: generator, "
                         "frame sizes, durations, tolerances (every key is "
                         "in the docs' RFC 2544 page); the flags below "
                         "override it")
    rr.add_argument("--generator", choices=list(generators.TYPES),
                    help="overrides generator.type of the config")
    rr.add_argument("--frame-sizes",
                    help="frame sizes in bytes, e.g. 64,512,1518 "
                         "(overrides frame_sizes)")
    rr.add_argument("--loss-tolerance", dest="loss_tolerance", type=float,
                    help="0 for RFC 2544 proper, 0.001 for 0.1%%")
    rr.add_argument("--resolution", type=float,
                    help="the search stops when the pass/fail bounds are "
                         "this fraction of the rate apart (overrides "
                         "resolution)")
    rr.add_argument("--trial-duration", dest="trial_duration", type=float,
                    help="seconds of traffic per throughput trial "
                         "(overrides trial_duration)")
    rr.add_argument("--initial-trial-duration",
                    dest="initial_trial_duration", type=float,
                    help="seconds of each exploratory trial, which only "
                         "aim; 0 for none (overrides "
                         "initial_trial_duration)")
    rr.add_argument("--goal", action="append", dest="goals",
                    metavar="KEY=VALUE,...",
                    help="an RFC 9971 search goal, repeatable (all are "
                         "served from shared trials): loss_ratio, "
                         "exceed_ratio, final_trial_duration, "
                         "duration_sum, name; e.g. loss_ratio=0 "
                         "--goal loss_ratio=0.005,name=PDR (overrides "
                         "goals)")
    rr.add_argument("--latency-duration", dest="latency_duration",
                    type=float,
                    help="seconds of traffic for the latency measurement "
                         "at the found rate (overrides latency_duration)")
    rr.add_argument("--label",
                    help="a name for the run in the report (overrides "
                         "label)")
    rr.add_argument("--out", default="rfc2544-report", type=cliargs.path,
                    help="report directory (default: %(default)s)")
    rr.add_argument("--no-plots", action="store_true",
                    help="write JSON and CSV only, no PNG figures")


def _flag_sizes(text: str) -> list[int]:
    from nova_rdt.rfc2544 import config as rcfg
    try:
        sizes = [int(s, 10) for s in text.split(",")]
    except ValueError:
        raise rcfg.ConfigError("--frame-sizes", f"{text!r} is not a comma-"
                               f"separated list of integers, e.g. "
                               f"64,512,1518") from None
    return sizes


def merged(args) -> dict:
    """The configuration document: the file, then the flags over it."""
    from nova_rdt.rfc2544 import config as rcfg
    doc = rcfg.load_file(args.config) if getattr(args, "config", None) \
        else {}
    for key in ("label", "loss_tolerance", "resolution", "trial_duration",
                "initial_trial_duration", "latency_duration"):
        value = getattr(args, key, None)
        if value is not None:
            doc[key] = value
    if getattr(args, "goals", None):
        from nova_rdt.rfc2544 import config as rcfg
        doc["goals"] = [rcfg.goal_from_text(g, "--goal") for g in args.goals]
    if getattr(args, "frame_sizes", None):
        doc["frame_sizes"] = _flag_sizes(args.frame_sizes)
    if getattr(args, "generator", None):
        gen = doc.get("generator")
        doc["generator"] = {**(gen if isinstance(gen, dict) else {}),
                            "type": args.generator}
    return doc


def check_out_dir(path: str) -> None:
    """Refuse an output directory that cannot be one, before any trial."""
    from nova_rdt.rfc2544 import config as rcfg
    if os.path.exists(path) and not os.path.isdir(path):
        raise rcfg.ConfigError("--out", f"{path} exists and is not a "
                                        f"directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise rcfg.ConfigError("--out", f"cannot create {path}: "
                                        f"{e.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise rcfg.ConfigError("--out", f"{path} is not writable")


def progress_line(ev: dict) -> str | None:
    kind = ev["event"]
    if kind == "frame":
        return f"[{ev['frame_size']} B] throughput search"
    if kind == "trial":
        limited = " (generator-limited: sent less than offered)" \
            if ev.get("generator_limited") else ""
        return (f"[{ev['frame_size']} B] trial {ev['trial']}: offered "
                f"{ev['offered_pps']:,.0f} pps, sent "
                f"{ev['achieved_pps']:,.0f}{limited}"
                + (f" for {ev['duration']:g} s" if "duration" in ev
                   else "") + ", loss "
                f"{ev['loss_ratio']:.4%} "
                f"{'PASS' if ev['passed'] else 'fail'}")
    if kind == "latency":
        return (f"[{ev['frame_size']} B] latency at "
                f"{ev['rate_pps']:,.0f} pps")
    if kind == "result":
        line = wording.result_line(ev)
        for g in ev.get("goals") or ():
            up = g["upper_bound_pps"]
            line += (f"\n[{ev['frame_size']} B] goal {g['goal']}: "
                     f"conditional throughput "
                     f"{g['conditional_throughput_pps']:,.0f} pps, bounds "
                     f"{g['lower_bound_pps']:,.0f} - "
                     + ("none" if up is None else f"{up:,.0f}") + " pps")
        for note in ev.get("log") or ():
            line += f"\n[{ev['frame_size']} B] {note}"
        return line
    return None


def _fail(message: str, code: int = 2) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


def run(args) -> int:
    """``args``: config, generator, frame_sizes, loss_tolerance,
    resolution, trial_duration, latency_duration, label, out, no_plots
    (as ``add_arguments`` defines them)."""
    from nova_rdt.rfc2544 import config as rcfg
    from nova_rdt.rfc2544 import engine
    from nova_rdt.rfc2544 import report

    source = args.config or "(flags)"
    try:
        doc = merged(args)
        cfg, gen_spec = rcfg.parse(doc)
    except rcfg.ConfigError as e:
        where = "" if e.key == source or e.key.startswith("--") \
            else f"{source}: "
        return _fail(f"bad configuration: {where}{e}")
    try:
        check_out_dir(args.out)
    except rcfg.ConfigError as e:
        return _fail(f"bad configuration: {e}")
    try:
        gen = generators.load(gen_spec)
    except (TypeError, ValueError) as e:
        return _fail(f"bad configuration: {source}: generator: {e}")
    except OSError as e:
        return _fail(f"generator: {e}", 1)

    def progress(ev):
        line = progress_line(ev)
        if line:
            print(line, flush=True)

    try:
        result = engine.run(gen, cfg, progress)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except (OSError, RuntimeError, ValueError) as e:
        return _fail(f"generator failed: {e}", 1)
    finally:
        gen.close()
    try:
        paths = report.write(result, args.out, plots=not args.no_plots)
    except OSError as e:
        return _fail(f"cannot write the report in {args.out}: "
                     f"{e.strerror or e}", 1)
    print(f"report in {args.out}: "
          f"{', '.join(os.path.basename(p) for p in paths)}")
    return 0


def main(argv=None) -> int:
    """``python -m nova_rdt.rfc2544.cli run ...``: the same command
    without the rest of ``nova-rdt``."""
    parser = argparse.ArgumentParser(prog=PROG)
    sub = parser.add_subparsers(dest="rfc_cmd", required=True)
    add_arguments(sub.add_parser("run"))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
