"""The API services under uWSGI, as devstack runs them.

devstack's ``write_local_uwsgi_http_config`` (lib/apache) writes one ini
per API and ``run_process`` starts ``uwsgi --procname-prefix <name> --ini
<file>``; the options below are the ones it sets, with the HTTP socket
served directly (no Apache in front).  The prefix is what ``ps`` shows
(``--procname-prefix-spaced`` here, for a space after it): ``nova-api
uWSGI master``, ``keystone uWSGI worker 1``...
"""

from __future__ import annotations

import os
import shutil
import sys

from nova_rdt.lab.allinone import ini
from nova_rdt.lab.allinone import ports
from nova_rdt.lab.procs import Process
from nova_rdt.lab.procs import Supervisor

UWSGI = "uwsgi"
PLUGIN_DIR = "/usr/lib/uwsgi/plugins"


def unavailable_reason() -> str | None:
    if not shutil.which(UWSGI) or not os.path.exists(
            os.path.join(PLUGIN_DIR, "python3_plugin.so")):
        return ("uWSGI is not installed (apt-get install uwsgi-core "
                "uwsgi-plugin-python3)")
    return None


def config(module: str, port: int, env: dict[str, str],
           pythonpath: list[str] = (), processes: int = 1) -> dict:
    """The [uwsgi] options of one API (devstack's, lib/apache)."""
    return {"uwsgi": {
        "module": module,
        "http-socket": f"{ports.HOST}:{port}",
        "processes": processes,
        "master": True,
        "die-on-term": True,
        "exit-on-reload": False,
        "worker-reload-mercy": 30,
        "enable-threads": True,
        "plugins-dir": PLUGIN_DIR,
        "plugins": "python3",
        "thunder-lock": True,
        "hook-master-start": "unix_signal:15 gracefully_kill_them_all",
        "buffer-size": 65535,
        "add-header": "Connection: close",
        "lazy-apps": True,
        "http-raw-body": True,
        "http-chunked-input": True,
        "http-auto-chunked": True,
        "http-keepalive": False,
        "socket-timeout": 30,
        "start-time": "%t",
        # devstack's --venv: this interpreter's environment.
        "virtualenv": sys.prefix,
        "pythonpath": list(pythonpath) or None,
        "env": [f"{k}={v}" for k, v in sorted(env.items())] or None,
    }}


class Api:
    """One API service: its ini, its uWSGI master, its URL."""

    def __init__(self, name: str, module: str, conf_dir: str,
                 sup: Supervisor, env: dict[str, str],
                 pythonpath: list[str] = ()):
        self.name = name
        self.module = module
        self.sup = sup
        self.port = ports.free_port()
        self.ini_path = os.path.join(conf_dir, f"{name}-uwsgi.ini")
        self.env = env
        self.pythonpath = list(pythonpath)
        self.proc: Process | None = None

    @property
    def url(self) -> str:
        return f"http://{ports.HOST}:{self.port}"

    def spawn(self, wrap=None, env: dict | None = None) -> Process:
        """devstack's run_process; ``wrap(argv)`` runs it elsewhere (the
        lab's namespace)."""
        ini.write(self.ini_path, config(self.module, self.port, self.env,
                                        self.pythonpath), mode=0o644)
        argv = [UWSGI, "--procname-prefix-spaced", self.name, "--ini",
                self.ini_path]
        self.proc = self.sup.spawn(self.name, wrap(argv) if wrap else argv,
                                   env=env)
        return self.proc
