"""The all-in-one cloud: every service started in order, and stopped.

What runs where:

* on the host, in the lab's directory: MariaDB, RabbitMQ (with its own
  epmd), Keystone, Glance, Placement, Neutron's API (each API under
  uWSGI) and RPC server, Prometheus;
* in the Host lab's mount namespace (:class:`CloudLab`), where
  ``/etc/nova``, ``/etc/nova-rdt``, ``/var/lib/nova-rdt``,
  ``/etc/libvirt``, ``/run/libvirt`` and ``/sys/fs/resctrl`` are the
  lab's: the devstack plugin's phases, Nova's API (uWSGI), conductor,
  scheduler and compute, neutron-openvswitch-agent, the nova-rdt
  exporter and controller, beside the lab's libvirtd and OVS-DPDK (whose
  run directory is also ``/run/openvswitch`` there, where libvirt reads
  vhost-user interface counters with ``ovs-vsctl``).

The dataplane (:mod:`.dataplane`): two flat provider networks bridged to
the software generator's veths, ports bound as vhost-user by Neutron and
plugged by Nova through os-vif.

Start-up runs what does not depend on each other side by side (the
databases' migrations, the Host lab); every step is timed
(:attr:`AllInOne.timings`).  :meth:`AllInOne.stop` stops every process
in the reverse order, then the Host lab, and says what outlived it.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from nova_rdt.emulator import profiles as profiles_mod
from nova_rdt.lab import libvirtd as libvirtd_mod
from nova_rdt.lab.allinone import dataplane as dataplane_mod
from nova_rdt.lab.allinone import devstack_plugin
from nova_rdt.lab.allinone import glance as glance_mod
from nova_rdt.lab.allinone import keystone as keystone_mod
from nova_rdt.lab.allinone import mariadb as mariadb_mod
from nova_rdt.lab.allinone import neutron as neutron_mod
from nova_rdt.lab.allinone import nova as nova_mod
from nova_rdt.lab.allinone import placement as placement_mod
from nova_rdt.lab.allinone import ports
from nova_rdt.lab.allinone import rabbitmq as rabbitmq_mod
from nova_rdt.lab.allinone import subnode as subnode_mod
from nova_rdt.lab.allinone import uwsgi
from nova_rdt.lab.host import Lab
from nova_rdt.lab.procs import LabError
from nova_rdt.lab.procs import Process

#: The emulated host (MBA, so rdt:mb has something to do).
DEFAULT_PROFILE = "gold-6252"
#: The devstack plugin's defaults, as a devstack run would leave them.
RESERVED_HOST_WAYS = 2
CLASSES = "low_priority:l3_ways=1,mb=10"
IMAGE = "nova-rdt-guest"
#: The guest's root disk: a blank disk Nova needs an image for, beside
#: the kernel and initramfs that boot.
ROOT_DISK_MIB = 1
#: Memory the noisy neighbour's memtester works on (MiB).
NOISY_MIB = 96
#: Guest memory Nova may hand out (MiB), file-backed ([libvirt]
#: file_backed_memory; Nova then requires ram_allocation_ratio 1.0).
FILE_BACKED_MEMORY_MB = 8192
START_TIMEOUT = 180.0
COMPUTE_TIMEOUT = 180.0
#: Where the plugin's settings live in the namespace (its defaults).
HOOK_SETTINGS = "/etc/nova-rdt/hook.json"
STATE_PATH = "/var/lib/nova-rdt"
HOOKS_DIR = "/etc/libvirt/hooks"


def unavailable_reason() -> str | None:
    """Why the cloud cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "the cloud needs root (mount namespaces, libvirtd, OVS)"
    from nova_rdt.emulator import mount as emulator_mount
    from nova_rdt.lab import ovsdpdk
    reasons = [emulator_mount.fuse_unavailable_reason(),
               libvirtd_mod.libvirt_unavailable_reason(),
               ovsdpdk.ovs_dpdk_unavailable_reason(),
               mariadb_mod.unavailable_reason(),
               rabbitmq_mod.unavailable_reason(),
               uwsgi.unavailable_reason(),
               devstack_plugin.unavailable_reason()]
    if not shutil.which("sudo") or not os.path.isfile("/etc/sudoers"):
        reasons.append("sudo is not installed (apt-get install sudo): "
                       "nova-compute starts privsep through sudo "
                       "nova-rootwrap")
    if not shutil.which("prometheus"):
        reasons.append("prometheus is not installed (apt-get install "
                       "prometheus)")
    for tool in ("keystone-manage", "glance-manage", "placement-manage",
                 "neutron-db-manage", "nova-manage", "openstack"):
        if not os.path.exists(os.path.join(os.path.dirname(sys.executable),
                                           tool)):
            reasons.append(f"{tool} is not in {sys.prefix} (pip install "
                           f"'nova-rdt[lab]')")
            break
    reasons = [r for r in reasons if r]
    return "; ".join(reasons) if reasons else None


def _killpg(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


class CloudLab(Lab):
    """The Host lab, with Nova's and nova-rdt's system paths as lab
    directories in its namespace, and a sudoers whose secure_path has
    this environment's commands first (devstack links them into
    /usr/local/bin instead)."""

    def __init__(self, *args, extra_binds: list[tuple[str, str]] = (),
                 hostname: str | None = None, **kw):
        """``hostname``: the namespace's own (a second compute's)."""
        super().__init__(*args, **kw)
        self.extra_binds = list(extra_binds)
        self.hostname = hostname

    def start_namespace(self) -> None:
        binds = list(self.extra_binds)
        binds += self.libvirt.binds() + (self.ovs.binds() if self.ovs
                                         else [])
        binds.append((self._sudoers(), "/etc/sudoers"))
        self._timed("namespace", self.ns.start, binds,
                    resctrl_source=self.resctrl_root if self.emulated
                    else None,
                    topology_profile=self.profile.name if self.emulated
                    else None, hostname=self.hostname)

    def _sudoers(self) -> str:
        with open("/etc/sudoers") as f:
            lines = f.read().splitlines()
        bindir = os.path.dirname(sys.executable)
        out = []
        for line in lines:
            if "secure_path=" in line and line.lstrip().startswith(
                    "Defaults"):
                key, _, value = line.partition("secure_path=")
                value = value.strip().strip('"')
                line = f'{key}secure_path="{bindir}:{value}"'
            out.append(line)
        path = os.path.join(self.base, "sudoers")
        with open(path, "w") as f:
            f.write("\n".join(out) + "\n")
        os.chmod(path, 0o440)
        return path


@dataclasses.dataclass
class Machine:
    """What this machine makes the cloud do differently, and why."""

    virt_type: str
    reason: str
    #: What this machine forces, "what: why", one each (nova.conf
    #: options, the guest image).
    forced: list[str] = dataclasses.field(default_factory=list)


#: tcg: run the cloud's guests under TCG although /dev/kvm answers (they
#: then boot a Linux kernel where this machine's KVM cannot, and rdt:
#: servers fail: libvirt refuses their <cachetune>).
ENV_ACCEL = "NOVA_RDT_CLOUD_ACCEL"

#: Why TCG cannot take Nova's RDT elements, from libvirt's source.
TCG_REFUSES = (
    "libvirt refuses <cachetune> and <memorytune> for any domain whose "
    "type is not kvm: qemuValidateDomainDef (src/qemu/qemu_validate.c) "
    "fails a definition with resctrl elements and virtType != KVM with "
    "VIR_ERR_CONFIG_UNSUPPORTED 'cachetune is only supported for KVM "
    "domains', so Nova's defineXML fails and rdt: servers go to ERROR")


def machine() -> Machine:
    """KVM where /dev/kvm answers (libvirt takes <cachetune> for KVM
    domains only), else TCG."""
    why = libvirtd_mod.kvm_unavailable_reason()
    if not why and os.environ.get(ENV_ACCEL) == "tcg":
        why = f"${ENV_ACCEL}=tcg"
    if why:
        return Machine("qemu", f"{why}: TCG; {TCG_REFUSES}",
                       forced=[f"libvirt.virt_type = qemu (TCG): {why}"])
    return Machine(
        "kvm", "/dev/kvm answers: KVM, so libvirt applies Nova's "
               "<cachetune> itself",
        forced=["libvirt.cpu_mode = none (no <cpu> element: QEMU's default "
                "model): this machine's KVM (PVM) aborts QEMU's host CPU "
                "models (MSR 0x10a), and libvirt finds no named model "
                "compatible with its CPU, so Nova's default (host-model) "
                "and cpu_mode = custom both fail"])


@dataclasses.dataclass(frozen=True)
class GuestChoice:
    """How the cloud's Linux guest (the image :data:`IMAGE`) runs here."""

    reason: str
    #: The line the guest prints on its console once it runs.
    ready_line: str
    #: kvm domains run QEMU's TCG (:mod:`nova_rdt.lab.tcg_qemu`): this
    #: machine's KVM cannot boot a Linux kernel.
    tcg_for_kvm: bool = False

    #: The image is the lab's Linux guest, always (for serve.json).
    kind = "linux"


def choose_guest(mach: Machine) -> GuestChoice:
    """The lab's Linux guest runs under KVM where its kernel boots; where
    /dev/kvm answers but hangs a Linux kernel (this machine kind's PVM),
    kvm domains run QEMU's TCG instead, so that libvirt still takes
    Nova's ``<cachetune>``; with no KVM at all, TCG domains (and libvirt
    refuses RDT elements there).  Raises LabError without the image."""
    from nova_rdt.lab.guest import boot as guest_boot
    from nova_rdt.lab.guest import image as guest_image
    try:
        img = guest_image.load()
    except guest_image.ImageError as e:
        raise LabError(f"the cloud's guest image: {e}") from None
    ready = guest_boot.READY["auto"]
    if mach.virt_type == "qemu":
        return GuestChoice("TCG boots the lab's Linux guest", ready)
    decision = guest_boot.detect_accel(img)
    if decision.accel == "kvm":
        return GuestChoice(f"the lab's Linux guest boots under this KVM "
                           f"({decision.reason})", ready)
    why = decision.reason.split(": using TCG")[0]
    return GuestChoice(
        f"a Linux kernel does not boot under this KVM ({why}): kvm "
        f"domains run QEMU's TCG, so libvirt still takes Nova's "
        f"<cachetune> and makes the groups", ready, tcg_for_kvm=True)


def compute_dirs(base: str) -> tuple[str, str, str, list]:
    """A compute's lab directories under ``base`` (etc, data, Nova's etc)
    and the binds that show them at Nova's and nova-rdt's system paths in
    its namespace."""
    etc = os.path.join(base, "etc")
    data = os.path.join(base, "data")
    nova_etc = os.path.join(etc, "nova")
    return etc, data, nova_etc, [
        (nova_etc, nova_mod.CONF_DIR),
        (os.path.join(etc, "nova-rdt"), os.path.dirname(HOOK_SETTINGS)),
        (os.path.join(data, "nova-rdt"), STATE_PATH)]


def _http_up(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).close()
        return True
    except urllib.error.HTTPError as e:
        return e.code < 500
    except OSError:
        return False


class AllInOne:
    """The cloud; :meth:`start`, then :meth:`stop` (always)."""

    def __init__(self, out_dir: str, profile: str | None = None,
                 kernel: str | None = None,
                 libvirt_cache_dir: str | None = None, say=None,
                 computes: int = 1):
        if computes not in (1, 2):
            raise LabError(f"--computes must be 1 or 2, not {computes}")
        self.out_dir = out_dir
        self.libvirt_cache_dir = libvirt_cache_dir
        self.say = say or (lambda msg: None)
        self.password = secrets.token_hex(12)
        self.profile = profiles_mod.get(profile or DEFAULT_PROFILE)
        self.machine = machine()
        self.timings: dict[str, float] = {}
        self.procs: list[Process] = []
        self.swept: list[str] = []
        self.stop_timings: dict[str, float] = {}
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._stopping = False
        self.lab = CloudLab(
            profile=self.profile.name, resctrl="emulated", kernel=kernel,
            hook=None, pmd_cpu_mask=0x2,
            failure_log_dir=os.path.join(out_dir, "failure-logs"),
            libvirt_cache_dir=libvirt_cache_dir, log=self.say)
        self.etc, self.data, self.nova_etc, binds = compute_dirs(
            self.lab.base)
        self.lab.extra_binds = binds + [
            # libvirt reads a vhost-user interface's counters (Nova's
            # server diagnostics) with ovs-vsctl at its default database.
            (self.lab.ovs.run_dir, "/run/openvswitch")]
        for _src, _dst in self.lab.extra_binds:
            os.makedirs(_src, exist_ok=True)
        sup = self.lab.sup
        self.sup = sup
        pythonpath = [os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))))]
        self.pythonpath = pythonpath
        self.db = mariadb_mod.MariaDB(os.path.join(self.data, "mariadb"),
                                      sup, self.password)
        self.rabbit = rabbitmq_mod.RabbitMQ(
            os.path.join(self.data, "rabbitmq"), sup)
        self.keystone = keystone_mod.Keystone(
            os.path.join(self.etc, "keystone"),
            os.path.join(self.data, "keystone"), sup,
            self.db.url("keystone"), self.password, pythonpath)
        self.glance = glance_mod.Glance(
            os.path.join(self.etc, "glance"),
            os.path.join(self.data, "glance"), sup, self.db.url("glance"),
            self.keystone, pythonpath)
        self.placement = placement_mod.Placement(
            os.path.join(self.etc, "placement"), sup,
            self.db.url("placement"), self.keystone, pythonpath)
        self.neutron = neutron_mod.Neutron(
            os.path.join(self.etc, "neutron"),
            os.path.join(self.data, "neutron"), sup,
            self.db.url("neutron"), self.keystone,
            self.rabbit.transport_url, pythonpath)
        self.nova = nova_mod.Nova(
            self.nova_etc, os.path.join(self.data, "nova"), sup, self.db,
            self.keystone, self.rabbit.transport_url, pythonpath)
        self.agent = dataplane_mod.Agent(
            os.path.join(self.etc, "neutron"),
            os.path.join(self.data, "neutron-agent"),
            self.rabbit.transport_url, self.lab.ovs, ports.free_port())
        self.dataplane = dataplane_mod.Dataplane(self.lab)
        #: physnet -> the dataplane network's id.
        self.networks: dict[str, str] = {}
        #: The agent as Neutron lists it (id, host, configurations).
        self.agent_record: dict | None = None
        #: The Tempest scenario's short form (--short).
        self.tempest_short = False
        self.exporter_port = ports.free_port()
        self.controller_port = ports.free_port()
        self.prometheus_port = ports.free_port()
        self.plugin: devstack_plugin.Plugin | None = None
        self.plugin_processes: dict[str, str] = {}
        self.services: dict[str, dict] = {}
        self.images: dict[str, str] = {}
        self.tempest_workspace: str | None = None
        self.hypervisor: str | None = None
        self.guest: GuestChoice | None = None
        #: The second compute (:mod:`.subnode`), or None.
        self.subnode = (subnode_mod.Subnode(self) if computes == 2
                        else None)
        #: Each compute's host name -> its exporter's URL.
        self.exporters: dict[str, str] = {}
        #: The shared instances path's FUSE server (two computes).
        self.shared_fs: Process | None = None

    # -- helpers ----------------------------------------------------------

    @property
    def base(self) -> str:
        return self.lab.base

    def _timed(self, step: str, fn, *args, **kw):
        t0 = time.monotonic()
        try:
            return fn(*args, **kw)
        finally:
            self.timings[step] = round(time.monotonic() - t0, 1)

    def env(self) -> dict[str, str]:
        """The services' environment: this interpreter's commands first,
        and the nova-rdt this process imports."""
        bindir = os.path.dirname(sys.executable)
        return {**os.environ,
                "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                "PYTHONPATH": os.pathsep.join(
                    self.pythonpath + ([os.environ["PYTHONPATH"]]
                                       if os.environ.get("PYTHONPATH")
                                       else []))}

    def _run(self, argv: list[str], what: str, ns: bool = False,
             timeout: float = 600.0) -> str:
        """A set-up command, in its own session: an interrupted start-up
        kills it (:meth:`_kill_running`) instead of waiting for it."""
        if self._stopping:
            raise LabError(f"{what}: not started, the cloud is stopping")
        log = os.path.join(self.lab.log_dir, "manage.log")
        os.makedirs(self.lab.log_dir, exist_ok=True)
        cmd = self.lab.ns.command(argv) if ns else argv
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=self.env(), start_new_session=True)
        with self._lock:
            self._running.add(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _killpg(proc)
            out, err = proc.communicate()
            raise LabError(f"{what}: {' '.join(argv[:4])}... did not end "
                           f"within {timeout:.0f}s") from None
        finally:
            with self._lock:
                self._running.discard(proc)
        with open(log, "a") as f:
            f.write(f"$ {' '.join(argv)}  # {time.monotonic() - t0:.1f}s,"
                    f" status {proc.returncode}\n{out}{err}\n")
        if proc.returncode != 0:
            raise LabError(f"{what}: {' '.join(argv[:4])}... failed "
                           f"({proc.returncode}): {(err or out)[-1500:]}")
        return out

    def _kill_running(self) -> None:
        self._stopping = True
        with self._lock:
            running = list(self._running)
        for proc in running:
            _killpg(proc)

    def _chain(self, name: str, steps: list[list[str]]) -> None:
        def go():
            for argv in steps:
                self._run(argv, name)
        self._timed(name, go)

    def _spawn(self, name: str, argv: list[str], ns=False,
               env: dict | None = None) -> Process:
        """``ns``: True for the first compute's namespace, or a lab (the
        second compute's) to run in its namespace."""
        if ns is True:
            argv = self.lab.ns.command(argv)
        elif ns:
            argv = ns.ns.command(argv)
        proc = self.sup.spawn(name, argv, env=env or self.env())
        self.procs.append(proc)
        return proc

    def _record(self, name: str, proc: Process, url: str | None = None,
                **more) -> None:
        self.services[name] = {"pid": proc.pid, "url": url,
                               "log": proc.log_path, **more}

    # -- start ------------------------------------------------------------

    def start(self) -> None:
        """Everything, in order; a failure stops nothing (the caller's
        :meth:`stop` does) and names the step."""
        t0 = time.monotonic()
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
        try:
            self._start(pool)
        except BaseException:
            # Ctrl-C or a failed step: what runs beside it is killed, so
            # that the pool's threads end now, not when their databases
            # are migrated.
            self._kill_running()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self.timings["start"] = round(time.monotonic() - t0, 1)

    def _start(self, pool) -> None:
        say = self.say
        # Before anything runs: a configuration the agent cannot work
        # with is refused here, naming the option.
        self.agent.check()
        sub = self.subnode
        if sub:
            # Before either namespace exists: a namespace copies the
            # mounts there are when it is made (private propagation), and
            # one made first would see the plain directory.  Nova's shared
            # storage check then fails and every live migration becomes a
            # block migration (seen under load).
            self._timed("shared instances path", self._mount_shared)
        host = pool.submit(self._timed, "host lab (emulator, namespace, "
                           "OVS-DPDK)", self._start_host)
        host2 = (pool.submit(self._timed, "second compute's host lab",
                             sub.start_host) if sub else None)
        # The KVM probe boots a kernel for seconds: beside the rest.
        guest = pool.submit(self._timed, "guest image choice (KVM probe)",
                            choose_guest, self.machine)
        self.rabbit.spawn()
        self.procs += [self.rabbit.epmd, self.rabbit.proc]
        self._record("epmd", self.rabbit.epmd,
                     f"epmd://127.0.0.1:{self.rabbit.epmd_port}")
        self._timed("mariadb", self.db.start)
        self.procs.append(self.db.proc)
        self._record("mariadb", self.db.proc,
                     f"mysql://127.0.0.1:{self.db.port}")
        for name in ("keystone", "glance", "placement", "neutron",
                     "nova_api", "nova_cell0", "nova_cell1"):
            self.db.create_database(name)
        for svc in (self.keystone, self.glance, self.placement,
                    self.neutron):
            svc.configure()
        chains = [pool.submit(self._chain, "keystone-manage",
                              self.keystone.manage_steps()),
                  pool.submit(self._chain, "glance-manage",
                              self.glance.manage_steps()),
                  pool.submit(self._chain, "placement-manage",
                              self.placement.manage_steps()),
                  pool.submit(self._chain, "neutron-db-manage",
                              self.neutron.manage_steps())]
        host.result()
        say(f"host: emulated {self.profile.name} resctrl, libvirt "
            f"namespace, OVS-DPDK (pmd-cpu-mask "
            f"{self.lab.ovs.pmd_cpu_mask:#x}) in "
            f"{self.timings.get('host lab (emulator, namespace, OVS-DPDK)')}"
            f" s")
        self._timed("dataplane bridges and generator ports",
                    self._start_dataplane)
        if host2:
            host2.result()
            self._check_shared()
        # nova.conf names the lab's OVS: written once the host is up.
        self._configure_nova()
        chains += [*(pool.submit(self._chain, f"nova-manage {i}", chain)
                     for i, chain in enumerate(self.nova.manage_chains(),
                                               1))]
        libvirt2 = (pool.submit(self._timed, "second compute's libvirtd",
                                self._start_libvirt2, guest) if sub
                    else None)
        chains.append(pool.submit(self._timed, "libvirtd (hook from the "
                                  "plugin)", self._start_libvirt, guest))
        self._timed("rabbitmq", self.rabbit.wait)
        self._record("rabbitmq", self.rabbit.proc, self.rabbit.transport_url
                     .replace("guest:guest@", ""))
        chains[0].result()
        self.keystone.api.spawn(env=self.env())
        self.procs.append(self.keystone.api.proc)
        self._wait_api("keystone", self.keystone.api,
                       self.keystone.url + "/v3")
        self._timed("keystone accounts and catalog", self.keystone.populate,
                    {"compute": ("nova", self.nova.url),
                     "image": ("glance", self.glance.url),
                     "placement": ("placement", self.placement.url),
                     "network": ("neutron", self.neutron.url)})
        for fut in chains[1:]:
            fut.result()
        say("databases: " + ", ".join(
            f"{k} {v} s" for k, v in self.timings.items()
            if "manage" in k))
        for svc in (self.glance, self.placement, self.neutron):
            svc.api.spawn(env=self.env())
            self.procs.append(svc.api.proc)
        self._start_neutron_agents()
        self.nova.api.spawn(wrap=self.lab.ns.command, env=self.env())
        self.procs.append(self.nova.api.proc)
        conductor = self._spawn(
            "nova-conductor", ["nova-conductor", "--config-file",
                               nova_mod.NOVA_CONF], ns=True)
        scheduler = self._spawn(
            "nova-scheduler", ["nova-scheduler", "--config-file",
                               nova_mod.NOVA_CONF], ns=True)
        self._record("nova-conductor", conductor)
        self._record("nova-scheduler", scheduler)
        for name, svc, path in (("glance-api", self.glance, "/"),
                                ("placement-api", self.placement, "/"),
                                ("neutron-api", self.neutron, "/"),
                                ("nova-api", self.nova, "/")):
            self._wait_api(name, svc.api, svc.api.url + path)
        libvirt_ready = chains[-1]
        libvirt_ready.result()
        compute = self._spawn(
            "nova-compute", ["nova-compute", "--config-file",
                             nova_mod.NOVA_CPU_CONF], ns=True)
        self._record("nova-compute", compute)
        computes = {socket.gethostname(): compute}
        if sub:
            libvirt2.result()
            compute2 = self._spawn(
                "nova-compute-2", ["nova-compute", "--config-file",
                                   nova_mod.NOVA_CPU_CONF], ns=sub.lab)
            self._record("nova-compute-2", compute2, host=sub.name,
                         libvirt_uri=sub.lab.libvirt.uri)
            computes[sub.name] = compute2
        self.guest = guest.result()
        say(f"guest image: the lab's Linux guest: {self.guest.reason}")
        self._timed("images", self._upload_images)
        self._timed("dataplane networks", self._create_networks)
        self._timed("nova-compute up and mapped", self._wait_compute,
                    computes)
        self._timed("neutron-openvswitch-agent reporting", self._wait_agent)
        self._timed("exporter, controller, prometheus",
                    self._start_observers)

    def _start_host(self) -> None:
        lab = self.lab
        for step in (lab.start_resctrl, lab.start_namespace, lab.start_ovs):
            if self._stopping:
                raise LabError("the cloud is stopping")
            step()

    def _configure_nova(self) -> None:
        lab = self.lab
        ovs = lab.ovs
        # vhost-user needs guest memory OVS can map: file-backed and
        # shared, as there are no hugepages here.
        libvirt = {"virt_type": self.machine.virt_type,
                   "file_backed_memory": FILE_BACKED_MEMORY_MB}
        if self.machine.virt_type == "kvm":
            libvirt.update(cpu_mode="none")
        rdt_host = {
            "ovsdb_connection": f"unix:{ovs.db_sock}",
            "ovs_vswitchd_pidfile": ovs.vswitchd_pidfile,
            "ovs_vswitchd_target": ovs.vswitchd_ctl,
        }
        sub = self.subnode
        overrides = {}
        if sub:
            sockets = os.path.join(self.data, "libvirt-sockets")
            subnode_mod.link_sockets(sockets, [lab.libvirt.socket,
                                               sub.lab.libvirt.socket])
            libvirt2 = {**libvirt,
                        **subnode_mod.migration_options(sockets, 1)}
            libvirt.update(subnode_mod.migration_options(sockets, 0))
            # Operators run several (the default is one per CPU), and two
            # processes may both pick a host's last ways: the compute's
            # claim must then refuse and Nova reschedule.
            overrides["scheduler"] = {"workers": 2}
            if self.machine.virt_type == "kvm":
                overrides["workarounds"] = {"skip_cpu_compare_on_dest": True}
                self.machine.forced.append(
                    "workarounds.skip_cpu_compare_on_dest = True: libvirt "
                    "finds this machine's (PVM) host CPU compatible with "
                    "no model, so Nova's pre-check of a live migration's "
                    "destination refuses every move ('CPU doesn't have "
                    "compatibility'); both computes are this machine")
        self.nova.write_conf(libvirt, rdt_host, overrides)
        from nova_rdt.lab.allinone import ini as ini_mod
        # The exporter's and controller's own groups (not the plugin's).
        with open(self.nova.conf, "a") as f:
            f.write("\n" + ini_mod.render({
                "rdt_controller": {
                    "port": self.controller_port,
                    "state_file": os.path.join(self.data, "nova-rdt",
                                               "controller.json")},
                "os_vif_ovs": {"ovsdb_connection": f"unix:{ovs.db_sock}"},
            }))
        self.plugin = devstack_plugin.Plugin(
            self.plugin_env(), os.path.join(lab.log_dir,
                                            "devstack-plugin.log"),
            wrap=lab.ns.command)
        self._timed("devstack plugin: stack post-config", self.plugin.run,
                    "post-config", nova_mod.Nova.CPU_CONF_BASH)
        if sub:
            self._timed("second compute: stack post-config", sub.configure,
                        libvirt2, rdt_host, overrides)

    def plugin_env(self) -> dict[str, str]:
        """devstack's variables for the plugin, as lib/nova sets them on
        an all-in-one host with OVS-DPDK."""
        bindir = os.path.dirname(sys.executable)
        return {
            **self.env(),
            "DEST": self.data, "NOVA_DIR": os.path.join(self.data,
                                                        "no-nova-tree"),
            "NOVA_CONF_DIR": nova_mod.CONF_DIR,
            "NOVA_CONF": nova_mod.NOVA_CONF,
            "NOVA_CPU_CONF": nova_mod.NOVA_CPU_CONF,
            "NOVA_API_PASTE_INI": nova_mod.API_PASTE,
            "NOVA_BIN_DIR": bindir,
            "ENABLED_SERVICES": "key,mysql,rabbit,g-api,placement-api,"
                                "n-api,n-cond,n-sch,n-cpu,q-svc,q-agt,"
                                "tempest,nova-rdt,nova-rdt-exporter,"
                                "nova-rdt-controller",
            "Q_AGENT": "openvswitch",
            "OVS_DATAPATH_TYPE": "netdev",
            "OVS_BRIDGE_MAPPINGS": ",".join(
                f"{p}:{b}" for p, b in dataplane_mod.BRIDGES.items()),
            "NOVA_RDT_RESERVED_HOST_WAYS": str(RESERVED_HOST_WAYS),
            "NOVA_RDT_CLASSES": CLASSES,
            "NOVA_RDT_EXPORTER_PORT": str(self.exporter_port),
            "NOVA_RDT_HOOKS_DIR": HOOKS_DIR,
            "NOVA_RDT_HOOK_SETTINGS": HOOK_SETTINGS,
            "NOVA_RDT_STATE_PATH": STATE_PATH,
            "TEMPEST_CONFIG": os.path.join(self.data, "tempest",
                                           "etc", "tempest.conf"),
            "NOVA_RDT_TEMPEST_RDT_COMPUTE": "True",
            **self.tempest_env(),
        }

    def tempest_env(self) -> dict[str, str]:
        """The plugin's NOVA_RDT_TEMPEST_* variables for the isolation
        scenario (its test-config phase writes them into [nova_rdt]);
        empty until the dataplane networks exist."""
        if len(self.networks) != len(dataplane_mod.PHYSNETS):
            return {}
        cdir = os.path.join(self.out_dir, "cloud")
        gen = self.dataplane.write_generator_config(
            os.path.join(cdir, "generator.yaml"), self.tempest_short)
        short = self.tempest_short
        return {
            "NOVA_RDT_TEMPEST_GENERATOR": "software",
            "NOVA_RDT_TEMPEST_GENERATOR_CONFIG": os.path.abspath(gen),
            "NOVA_RDT_TEMPEST_DATAPLANE_NETWORKS": ",".join(
                self.networks[p] for p in dataplane_mod.PHYSNETS),
            "NOVA_RDT_TEMPEST_FRAME_SIZES": "64,1024" if short
            else "64,256,1024,1512",
            "NOVA_RDT_TEMPEST_TRIAL_DURATION": "0.5" if short else "2",
            "NOVA_RDT_TEMPEST_LATENCY_DURATION": "0.5" if short else "2",
            "NOVA_RDT_TEMPEST_SETTLE_SECONDS": "2" if short else "10",
            "NOVA_RDT_TEMPEST_ARTIFACTS_DIR": os.path.abspath(
                os.path.join(cdir, "tempest-artifacts")),
            "NOVA_RDT_TEMPEST_FORWARDING_IMAGE_REF": self.images.get(
                f"{IMAGE}", ""),
            "NOVA_RDT_TEMPEST_NOISY_IMAGE_REF": self.images.get(
                f"{IMAGE}-noisy", self.images.get(IMAGE, "")),
            # No hugepages here: file-backed guest memory is what vhost-user
            # shares ([libvirt] file_backed_memory).
            "NOVA_RDT_TEMPEST_MEM_PAGE_SIZE": "",
            # Two CPUs, one the PMD's: nothing to dedicate.
            "NOVA_RDT_TEMPEST_CPU_POLICY": "",
            "NOVA_RDT_TEMPEST_FORWARDING_VCPUS": "1",
            "NOVA_RDT_TEMPEST_FORWARDING_RAM_MB": "256",
            "NOVA_RDT_TEMPEST_NOISY_VCPUS": "1",
            "NOVA_RDT_TEMPEST_NOISY_RAM_MB": "256",
            "NOVA_RDT_TEMPEST_NOISY_MEMORY_MB": "128",
            "NOVA_RDT_TEMPEST_DISK_GB": "1",
            "NOVA_RDT_TEMPEST_RDT": "emulated" if self.lab.emulated
            else "real",
            # Each compute's exporter, for the whitebox checks of moves.
            "NOVA_RDT_TEMPEST_EXPORTER_URLS": ",".join(
                f"{host}:{url}" for host, url in self.exporters.items()),
            # The guest cannot tell: TCG under a kvm domain prints no
            # "Hypervisor detected".
            "NOVA_RDT_TEMPEST_ACCEL": "tcg" if (
                self.machine.virt_type == "qemu"
                or getattr(self.guest, "tcg_for_kvm", False)) else "kvm",
        }

    def _start_dataplane(self) -> None:
        self.dataplane.start()
        dataplane_mod.check_bridges(self.agent.conf, self.lab.ovs)

    def _start_neutron_agents(self) -> None:
        """Neutron's RPC server (on the host, beside its API) and the
        Open vSwitch agent (in the lab's namespace, as nova-compute: its
        privsep helper goes through the namespace's sudo)."""
        rpc = self._spawn("neutron-rpc-server",
                          self.neutron.rpc_server_argv())
        self._record("neutron-rpc-server", rpc)
        self.agent.write()
        agent = self._spawn(dataplane_mod.AGENT_BINARY,
                            self.agent.argv(self.neutron.conf), ns=True)
        self._record(dataplane_mod.AGENT_BINARY, agent,
                     config=self.agent.conf_path)

    def _create_networks(self) -> None:
        conn = self.conn()
        try:
            self.networks = dataplane_mod.create_networks(conn)
        finally:
            conn.close()
        self.say("dataplane networks: " + ", ".join(
            f"{dataplane_mod.NETWORKS[p]} (flat, physnet {p}, "
            f"{dataplane_mod.BRIDGES[p]}, generator port "
            f"{self.dataplane.ports[p][0]})" for p in dataplane_mod.PHYSNETS))

    def _wait_agent(self) -> None:
        proc = next(p for p in self.procs
                    if p.name == dataplane_mod.AGENT_BINARY)
        conn = self.conn()
        try:
            self.agent_record = dataplane_mod.wait_agent_alive(
                conn, proc, self.hypervisor, dataplane_mod.AGENT_TIMEOUT)
        finally:
            conn.close()
        self.services[dataplane_mod.AGENT_BINARY]["agent"] = \
            self.agent_record

    def _start_libvirt(self, guest) -> None:
        """The plugin's ``stack extra`` installs the hook (and syncs the
        PMD COS from OVS) before libvirtd starts: libvirtd reads hooks
        only at start, which is why the plugin restarts it.  How Linux
        guests run (``guest``, the choice's future) is settled first:
        libvirtd reads its emulators at start too."""
        rec = self.plugin.run("extra")
        self.plugin_processes = rec.processes
        choice = guest.result()
        if choice.tcg_for_kvm:
            self.lab.libvirt.use_tcg_for_kvm(choice.reason)
            self.machine.forced += self.lab.libvirt.forced
        if self.subnode:
            self.lab.libvirt.migration_ports = subnode_mod.migration_ports(0)
        self.lab.start_libvirt()

    def sides(self) -> list:
        """Each compute's resctrl, libvirtd and nova-rdt state (host
        paths), for :mod:`.hostview`."""
        from nova_rdt.lab.allinone import hostview
        out = [hostview.Side(
            socket.gethostname(), self.lab.resctrl_root,
            self.lab.libvirt.uri,
            os.path.join(self.lab.libvirt.dirs["run"], "qemu"),
            os.path.join(self.data, "nova-rdt"))]
        sub = self.subnode
        if sub:
            out.append(hostview.Side(
                sub.name, sub.lab.resctrl_root, sub.lab.libvirt.uri,
                os.path.join(sub.lab.libvirt.dirs["run"], "qemu"),
                os.path.join(sub.data, "nova-rdt")))
        return out

    def _compute_name(self, host: str) -> str:
        return "nova-compute" if host == socket.gethostname() \
            else "nova-compute-2"

    def stop_compute(self, host: str) -> None:
        """``host``'s nova-compute stops (its guests run on)."""
        name = self._compute_name(host)
        proc = next(p for p in self.procs
                    if p.name == name and p.running())
        self.sup.stop(proc, timeout=20)

    def start_compute(self, host: str, wait: bool = True) -> None:
        """``host``'s nova-compute starts again; with ``wait``, returns
        once Nova lists its service up (a forced-down one never is)."""
        name = self._compute_name(host)
        ns = True if name == "nova-compute" else self.subnode.lab
        proc = self._spawn(name, ["nova-compute", "--config-file",
                                  nova_mod.NOVA_CPU_CONF], ns=ns)
        self._record(name, proc, host=host)
        if wait:
            self.wait_compute_up(host)

    def wait_compute_up(self, host: str) -> None:
        name = self._compute_name(host)
        proc = next(p for p in reversed(self.procs) if p.name == name)
        conn = self.conn()
        try:
            deadline = time.monotonic() + COMPUTE_TIMEOUT
            while not any(s.host == host and s.state == "up"
                          for s in conn.compute.services(
                              binary="nova-compute")):
                self._alive(proc, "registering its service")
                if time.monotonic() > deadline:
                    raise LabError(f"{name} did not come back up within "
                                   f"{COMPUTE_TIMEOUT:.0f}s")
                time.sleep(1)
        finally:
            conn.close()

    @property
    def instances_path(self) -> str:
        return os.path.join(self.nova.data, "instances")

    def _mount_shared(self) -> None:
        """The instances path, shared by both computes as a cluster
        filesystem (:mod:`nova_rdt.lab.sharedfs`)."""
        from nova_rdt.lab import sharedfs
        backing = os.path.join(self.data, "instances-shared")
        os.makedirs(backing, exist_ok=True)
        os.makedirs(self.instances_path, exist_ok=True)
        self.shared_fs = self.sup.spawn(
            "shared-instances", [sys.executable, "-m",
                                 "nova_rdt.lab.sharedfs", backing,
                                 self.instances_path], env=self.env())
        self.sup.wait_for(self.shared_fs,
                          lambda: sharedfs.mounted(self.instances_path),
                          30, f"mounted at {self.instances_path}")
        self._record("shared-instances", self.shared_fs,
                     mountpoint=self.instances_path, backing=backing)

    def _check_shared(self) -> None:
        """A file made through one compute's namespace is seen through
        the other's, as Nova's shared storage check will ask: otherwise
        live migrations silently become block migrations."""
        probe = os.path.join(self.instances_path,
                             f".shared-probe-{os.getpid()}")
        self.lab.ns.run(["touch", probe])
        try:
            if self.subnode.lab.ns.run(["test", "-e", probe],
                                       check=False).returncode != 0:
                raise LabError(
                    f"the second compute does not see the shared "
                    f"instances path {self.instances_path}: its namespace "
                    f"was made without the FUSE mount")
        finally:
            self.lab.ns.run(["rm", "-f", probe], check=False)

    def _unmount_shared(self) -> None:
        if self.shared_fs is None:
            return
        subprocess.run(["umount", "-l", self.instances_path],
                       capture_output=True)
        self.sup.stop(self.shared_fs)
        self.shared_fs = None

    def _start_libvirt2(self, guest) -> None:
        # The first compute's libvirtd starts from the same choice; the
        # machine's forced list already says it.
        self.subnode.start_libvirt(guest.result())

    def _wait_api(self, name: str, api, url: str) -> None:
        proc = api.proc
        self._timed(f"{name} answering", self.sup.wait_for, proc,
                    lambda: _http_up(url), START_TIMEOUT,
                    f"answering {url}")
        self._record(name, proc, api.url)

    def conn(self, member: bool = False):
        import openstack
        auth = (self.keystone.member_auth() if member
                else self.keystone.admin_auth())
        return openstack.connect(region_name=keystone_mod.REGION,
                                 interface="public", **auth)

    def _upload_images(self) -> None:
        conn = self.conn()
        try:
            def up(name, path, fmt, container=None, **props):
                image = conn.image.create_image(
                    name=name, filename=path, disk_format=fmt,
                    container_format=container or fmt,
                    visibility="public", wait=True, allow_duplicates=True,
                    **props)
                self.images[name] = image.id
                return image.id
            from nova_rdt.lab.guest import boot as guest_boot
            from nova_rdt.lab.guest import image as guest_image
            img = guest_image.load()
            root = os.path.join(self.data, "root-disk.raw")
            with open(root, "wb") as f:
                f.truncate(ROOT_DISK_MIB << 20)
            kernel = up(f"{IMAGE}-kernel", img.kernel, "aki")
            ramdisk = up(f"{IMAGE}-initrd", img.initrd, "ari")
            # One image forwards between two NICs (and idles with
            # fewer); the other is the noisy neighbour.  Under TCG the
            # guest takes legacy interrupts (QEMU 7.2's TCG crashes on
            # a vhost-user queue's MSI-X vector).
            tcg = " pci=nomsi" if self.guest.tcg_for_kvm or \
                self.machine.virt_type == "qemu" else ""
            for name, role, extra in (
                    (IMAGE, "auto", tcg.strip()),
                    (f"{IMAGE}-noisy", "noisy",
                     f"nova_rdt.stress_mib={NOISY_MIB}")):
                up(name, root, "ami", kernel_id=kernel, ramdisk_id=ramdisk,
                   os_command_line=guest_boot.cmdline(role, extra),
                   architecture="x86_64")
        finally:
            conn.close()

    def _wait_compute(self, computes: dict[str, Process]) -> None:
        """Every compute (host name -> its process) up, mapped to the cell
        and a resource provider in Placement."""
        conn = self.conn()
        try:
            deadline = time.monotonic() + COMPUTE_TIMEOUT
            while True:
                up = {s.host for s in conn.compute.services(
                    binary="nova-compute") if s.state == "up"}
                if up >= set(computes):
                    self.hypervisor = next(iter(computes))
                    break
                for host, compute in computes.items():
                    if host in up:
                        continue
                    self._alive(compute, "registering its service")
                    self._no_fatal(compute)
                    if time.monotonic() > deadline:
                        raise LabError(
                            f"{compute.name} (host {host}) did not come up "
                            f"within {COMPUTE_TIMEOUT:.0f}s; its log "
                            f"ends:\n{compute.log_tail()}")
                time.sleep(1)
            while True:
                self._run(self.nova.discover_hosts(), "discover_hosts")
                rps = list(conn.placement.resource_providers())
                if len(rps) >= len(computes):
                    break
                for compute in computes.values():
                    self._alive(compute, "reporting to placement")
                if time.monotonic() > deadline:
                    raise LabError("no resource provider in placement "
                                   "after nova-compute came up")
                time.sleep(2)
        finally:
            conn.close()

    @staticmethod
    def _no_fatal(proc: Process) -> None:
        """oslo.service keeps a process whose service failed to start
        alive; Nova's commands log that failure on the ``nova`` logger."""
        tail = proc.log_tail(20000)
        if " ERROR nova " in tail:
            first = tail[tail.index(" ERROR nova "):]
            raise LabError(f"{proc.name} failed to start: "
                           f"{first[:3000]}")

    def _alive(self, proc: Process, what: str) -> None:
        if not proc.running():
            raise LabError(f"{proc.name} exited (status "
                           f"{proc.popen.poll()}) before {what}; its log "
                           f"ends:\n{proc.log_tail()}")

    def _start_observers(self) -> None:
        """The plugin's run_process command lines (recorded at ``stack
        extra``), run in the namespace; then Prometheus scraping the
        exporter."""
        import shlex
        for name in ("nova-rdt-exporter", "nova-rdt-controller"):
            cmd = self.plugin_processes.get(name)
            if not cmd:
                raise LabError(f"the plugin's stack extra did not run_process"
                               f" {name}")
            proc = self._spawn(name, shlex.split(cmd), ns=True)
            url = (f"http://127.0.0.1:{self.exporter_port}"
                   if name == "nova-rdt-exporter"
                   else f"http://127.0.0.1:{self.controller_port}")
            self.sup.wait_for(proc, lambda u=url: _http_up(u + "/metrics"),
                              60, f"serving {url}/metrics")
            self._record(name, proc, url, command=cmd,
                         host=socket.gethostname())
        self.exporters = {socket.gethostname(): self.services[
            "nova-rdt-exporter"]["url"]}
        targets = [f"127.0.0.1:{self.exporter_port}",
                   f"127.0.0.1:{self.controller_port}"]
        sub = self.subnode
        if sub:
            for name, port in (("nova-rdt-exporter", sub.exporter_port),
                               ("nova-rdt-controller", sub.controller_port)):
                cmd = sub.plugin_processes.get(name)
                if not cmd:
                    raise LabError(f"the second compute's stack extra did "
                                   f"not run_process {name}")
                proc = self._spawn(f"{name}-2", shlex.split(cmd),
                                   ns=sub.lab)
                url = f"http://127.0.0.1:{port}"
                self.sup.wait_for(proc,
                                  lambda u=url: _http_up(u + "/metrics"),
                                  60, f"serving {url}/metrics")
                self._record(f"{name}-2", proc, url, command=cmd,
                             host=sub.name)
                targets.append(f"127.0.0.1:{port}")
            self.exporters[sub.name] = self.services[
                "nova-rdt-exporter-2"]["url"]
        pdir = os.path.join(self.data, "prometheus")
        os.makedirs(pdir, exist_ok=True)
        cfg = os.path.join(pdir, "prometheus.yml")
        with open(cfg, "w") as f:
            json.dump({"global": {"scrape_interval": "5s",
                                  "evaluation_interval": "5s"},
                       "scrape_configs": [{
                           "job_name": "nova-rdt", "honor_labels": True,
                           "static_configs": [{"targets": targets}]}]},
                      f)
        prom = self._spawn("prometheus", [
            "prometheus", f"--config.file={cfg}",
            f"--storage.tsdb.path={os.path.join(pdir, 'data')}",
            f"--web.listen-address=127.0.0.1:{self.prometheus_port}"])
        url = f"http://127.0.0.1:{self.prometheus_port}"
        self.sup.wait_for(prom, lambda: _http_up(url + "/-/ready"), 60,
                          "ready")
        self._record("prometheus", prom, url)

    # -- stop -------------------------------------------------------------

    def stop(self) -> list[str]:
        """Every process in reverse order, then the Host lab; returns what
        outlived it all (should be nothing)."""
        t0 = time.monotonic()
        self._kill_running()
        sessions = [p.pid for p in self.procs]
        # Tiers, each stopped side by side: what uses a service stops
        # before it (the observers, then the compute, the other services,
        # then the broker and the database).
        last = {"rabbitmq": 3, "epmd": 4, "mariadb": 3, "nova-compute": 1,
                "nova-compute-2": 1}
        tiers: dict[int, list[Process]] = {}
        for proc in self.procs:
            tier = last.get(proc.name, 2 if proc.name.startswith(
                ("nova-", "keystone", "glance", "placement", "neutron"))
                and not proc.name.startswith("nova-rdt") else 0)
            tiers.setdefault(tier, []).append(proc)

        def stop_one(proc: Process) -> None:
            t = time.monotonic()
            self.sup.stop(proc, timeout=dataplane_mod.AGENT_STOP_TIMEOUT
                          if proc.name == dataplane_mod.AGENT_BINARY
                          else 20)
            self.stop_timings[proc.name] = round(time.monotonic() - t, 1)

        for tier in sorted(tiers):
            threads = [threading.Thread(target=stop_one, args=(p,))
                       for p in tiers[tier]]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        self._sweep_sessions(sessions)
        labs = ([self.subnode.lab] if self.subnode else []) + [self.lab]
        for lab in labs:
            if lab is self.lab:
                # Its directory holds the shared mount.
                self._unmount_shared()
            lab.stop()
        left = [f"process {s}" for s in self._session_members(sessions)]
        for lab in labs:
            left += lab.leaks()
            left += [f"process in lab namespace (killed) {s}"
                     for s in lab.swept]
        self.timings["stop"] = round(time.monotonic() - t0, 1)
        return left

    @staticmethod
    def _session_members(sessions: list[int]) -> list[str]:
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[3]) in sessions:
                    with open(f"/proc/{pid}/comm") as f:
                        out.append(f"{f.read().strip()}[{pid}]")
            except (OSError, IndexError, ValueError):
                continue
        return out

    def _sweep_sessions(self, sessions: list[int]) -> None:
        """Workers a master left behind (a uWSGI worker, a privsep
        daemon): killed and recorded in :attr:`swept`."""
        for _ in range(20):
            left = self._session_members(sessions)
            if not left:
                return
            for entry in left:
                pid = int(entry.rsplit("[", 1)[1].rstrip("]"))
                try:
                    os.kill(pid, signal.SIGKILL)
                    self.swept.append(entry)
                except OSError:
                    pass
            time.sleep(0.1)
