"""Find OVS-DPDK's PMD threads: which cores, which thread ids.

The PMD COS needs the cores and threads that really poll.  Three sources
agree only when OVS has settled, so each is read and they are joined:

* OVSDB ``other_config:pmd-cpu-mask``: what the operator asked for, read
  with ovsdbapp, as Neutron and os-vif read the Open_vSwitch table;
* ``ovs-appctl dpif-netdev/pmd-rxq-show``: the PMDs that exist (OVS
  creates none until a port of a netdev bridge has a queue);
* ``/proc/<ovs-vswitchd>/task/*``: the threads, named ``pmd-cNN/id:M``.

Threads a PMD starts inherit its name, so a thread only counts when its
affinity is exactly its core too.  Thread ids change whenever the mask
does: callers that place threads must re-run discovery then.

Parsing is pure; :class:`OvsClient` does the I/O.  ``ovs-appctl`` is
used only for what OVSDB does not hold: the PMD threads that exist now.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess

from nova_rdt import exception
from nova_rdt.resctrl.capabilities import parse_cpu_list

DEFAULT_DB = "unix:/var/run/openvswitch/db.sock"
DEFAULT_VSWITCHD_PIDFILE = "/var/run/openvswitch/ovs-vswitchd.pid"

_RXQ_PMD = re.compile(r"^pmd thread numa_id (\d+) core_id (\d+):", re.M)
_PMD_COMM = re.compile(r"^pmd-c(\d+)/id:(\d+)$")


class OvsError(exception.NovaRdtError, RuntimeError):
    pass


@dataclasses.dataclass(frozen=True, order=True)
class PmdThread:
    core: int
    tid: int
    name: str
    numa: int | None = None


def parse_cpu_mask(text: str) -> set[int]:
    """OVSDB's ``pmd-cpu-mask`` ("0x6", "6", or quoted) -> cores."""
    value = text.strip().strip('"').strip()
    if not value:
        return set()
    try:
        bits = int(value, 16)
    except ValueError:
        raise OvsError(f"pmd-cpu-mask {text.strip()!r} is not "
                       "hexadecimal") from None
    return {i for i in range(bits.bit_length()) if bits >> i & 1}


def cpu_mask_of(other_config: dict[str, str]) -> set[int]:
    """The cores of ``other_config:pmd-cpu-mask``; none when it is unset."""
    return parse_cpu_mask(other_config.get("pmd-cpu-mask", ""))


def parse_pmd_rxq_show(text: str) -> dict[int, int]:
    """``pmd-rxq-show`` output -> {core_id: numa_id} of existing PMDs."""
    return {int(core): int(numa) for numa, core in _RXQ_PMD.findall(text)}


def parse_pmd_comm(comm: str) -> int | None:
    """The core in a PMD thread name ``pmd-c01/id:8``, else None."""
    m = _PMD_COMM.match(comm.strip())
    return int(m.group(1)) if m else None


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _allowed_cpus(status: str) -> set[int] | None:
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return parse_cpu_list(line.split(":", 1)[1])
    return None


def pmd_threads_of(pid: int, cores: dict[int, int | None],
                   proc_root: str = "/proc") -> list[PmdThread]:
    """The threads of process ``pid`` that are PMDs on ``cores``."""
    task_dir = os.path.join(proc_root, str(pid), "task")
    try:
        tids = os.listdir(task_dir)
    except OSError as e:
        raise OvsError(f"cannot list the threads of ovs-vswitchd "
                       f"(pid {pid}): {e.strerror}") from e
    found = []
    for tid in tids:
        try:
            comm = _read(os.path.join(task_dir, tid, "comm")).strip()
            status = _read(os.path.join(task_dir, tid, "status"))
        except OSError:
            continue  # the thread ended while we looked
        core = parse_pmd_comm(comm)
        if core is None or core not in cores:
            continue
        if _allowed_cpus(status) != {core}:
            continue
        found.append(PmdThread(core, int(tid), comm, cores[core]))
    return sorted(found)


# Only the tables read here are monitored: the IDL then fetches and keeps
# just these rows.
_TABLES = ("Open_vSwitch", "Bridge")


class Ovsdb:
    """The Open_vSwitch database, through ovsdbapp's IDL.

    Each read opens a connection and closes it: callers are short-lived
    (the hook, ``pmd sync``, nova-compute's start), and a kept connection
    would be a thread in every one of them.
    """

    def __init__(self, db: str = DEFAULT_DB, timeout: float = 10.0):
        self.db = db
        self.timeout = timeout

    @contextlib.contextmanager
    def api(self):
        from ovsdbapp.backend.ovs_idl import connection
        from ovsdbapp.schema.open_vswitch import impl_idl

        try:
            idl = connection.OvsdbIdl.from_server(
                self.db, "Open_vSwitch", helper_tables=_TABLES)
            conn = connection.Connection(idl=idl, timeout=self.timeout)
            # ovsdbapp keeps one connection per backend class, for the
            # whole process: a class of our own per read keeps each
            # read on its own server and connection.
            backend = type("NovaRdtOvsdb", (impl_idl.OvsdbIdl,),
                           {"_ovsdb_connection": None})
            api = backend(conn)
        except Exception as e:   # ovsdbapp raises bare Exception too
            raise OvsError(f"OVSDB at {self.db}: {e}") from e
        try:
            yield api
        except OvsError:
            raise
        except Exception as e:
            raise OvsError(f"OVSDB at {self.db}: {e}") from e
        finally:
            conn.stop(timeout=self.timeout)

    def other_config(self) -> dict[str, str]:
        with self.api() as api:
            return dict(api.db_get("Open_vSwitch", ".", "other_config")
                        .execute(check_error=True))

    def bridges(self) -> dict[str, str]:
        """Bridge name -> datapath_type ("" is the kernel datapath)."""
        with self.api() as api:
            return {row.name: row.datapath_type for row in
                    api.tables["Bridge"].rows.values()}


class OvsClient:
    """OVS's configuration from OVSDB, its runtime state from ovs-appctl."""

    def __init__(self, db: str = DEFAULT_DB,
                 vswitchd_pidfile: str = DEFAULT_VSWITCHD_PIDFILE,
                 appctl_target: str | None = None, timeout: float = 10.0):
        self.db = db
        self.ovsdb = Ovsdb(db, timeout)
        self.pidfile = vswitchd_pidfile
        # By name, ovs-appctl finds the daemon's socket in OVS's rundir.
        self.target = appctl_target or "ovs-vswitchd"
        self.timeout = timeout

    def _run(self, argv: list[str]) -> str:
        try:
            res = subprocess.run(argv, capture_output=True, text=True,
                                 timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise OvsError(f"{argv[0]}: {e}") from e
        if res.returncode != 0:
            raise OvsError(f"{' '.join(argv)}: "
                           f"{(res.stderr or res.stdout).strip()}")
        return res.stdout

    def appctl(self, *args: str) -> str:
        return self._run(["ovs-appctl", "-t", self.target, *args])

    def vswitchd_pid_or_none(self) -> int | None:
        try:
            return int(_read(self.pidfile).strip())
        except (OSError, ValueError):
            return None

    def vswitchd_pid(self) -> int:
        pid = self.vswitchd_pid_or_none()
        if pid is None:
            raise OvsError(f"ovs-vswitchd is not running (no pid in "
                           f"{self.pidfile})")
        return pid

    def other_config(self) -> dict[str, str]:
        return self.ovsdb.other_config()

    def bridges(self) -> dict[str, str]:
        return self.ovsdb.bridges()

    def pmd_cpu_mask(self) -> set[int]:
        return cpu_mask_of(self.other_config())

    def pmd_cores(self) -> dict[int, int]:
        return parse_pmd_rxq_show(self.appctl("dpif-netdev/pmd-rxq-show"))

    def pmd_threads(self, proc_root: str = "/proc") -> list[PmdThread]:
        """The PMD threads polling now, restricted to the configured mask.

        With no mask set OVS picks cores itself; then every PMD it made
        counts.
        """
        mask = self.pmd_cpu_mask()
        cores = self.pmd_cores()
        if mask:
            cores = {c: n for c, n in cores.items() if c in mask}
        return pmd_threads_of(self.vswitchd_pid(), cores, proc_root)
