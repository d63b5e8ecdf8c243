"""``nova-rdt controller``: the runtime resource manager for this host."""

from __future__ import annotations

import os
import signal
import threading

from nova_rdt.cmd import common


def register(sub) -> None:
    p = sub.add_parser(
        "controller", help="the runtime resource manager: lowers and "
                           "raises the MB and ways of best-effort classes "
                           "as protected instances need; restores them on "
                           "stop")
    common.add_service_args(
        p, "[rdt] and [rdt_controller]", "",
        named="in its start-up line (with --restore: on stderr, or in "
              "--json's config_files)")
    p.add_argument("--state-file", type=common.path,
                   help="the controller's state (default: [rdt_controller] "
                        "state_file)")
    p.add_argument("--policy", choices=("bandwidth-share", "slack",
                                        "static"),
                   help="default: [rdt_controller] policy")
    p.add_argument("--period", type=common.seconds,
                   help="seconds per period (default: [rdt_controller] "
                        "period)")
    p.add_argument("--dry-run", action="store_true", default=None,
                   help="decide and log, write nothing")
    common.add_listen_args(p, "rdt_controller",
                           "every series and notification")
    p.add_argument("--web-config-file", type=common.path,
                   help="TLS and basic auth for /metrics, in the "
                        "exporter-toolkit web config format (default: "
                        "[rdt_controller] web_config_file)")
    p.add_argument("--no-metrics", action="store_true",
                   help="serve no /metrics")
    p.add_argument("--no-guardian", action="store_true",
                   help="no guardian process (restores on SIGKILL)")
    p.add_argument("--debug", action="store_true",
                   help="log every period's observation")
    p.add_argument("--restore", action="store_true",
                   help="do not run: put every class the state file lists "
                        "back to its static values if its controller is "
                        "not running, print them, exit")
    common.add_json_arg(p, "with --restore: the classes put back "
                           "(restored)")
    p.set_defaults(func=controller, exit_codes=EXIT_CODES)


EXIT_CODES = {
    0: "stopped by SIGTERM, SIGINT or SIGHUP with every class restored, "
       "or --restore done",
    1: "it could not listen on its /metrics address and port",
    2: "usage: a bad flag, a missing or invalid configuration file, an "
       "[rdt_controller] option, or an unreadable --restore state file",
}


def load(args):

    from nova_rdt.conf import controller as conf_ctl

    files = common.config_files(args)
    conf = common.load_conf(files)
    args.read_files = files
    conf_ctl.register_opts(conf)
    _check_section(conf, conf_ctl.controller_opts)
    return conf


def _check_section(conf, opts) -> None:
    """Unknown keys and bad values in [rdt_controller], named with file
    and line, as load_conf does for [rdt]."""
    from oslo_config import cfg
    from oslo_config import iniparser

    known = {o.dest for o in opts}
    where: dict[str, tuple[str, int]] = {}

    class Keys(iniparser.BaseParser):
        section = ""

        def new_section(self, section):
            self.section = section

        def assignment(self, key, value):
            if self.section == "rdt_controller":
                where[key] = (path, self.lineno)

    for path in conf.config_file or ():
        with open(path) as f:
            Keys().parse(f)
    for key, (path, lineno) in where.items():
        if key not in known:
            raise common.CliError(
                f"{path}:{lineno}: unknown option [rdt_controller] {key}; "
                f"known: {', '.join(sorted(known))}")
    for o in opts:
        try:
            getattr(conf.rdt_controller, o.dest)
        except (cfg.Error, ValueError) as e:
            path, lineno = where.get(o.dest, ("?", 0))
            raise common.CliError(
                f"{path}:{lineno}: [rdt_controller] {o.dest}: "
                f"{str(e).split(' is not valid: ', 1)[-1]}") from None


def controller(args) -> int:
    from nova_rdt.controller import state as state_mod
    from nova_rdt.resctrl.groups import Resctrl

    conf = load(args)
    r, c = conf.rdt, conf.rdt_controller
    common.service_logging(debug=args.debug)
    fs = Resctrl(args.resctrl_root or r.resctrl_root, prefix=r.group_prefix,
                 sysfs_cpu=args.sysfs_cpu_root or r.sysfs_cpu_root,
                 lock_timeout=r.lock_timeout)
    state_path = args.state_path or r.state_path
    state_file = args.state_file or c.state_file or \
        os.path.join(state_path, "controller.json")
    if args.restore:
        if not args.json:
            common.say_read(args.read_files)
        try:
            done = state_mod.restore(fs, state_file)
        except state_mod.StateError as e:
            raise common.CliError(str(e)) from None
        common.report(args, {"restored": done, "state_file": state_file},
                      "restored: " + (", ".join(done) or
                                      "nothing to restore"))
        return 0
    if args.json:
        raise common.CliError("--json goes with --restore (the controller "
                              "itself logs to stderr)")
    return run(args, conf, fs, state_path, state_file)


def host_name(args) -> str:
    """The ``host`` label: Nova's ``[DEFAULT] host``, as the exporter's,
    so that the dashboard's host variable selects both."""
    from nova_rdt.exporter import hostname

    return hostname.nova_host(getattr(args, "read_files", None),
                              getattr(args, "host", None))


def build(args, conf, fs, state_path, state_file, metrics=None,
          notifier=None):
    from nova_rdt.controller import daemon
    from nova_rdt.controller import model
    from nova_rdt.controller import policy as pol
    from nova_rdt.controller import slo_spec
    from nova_rdt.controller import sources
    from nova_rdt.host.records import Records

    c = conf.rdt_controller
    period = c.period if args.period is None else args.period
    if period <= 0:
        raise common.CliError("--period must be above 0 seconds")
    name = args.policy or c.policy
    if c.low_slack >= c.high_slack:
        raise common.CliError(
            "[rdt_controller] low_slack must be below high_slack")
    slos = slo_spec.parse_all(c.slo)
    if name == "slack" and not slos:
        raise common.CliError(
            "[rdt_controller] policy = slack needs at least one "
            "[rdt_controller] slo = INSTANCE=TARGET@SOURCE")
    kwargs: dict = {}
    if name == "slack":
        kwargs = {"low_slack": c.low_slack, "high_slack": c.high_slack}
    elif name == "bandwidth-share":
        kwargs = {"capacity": c.bandwidth_capacity_mbps * daemon.MIB,
                  "utilisation": c.target_utilisation}
    policy = pol.make(name, **kwargs)
    max_age = c.slo_max_age or 3 * period
    protected = [daemon.Protected(
        s.instance, sources.make(s, c.prometheus_url, c.slo_timeout,
                                 max_age), s.target)
        for s in slos.values()]
    protected += [daemon.Protected(n) for n in c.protected if n not in slos]
    bounds = model.Bounds(mb_min=c.mb_min, ways_min=c.ways_min,
                          mb_step=c.mb_step)
    dry = c.dry_run if args.dry_run is None else args.dry_run
    ctl = daemon.Controller(
        fs, policy, bounds, state_file, classes=c.classes,
        protected=protected, records=Records(state_path), dry_run=dry,
        min_interval=c.min_interval, raise_hold=c.raise_hold,
        metrics=metrics, notifier=notifier, host=host_name(args))
    return ctl, period, name, dry


def run(args, conf, fs, state_path, state_file) -> int:
    from nova_rdt.controller import metrics as metrics_mod

    c = conf.rdt_controller
    host = host_name(args)
    metrics = metrics_mod.Metrics(host, args.policy or c.policy,
                                  c.dry_run if args.dry_run is None
                                  else args.dry_run)
    from nova_rdt.controller import notify

    sender = notify.Sender(conf, host)
    ctl, period, name, dry = build(args, conf, fs, state_path, state_file,
                                   metrics, sender)
    httpd = None
    port = c.port if args.port is None else args.port
    address = args.listen or c.listen_address
    if not args.no_metrics:
        from nova_rdt.web import webconfig
        try:
            web = webconfig.Watcher(args.web_config_file
                                    or c.web_config_file)
        except webconfig.WebConfigError as err:
            raise common.CliError(str(err)) from None
        try:
            httpd = metrics_mod.serve(metrics, address, port, web)
        except OSError as err:
            raise common.Failure(f"cannot listen on {address}:{port}: "
                                 f"{err.strerror or err}") from None
    if httpd is None:
        where = "no /metrics"
    else:
        addr, bound = httpd.server_address[:2]
        scheme = "https" if httpd.web.config.tls else "http"
        where = f"metrics at {scheme}://{addr}:{bound}/metrics"
    print(f"nova-rdt controller for {host}: policy {name}, period "
          f"{period:g}s"
          f"{', dry run' if dry else ''}, {fs.root}, state {state_file}, "
          f"{where}; configuration read from "
          f"{common.read_text(getattr(args, 'read_files', []))}",
          flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *a: stop.set())
    try:
        ctl.run(period, stop, guardian=not args.no_guardian)
    finally:
        sender.close()
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
    return 0
