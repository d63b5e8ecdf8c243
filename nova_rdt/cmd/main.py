"""The ``nova-rdt`` command."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys

from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.hostview import HostView


def _add_root_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--resctrl-root",
        default=os.environ.get("NOVA_RDT_RESCTRL_ROOT", caps_mod.DEFAULT_ROOT),
        help="resctrl mount point (default: $NOVA_RDT_RESCTRL_ROOT or "
             "%(default)s)")
    p.add_argument(
        "--sysfs-cpu-root",
        default=os.environ.get("NOVA_RDT_SYSFS_CPU", caps_mod.DEFAULT_SYSFS_CPU),
        help="where cpu*/cache/index*/ are read (default: "
             "$NOVA_RDT_SYSFS_CPU or %(default)s)")


def cmd_host_show(args) -> int:
    fs = Resctrl(args.resctrl_root, sysfs_cpu=args.sysfs_cpu_root)
    view = HostView.collect(fs)
    if args.json:
        json.dump(view.to_dict(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(view.render())
    return 0


def cmd_emulate(args) -> int:
    from nova_rdt.emulator import mount
    from nova_rdt.emulator import profiles

    if args.list_profiles:
        for name, p in sorted(profiles.PROFILES.items()):
            print(f"{name:16} {p.description}")
        return 0
    profiles.get(args.profile)  # a clear error for an unknown name
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.namespace:
        if not command:
            raise SystemExit("--namespace needs a command after '--'")
        return mount.run_in_namespace(args.profile, command)
    emu = mount.Emulator(args.profile, mountpoint=args.mountpoint)
    emu.start()
    try:
        if command:
            return subprocess.call(command, env={**os.environ, **emu.env()})
        print(f"emulated resctrl ({args.profile}) mounted at {emu.mountpoint}")
        for k, v in emu.env().items():
            print(f"export {k}={v}")
        print("Ctrl-C or SIGTERM unmounts it.", flush=True)
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
        signal.pause()
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        emu.stop()


def _settings(args):
    """Hook settings from --settings (JSON) or --config-file (oslo)."""
    from nova_rdt.host.settings import HookSettings

    if args.settings:
        return HookSettings.load(args.settings)
    from oslo_config import cfg

    from nova_rdt import conf as conf_mod
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    conf.register_opt(cfg.StrOpt("log_file"))
    conf([], project="nova-rdt", default_config_files=args.config_file
         or None, validate_default_values=True)
    return HookSettings.from_conf(conf)


def _add_settings_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config-file", action="append",
                   help="nova-rdt.conf (or nova.conf) with the [rdt] "
                        "options; repeatable")
    p.add_argument("--settings",
                   help="a hook settings JSON (as written by "
                        "'nova-rdt hook install') instead of --config-file")


def cmd_hook_install(args) -> int:
    from nova_rdt.hook import install

    settings = _settings(args)
    path = install.install(settings, hooks_dir=args.hooks_dir,
                           settings_path=args.settings_path,
                           python=args.python)
    print(f"installed {path} (settings {args.settings_path}); restart "
          f"libvirtd if this is the first install")
    return 0


def cmd_hook_uninstall(args) -> int:
    from nova_rdt.hook import install

    install.uninstall(hooks_dir=args.hooks_dir,
                      settings_path=args.settings_path)
    print(f"removed the nova-rdt hook from {args.hooks_dir}/qemu.d and "
          f"{args.settings_path}")
    return 0


def cmd_pmd_sync(args) -> int:
    from nova_rdt.host.agent import Agent

    print(Agent(_settings(args)).sync_pmd())
    return 0


def cmd_reconcile(args) -> int:
    import dataclasses

    from nova_rdt.host.agent import Agent

    report = Agent(_settings(args)).reconcile()
    json.dump(dataclasses.asdict(report), sys.stdout, indent=2,
              sort_keys=True)
    sys.stdout.write("\n")
    return 0


def cmd_exporter(args) -> int:
    import logging
    import socket

    from oslo_config import cfg

    from nova_rdt import conf as conf_mod
    from nova_rdt.exporter.live import LiveView
    from nova_rdt.exporter.sample import Sampler
    from nova_rdt.exporter import server

    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    conf([], project="nova-rdt", default_config_files=args.config_file
         or None, validate_default_values=True)
    logging.basicConfig(level=logging.INFO, format=(
        "%(asctime)s %(process)d %(levelname)s %(name)s %(message)s"))
    r, e = conf.rdt, conf.rdt_exporter
    fs = Resctrl(args.resctrl_root or r.resctrl_root, prefix=r.group_prefix,
                 sysfs_cpu=args.sysfs_cpu_root or r.sysfs_cpu_root)
    host = args.host or socket.gethostname()
    live = LiveView(Sampler(fs, args.state_path or r.state_path,
                            caps_ttl=e.capabilities_ttl))
    app = server.App(live, host)
    port = e.port if args.port is None else args.port
    httpd = server.serve(app, args.listen or e.listen_address, port)
    interval = (e.notify_interval if args.notify_interval is None
                else args.notify_interval)
    publisher = None
    if interval > 0:
        from nova_rdt.exporter.notifier import Publisher
        publisher = Publisher(conf, live, host, interval)
        publisher.start()
    addr, bound = httpd.server_address[:2]
    print(f"nova-rdt exporter for {host} ({fs.root}) on "
          f"http://{addr}:{bound}/ (metrics at /metrics)", flush=True)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    try:
        signal.pause()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        if publisher:
            publisher.stop()
        httpd.shutdown()
    return 0


def cmd_rfc2544_run(args) -> int:
    import yaml

    from nova_rdt.rfc2544 import config as rcfg
    from nova_rdt.rfc2544 import engine
    from nova_rdt.rfc2544 import generators
    from nova_rdt.rfc2544 import report

    doc = {}
    if args.config:
        with open(args.config) as f:
            doc = yaml.safe_load(f) or {}
    for key in ("label", "loss_tolerance", "resolution", "trial_duration",
                "latency_duration"):
        value = getattr(args, key)
        if value is not None:
            doc[key] = value
    if args.frame_sizes:
        doc["frame_sizes"] = [int(s) for s in args.frame_sizes.split(",")]
    if args.generator:
        doc["generator"] = {**doc.get("generator", {}),
                            "type": args.generator}
    try:
        cfg, gen_spec = rcfg.parse(doc)
        gen = generators.load(gen_spec)
    except (TypeError, ValueError) as e:
        print(f"nova-rdt rfc2544: bad configuration: {e}", file=sys.stderr)
        return 2

    def progress(ev):
        if ev["event"] == "frame":
            print(f"[{ev['frame_size']} B] throughput search", flush=True)
        elif ev["event"] == "trial":
            print(f"[{ev['frame_size']} B] trial {ev['trial']}: offered "
                  f"{ev['offered_pps']:,.0f} pps, sent "
                  f"{ev['achieved_pps']:,.0f}, loss {ev['loss_ratio']:.4%} "
                  f"{'PASS' if ev['passed'] else 'fail'}", flush=True)
        elif ev["event"] == "latency":
            print(f"[{ev['frame_size']} B] latency at "
                  f"{ev['rate_pps']:,.0f} pps", flush=True)
        elif ev["event"] == "result":
            lat = ev["avg_latency_us"]
            flags = [f for f, on in (
                ("GENERATOR-LIMITED", ev["generator_limited"]),
                ("not converged: " + (ev["note"] or "?"),
                 not ev["converged"])) if on]
            print(f"[{ev['frame_size']} B] throughput "
                  f"{ev['throughput_pps']:,.0f} pps offered, "
                  f"{ev['achieved_pps']:,.0f} sent, in {ev['trials']} "
                  f"trials, average latency "
                  f"{'-' if lat is None else f'{lat:.1f} µs'}"
                  f"{' [' + '; '.join(flags) + ']' if flags else ''}",
                  flush=True)

    try:
        result = engine.run(gen, cfg, progress)
    finally:
        gen.close()
    paths = report.write(result, args.out, plots=not args.no_plots)
    print(f"report in {args.out}: "
          f"{', '.join(os.path.basename(p) for p in paths)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nova-rdt",
        description="Intel RDT isolation for OpenStack Nova.")
    sub = parser.add_subparsers(dest="cmd", required=True)

    host = sub.add_parser("host", help="this host's RDT state")
    host_sub = host.add_subparsers(dest="host_cmd", required=True)
    show = host_sub.add_parser(
        "show", help="capabilities, groups, free ways and the way map")
    _add_root_args(show)
    show.add_argument("--json", action="store_true",
                      help="stable JSON for scripts")
    show.set_defaults(func=cmd_host_show)

    emu = sub.add_parser(
        "emulate", help="mount a kernel-faithful emulated resctrl",
        description="Mount an emulated resctrl filesystem for a host "
                    "profile.  With a command after '--', run it with the "
                    "emulator mounted and unmount afterwards.")
    emu.add_argument("--profile", default="gold-6252")
    emu.add_argument("--mountpoint",
                     help="where to mount (default: a new temp directory)")
    emu.add_argument("--namespace", action="store_true",
                     help="run the command in a private mount namespace "
                          "with the emulator at /sys/fs/resctrl and the "
                          "profile's cache topology in sysfs")
    emu.add_argument("--list-profiles", action="store_true")
    emu.add_argument("command", nargs=argparse.REMAINDER)
    emu.set_defaults(func=cmd_emulate)

    hook = sub.add_parser("hook", help="the libvirt hook")
    hook_sub = hook.add_subparsers(dest="hook_cmd", required=True)
    inst = hook_sub.add_parser(
        "install", help="write the hook shim and its resolved settings")
    _add_settings_args(inst)
    inst.add_argument("--hooks-dir", default="/etc/libvirt/hooks")
    inst.add_argument("--settings-path", default="/etc/nova-rdt/hook.json")
    inst.add_argument("--python", default=sys.executable,
                      help="interpreter with nova_rdt (default: this one)")
    inst.set_defaults(func=cmd_hook_install)
    uninst = hook_sub.add_parser(
        "uninstall", help="remove the hook shim and its settings (idempotent)")
    uninst.add_argument("--hooks-dir", default="/etc/libvirt/hooks")
    uninst.add_argument("--settings-path", default="/etc/nova-rdt/hook.json")
    uninst.set_defaults(func=cmd_hook_uninstall)

    pmd = sub.add_parser("pmd", help="the OVS-DPDK PMD COS")
    pmd_sub = pmd.add_subparsers(dest="pmd_cmd", required=True)
    sync = pmd_sub.add_parser(
        "sync", help="re-derive the PMD group from scratch: base ways, "
                     "sharing instances, PMD cores from OVS")
    _add_settings_args(sync)
    sync.set_defaults(func=cmd_pmd_sync)

    rec = sub.add_parser(
        "reconcile", help="remove groups of domains that are gone, re-add "
                          "running instances to their classes, resync the "
                          "PMD COS; never touches foreign groups")
    _add_settings_args(rec)
    rec.set_defaults(func=cmd_reconcile)

    exp = sub.add_parser(
        "exporter", help="Prometheus metrics, the way-map page and "
                         "notifications for this host")
    exp.add_argument("--config-file", action="append",
                     help="nova-rdt.conf with [rdt], [rdt_exporter] and "
                          "[oslo_messaging_notifications]; repeatable")
    exp.add_argument("--port", type=int,
                     help="listen port (default: [rdt_exporter] port; 0 "
                          "picks a free one)")
    exp.add_argument("--listen", help="listen address (default: "
                                      "[rdt_exporter] listen_address)")
    exp.add_argument("--resctrl-root",
                     default=os.environ.get("NOVA_RDT_RESCTRL_ROOT"),
                     help="resctrl mount point (default: [rdt] "
                          "resctrl_root)")
    exp.add_argument("--sysfs-cpu-root",
                     default=os.environ.get("NOVA_RDT_SYSFS_CPU"))
    exp.add_argument("--state-path",
                     help="the hook's records, for instance names "
                          "(default: [rdt] state_path)")
    exp.add_argument("--host", help="host label (default: hostname)")
    exp.add_argument("--notify-interval", type=float,
                     help="seconds between notifications; 0 turns them off "
                          "(default: [rdt_exporter] notify_interval)")
    exp.set_defaults(func=cmd_exporter)

    rfc = sub.add_parser("rfc2544", help="RFC 2544 throughput and latency")
    rfc_sub = rfc.add_subparsers(dest="rfc_cmd", required=True)
    rr = rfc_sub.add_parser(
        "run", help="search throughput, then measure latency, per frame "
                    "size; write JSON, CSV and PNG plots")
    rr.add_argument("--config", help="YAML (see nova_rdt.rfc2544.config)")
    rr.add_argument("--generator",
                    choices=["software", "ixnetwork", "simulated"],
                    help="overrides generator.type of the config")
    rr.add_argument("--frame-sizes", help="e.g. 64,512,1518")
    rr.add_argument("--loss-tolerance", dest="loss_tolerance", type=float,
                    help="0 for RFC 2544 proper, 0.001 for 0.1%%")
    rr.add_argument("--resolution", type=float)
    rr.add_argument("--trial-duration", dest="trial_duration", type=float)
    rr.add_argument("--latency-duration", dest="latency_duration",
                    type=float)
    rr.add_argument("--label")
    rr.add_argument("--out", default="rfc2544-report",
                    help="report directory (default: %(default)s)")
    rr.add_argument("--no-plots", action="store_true")
    rr.set_defaults(func=cmd_rfc2544_run)

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
        # Nova's in-process harness needs eventlet's patching before
        # anything imports oslo.messaging: before the rest of the CLI.
        from nova import monkey_patch
        monkey_patch.patch()
        from nova_rdt.lab import demo
        return demo.main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except errors.ResctrlError as e:
        print(f"nova-rdt: {e}", file=sys.stderr)
        return 2
    except (ValueError, RuntimeError) as e:
        print(f"nova-rdt: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
