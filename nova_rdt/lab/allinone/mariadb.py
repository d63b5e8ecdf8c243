"""MariaDB as devstack configures it, in the lab's directory.

devstack installs Debian's ``mariadb-server`` and sets, in my.cnf,
``sql_mode = TRADITIONAL``, ``default-storage-engine = InnoDB``,
``max_connections = 1024`` and a root password that every service's
``[database] connection`` uses over TCP (``MYSQL_REDUCE_MEMORY`` adds the
small buffers below; its CI jobs run with them).  Here the server is our
child, with its data directory, socket and port in the lab: the host's
own MariaDB, if any, is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from nova_rdt.lab.allinone import ini
from nova_rdt.lab.allinone import ports
from nova_rdt.lab.procs import LabError
from nova_rdt.lab.procs import Process
from nova_rdt.lab.procs import Supervisor

SERVER = "/usr/sbin/mariadbd"
INSTALL_DB = "mariadb-install-db"
CLIENT = "mariadb"
#: devstack's DATABASE_USER; the password is the lab's own.
USER = "root"


def unavailable_reason() -> str | None:
    if not os.access(SERVER, os.X_OK) or not shutil.which(INSTALL_DB):
        return "MariaDB is not installed (apt-get install mariadb-server)"
    return None


class MariaDB:
    def __init__(self, root: str, sup: Supervisor, password: str):
        self.root = root
        self.sup = sup
        self.password = password
        self.datadir = os.path.join(root, "data")
        self.socket = os.path.join(root, "mysqld.sock")
        self.conf = os.path.join(root, "my.cnf")
        self.port = ports.free_port()
        self.proc: Process | None = None

    def _write_conf(self) -> None:
        ini.write(self.conf, {"mysqld": {
            "datadir": self.datadir, "socket": self.socket,
            "port": self.port, "bind-address": ports.HOST,
            "pid-file": os.path.join(self.root, "mysqld.pid"),
            "user": "root", "skip-log-bin": "",
            "sql_mode": "TRADITIONAL",
            "default-storage-engine": "InnoDB",
            "max_connections": 1024,
            # MYSQL_REDUCE_MEMORY
            "read_buffer_size": "64K", "innodb_buffer_pool_size": "16M",
            "thread_stack": "192K", "thread_cache_size": 8,
            "tmp_table_size": "8M", "sort_buffer_size": "8M",
            "max_allowed_packet": "8M",
        }}, mode=0o644)
        # mariadbd takes "skip-log-bin" without a value.
        with open(self.conf) as f:
            text = f.read().replace("skip-log-bin = \n", "skip-log-bin\n")
        with open(self.conf, "w") as f:
            f.write(text)

    def start(self, timeout: float = 60.0) -> None:
        os.makedirs(self.root, exist_ok=True)
        self._write_conf()
        res = subprocess.run(
            [INSTALL_DB, f"--defaults-file={self.conf}",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise LabError(f"{INSTALL_DB} failed: {res.stdout[-2000:]}"
                           f"{res.stderr[-2000:]}")
        self.proc = self.sup.spawn(
            "mariadb", [SERVER, f"--defaults-file={self.conf}",
                        f"--log-error={self.sup.log_dir}/mariadb.log"])
        self.sup.wait_for(self.proc, lambda: self._client(
            "SELECT 1", password=None, check=False).returncode == 0,
            timeout, "answering on its socket")
        # devstack: mysqladmin -u root password $DATABASE_PASSWORD
        self._client(f"ALTER USER '{USER}'@'localhost' IDENTIFIED BY "
                     f"'{self.password}'", password=None)
        self._client(f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED "
                     f"BY '{self.password}'; GRANT ALL PRIVILEGES ON *.* "
                     f"TO '{USER}'@'%'")

    def _client(self, sql: str, password: str | None = "",
                check: bool = True) -> subprocess.CompletedProcess:
        pw = self.password if password == "" else password
        argv = [CLIENT, "--no-defaults", f"--socket={self.socket}",
                f"--user={USER}", *([f"--password={pw}"] if pw else []),
                "-e", sql]
        res = subprocess.run(argv, capture_output=True, text=True,
                             timeout=60)
        if check and res.returncode != 0:
            raise LabError(f"mariadb -e {sql!r}: {res.stderr.strip()}")
        return res

    def create_database(self, name: str) -> str:
        """devstack's recreate_database: the URL services put in their
        ``[database] connection``."""
        self._client(f"DROP DATABASE IF EXISTS {name}; CREATE DATABASE "
                     f"{name} CHARACTER SET utf8")
        return self.url(name)

    def url(self, name: str) -> str:
        return (f"mysql+pymysql://{USER}:{self.password}@{ports.HOST}:"
                f"{self.port}/{name}?charset=utf8")
