"""RabbitMQ for Nova's RPC and notifications, in the lab's directory.

The server script is run directly (not Debian's /usr/sbin wrapper,
which switches to the rabbitmq user and the system-wide directories),
on loopback ports of its own, beside an epmd of its own that runs in the
foreground as our child (rabbitmq-server would otherwise start one that
daemonises out of reach).
"""

from __future__ import annotations

import os
import shutil

from nova_rdt.lab.allinone import ports
from nova_rdt.lab.procs import Process
from nova_rdt.lab.procs import Supervisor

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
READY = "Server startup complete"


def unavailable_reason() -> str | None:
    if not os.access(SERVER, os.X_OK) or not shutil.which("epmd"):
        return "RabbitMQ is not installed (apt-get install rabbitmq-server)"
    return None


class RabbitMQ:
    def __init__(self, root: str, sup: Supervisor):
        self.root = root
        self.sup = sup
        self.port = ports.free_port()
        self.epmd_port = ports.free_port()
        self.dist_port = ports.free_port()
        self.epmd: Process | None = None
        self.proc: Process | None = None

    @property
    def transport_url(self) -> str:
        # The guest account may log in from loopback only: so do we.
        return f"rabbit://guest:guest@{ports.HOST}:{self.port}/"

    def env(self) -> dict[str, str]:
        return {
            **os.environ, "HOME": self.root,
            "RABBITMQ_NODENAME": f"nova-rdt-lab-{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": ports.HOST,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": ports.HOST,
            "RABBITMQ_MNESIA_BASE": os.path.join(self.root, "mnesia"),
            "RABBITMQ_LOG_BASE": os.path.join(self.root, "log"),
            "RABBITMQ_LOGS": "-",
            "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(
                self.root, "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": os.path.join(self.root, "rabbitmq"),
            "RABBITMQ_PID_FILE": os.path.join(self.root, "rabbitmq.pid"),
        }

    def spawn(self) -> None:
        os.makedirs(self.root, exist_ok=True)
        with open(os.path.join(self.root, "enabled_plugins"), "w") as f:
            f.write("[].\n")
        env = self.env()
        self.epmd = self.sup.spawn(
            "epmd", ["epmd", "-port", str(self.epmd_port), "-address",
                     ports.HOST], env=env)
        self.sup.wait_for(self.epmd, lambda: ports.answers(self.epmd_port),
                          10, "listening")
        self.proc = self.sup.spawn("rabbitmq", [SERVER], env=env,
                                   cwd=self.root)

    def wait(self, timeout: float = 90.0) -> None:
        self.sup.wait_for(self.proc, lambda: READY in self.proc.log_tail(),
                          timeout, "its start-up")
