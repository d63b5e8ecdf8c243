"""nova-rdt's devstack plugin, run as devstack runs it, on the lab's
nova.conf, api-paste.ini, rootwrap.d, hooks directory and tempest.conf.

``source devstack/plugin.sh stack <phase>`` for post-config, extra and
test-config, in a bash with devstack's ini functions (devstack's own
``inc/ini-config`` where ``$NOVA_RDT_DEVSTACK_DIR`` names a devstack
checkout, else the checkout's stand-ins in ``tests/devstack/functions.sh``,
which behave as it does) and the real ``sudo``.  devstack's
``run_process`` and ``restart_service`` are recorded, not run: the lab
runs what they name (the exporter and controller command lines, the
libvirtd restart) itself, in its namespace.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess

import nova_rdt
from nova_rdt import exception

ENV_SOURCE = "NOVA_RDT_SOURCE_DIR"
ENV_DEVSTACK = "NOVA_RDT_DEVSTACK_DIR"


class PluginError(exception.NovaRdtError, RuntimeError):
    pass


def source_dir() -> str | None:
    """The nova-rdt checkout that holds devstack/ (the plugin is not part
    of the installed package): ``$NOVA_RDT_SOURCE_DIR``, the tree this
    module was imported from, or the working directory."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(
        nova_rdt.__file__)))
    for d in (os.environ.get(ENV_SOURCE), here, os.getcwd()):
        if d and os.path.isfile(os.path.join(d, "devstack", "plugin.sh")):
            return os.path.abspath(d)
    return None


def unavailable_reason() -> str | None:
    if source_dir() is None:
        return ("the devstack plugin (devstack/plugin.sh) is not here: run "
                "from a nova-rdt checkout, or set $NOVA_RDT_SOURCE_DIR")
    ini = ini_functions()
    if not os.path.isfile(ini):
        return f"devstack's ini functions not found at {ini}"
    return None


def ini_functions() -> str:
    top = os.environ.get(ENV_DEVSTACK)
    if top:
        return os.path.join(top, "inc", "ini-config")
    return os.path.join(source_dir() or "", "tests", "devstack",
                        "functions.sh")


@dataclasses.dataclass
class Recorded:
    """What a phase asked devstack to do that the lab does itself."""

    #: service name -> command line (``run_process``).
    processes: dict[str, str] = dataclasses.field(default_factory=dict)
    restarted: list[str] = dataclasses.field(default_factory=list)
    output: str = ""


class Plugin:
    def __init__(self, env: dict[str, str], log_path: str, wrap=None):
        """``env``: devstack's variables (NOVA_CONF, ENABLED_SERVICES,
        NOVA_RDT_*...); ``wrap(argv)`` runs bash elsewhere (the lab's
        namespace)."""
        self.env = env
        self.log_path = log_path
        self.calls_path = log_path + ".calls"
        self.wrap = wrap or (lambda argv: argv)

    def _script(self, phase: str) -> str:
        src = source_dir()
        stand_ins = os.path.join(src, "tests", "devstack", "functions.sh")
        lines = ["set -o errexit -o pipefail",
                 # Service stand-ins (run_process, restart_service,
                 # is_service_enabled...) and, unless devstack's own
                 # replace them below, the ini functions.
                 f"source {shlex.quote(stand_ins)}"]
        if os.environ.get(ENV_DEVSTACK):
            lines.append(f"source {shlex.quote(ini_functions())}")
        lines += [f"source {shlex.quote(src)}/devstack/settings",
                  f"source {shlex.quote(src)}/devstack/plugin.sh stack "
                  f"{phase}"]
        return "\n".join(lines) + "\n"

    def run(self, phase: str, extra: str = "") -> Recorded:
        """One ``stack <phase>``; ``extra``: bash run after it in the same
        shell (devstack steps of its own, e.g. nova-cpu.conf)."""
        src = source_dir()
        open(self.calls_path, "w").close()
        env = {**os.environ, **self.env, "NOVA_RDT_DIR": src,
               "FAKE_LOG": self.calls_path}
        res = subprocess.run(
            self.wrap(["bash", "-c", self._script(phase) + extra]),
            cwd=src, env=env, capture_output=True, text=True, timeout=300)
        with open(self.log_path, "a") as f:
            f.write(f"== stack {phase}\n{res.stdout}{res.stderr}")
        if res.returncode != 0:
            raise PluginError(
                f"devstack/plugin.sh stack {phase} failed "
                f"({res.returncode}): {(res.stderr or res.stdout)[-2000:]}")
        return self._recorded(res.stdout + res.stderr)

    def _recorded(self, output: str) -> Recorded:
        rec = Recorded(output=output)
        with open(self.calls_path) as f:
            for line in f:
                word, _, rest = line.rstrip("\n").partition(" ")
                if word == "run_process":
                    name, _, cmd = rest.partition(" ")
                    rec.processes[name] = cmd
                elif word == "restart_service":
                    rec.restarted.append(rest)
        return rec
