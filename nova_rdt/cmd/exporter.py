"""``nova-rdt exporter``: Prometheus metrics, the way-map page and
notifications for this host."""

from __future__ import annotations

import signal
import sys

from nova_rdt.cmd import common


def register(sub) -> None:
    exp = sub.add_parser(
        "exporter", help="Prometheus metrics, the way-map page and "
                         "notifications for this host")
    common.add_service_args(
        exp, "[rdt], [rdt_exporter] and [oslo_messaging_notifications]",
        ", for instance names")
    common.add_listen_args(exp, "rdt_exporter", "every series")
    exp.add_argument("--notify-interval", type=common.seconds,
                     help="seconds between notifications; 0 turns them off "
                          "(default: [rdt_exporter] notify_interval)")
    exp.add_argument("--client-timeout", type=common.seconds,
                     help="seconds a connection may last before it is "
                          "closed (default: [rdt_exporter] client_timeout)")
    exp.add_argument("--web-config-file", type=common.path,
                     help="TLS and basic auth, in the exporter-toolkit web "
                          "config format (default: [rdt_exporter] "
                          "web_config_file)")
    exp.set_defaults(func=exporter, exit_codes=EXIT_CODES)


EXIT_CODES = {
    0: "stopped by SIGTERM or Ctrl-C",
    1: "it could not listen on its address and port",
    2: "usage: a bad flag, a missing or invalid configuration file, or a "
       "bad web config",
}


def exporter(args) -> int:
    from nova_rdt.exporter import server
    from nova_rdt.exporter.live import LiveView
    from nova_rdt.exporter.sample import Sampler
    from nova_rdt.resctrl.groups import Resctrl

    files = common.config_files(args)
    conf = common.load_conf(files)
    common.service_logging()
    r, e = conf.rdt, conf.rdt_exporter
    fs = Resctrl(args.resctrl_root or r.resctrl_root, prefix=r.group_prefix,
                 sysfs_cpu=args.sysfs_cpu_root or r.sysfs_cpu_root)
    from nova_rdt.exporter import hostname

    host = hostname.nova_host(files, args.host)
    live = LiveView(Sampler(fs, args.state_path or r.state_path))
    from nova_rdt.web import webconfig
    try:
        web = webconfig.Watcher(args.web_config_file or e.web_config_file)
    except webconfig.WebConfigError as err:
        raise common.CliError(str(err)) from None
    app = server.App(live, host, web)
    port = e.port if args.port is None else args.port
    timeout = (e.client_timeout if args.client_timeout is None
               else args.client_timeout)
    if timeout <= 0:
        raise common.CliError("--client-timeout must be above 0 seconds")
    address = args.listen or e.listen_address
    try:
        httpd = server.serve(app, address, port, client_timeout=timeout)
    except OSError as err:
        raise common.Failure(f"cannot listen on {address}:{port}: "
                             f"{err.strerror or err}") from None
    interval = (e.notify_interval if args.notify_interval is None
                else args.notify_interval)
    publisher = None
    if interval > 0:
        from nova_rdt.exporter.notifier import Publisher
        publisher = Publisher(conf, live, host, interval)
        publisher.start()
    addr, bound = httpd.server_address[:2]
    # Before the line that says it is up: a supervisor that stops it as
    # soon as it reads that line gets a clean stop (exit 0), not death
    # by the default SIGTERM action.
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    print(f"nova-rdt exporter for {host} ({fs.root}) on "
          f"{'https' if web.config.tls else 'http'}://{addr}:{bound}/ "
          f"(metrics at /metrics; configuration read from "
          f"{common.read_text(files)})", flush=True)
    try:
        signal.pause()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        if publisher:
            publisher.stop()
        httpd.shutdown()
        httpd.server_close()
    return 0
