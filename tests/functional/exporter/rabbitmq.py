"""A private RabbitMQ broker for tests (Debian's ``rabbitmq-server``).

Runs the server script directly (not the /usr/sbin wrapper, which
switches to the rabbitmq user and the system-wide directories), on
loopback ports of its own with its own epmd, all state in ``workdir``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from tests.integration.prometheus import free_port

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"


def unavailable_reason() -> str | None:
    if not os.access(SERVER, os.X_OK):
        return "no rabbitmq-server (apt-get install rabbitmq-server)"
    return None


class RabbitMQ:
    def __init__(self, workdir: str):
        self.dir = workdir
        self.port = free_port()
        self.epmd_port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(workdir, "rabbitmq.log")
        self.env = {
            **os.environ, "HOME": workdir,
            "RABBITMQ_NODENAME": f"novardt{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_MNESIA_BASE": os.path.join(workdir, "mnesia"),
            "RABBITMQ_LOG_BASE": os.path.join(workdir, "log"),
            "RABBITMQ_LOGS": "-",
            "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(workdir,
                                                          "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": os.path.join(workdir, "rabbitmq"),
            "RABBITMQ_PID_FILE": os.path.join(workdir, "rabbitmq.pid"),
        }

    @property
    def url(self) -> str:
        return f"rabbit://guest:guest@127.0.0.1:{self.port}/"

    def start(self, timeout: float = 60.0) -> RabbitMQ:
        with open(os.path.join(self.dir, "enabled_plugins"), "w") as f:
            f.write("[].\n")
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [SERVER], env=self.env, cwd=self.dir, stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rabbitmq-server exited: {self.log()}")
            if "Server startup complete" in self.log():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"rabbitmq-server not up: {self.log()}")

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None:
            for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            self.proc = None
        # epmd daemonises out of our session; it has a port of its own.
        subprocess.run(["epmd", "-kill"], env=self.env, capture_output=True,
                       check=False)
