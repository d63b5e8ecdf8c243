"""Nova's in-process functional framework on hosts that look like Intel
RDT hosts: used by the Nova tests and by ``nova-rdt lab``.

It needs Nova's test-only dependencies (test-requirements.txt) and Nova's
eventlet monkey-patching applied before anything imports oslo.messaging.

:class:`RdtServersTestBase` is Nova's libvirt ``ServersTestBase`` (real
API, conductor, scheduler, compute and placement in one process, libvirt
faked by ``nova.tests.fixtures.libvirt``) with:

* :meth:`~RdtServersTestBase.start_rdt_compute`: a compute whose host has
  a resctrl filesystem (our FUSE emulator, one per host), a sysfs cache
  topology that agrees with the fake NUMA topology, ``[rdt]`` options
  pointing at both, and libvirt capabilities with the ``<cache>`` and
  ``<memory_bandwidth>`` elements libvirt 9.0 reports on such a host.
  ``start_compute`` still starts plain hosts.
* capture of every domain XML handed to ``defineXML``/``createXML``
  (fakelibvirt's ``XMLDesc()`` drops ``<cachetune>``/``<memorytune>``):
  :meth:`~RdtServersTestBase.domain_xml`,
  :meth:`~RdtServersTestBase.defined_xmls`.
* :meth:`~RdtServersTestBase.relaxng_validate` against libvirt's schemas.

Live-migration tests combine it with Nova's mixin, as Nova's own do::

    class MyTest(LibvirtMigrationMixin, RdtServersTestBase): ...

or use :class:`RdtMigrationTestBase`; the stub's ``createXML`` on the
destination is captured like any other.
"""

from __future__ import annotations

import collections
import dataclasses
import os

import fixtures
from lxml import etree
from oslo_config import cfg

from nova import conf as nova_conf
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base as libvirt_base

import nova_rdt.conf
from nova_rdt.emulator import kernel as emu_kernel
from nova_rdt.emulator import mount as emu_mount
from nova_rdt.emulator import profiles as emu_profiles
from nova_rdt.emulator import topology as emu_topology
from nova_rdt.resctrl.capabilities import format_cpu_list

CONF = nova_conf.CONF

#: Where libvirt's RelaxNG schemas live (Debian: libvirt-daemon's files).
LIBVIRT_SCHEMA_DIR = os.environ.get("NOVA_RDT_LIBVIRT_SCHEMA_DIR",
                                    "/usr/share/libvirt/schemas")

LibvirtMigrationMixin = libvirt_base.LibvirtMigrationMixin


def register_rdt_opts(conf=CONF) -> None:
    """Register nova-rdt's ``[rdt]`` options on ``conf``, once.

    Registering the same option definitions again is a no-op in
    oslo.config; a different definition under the same name (the product
    may grow its own) is left alone.
    """
    try:
        nova_rdt.conf.register_opts(conf)
    except cfg.DuplicateOptError:
        pass


register_rdt_opts()


#: One XML document handed to fake libvirt.
CapturedXML = collections.namedtuple(
    "CapturedXML", ["hostname", "method", "uuid", "xml"])


@dataclasses.dataclass
class RdtHost:
    """What :meth:`RdtServersTestBase.start_rdt_compute` set up for a host."""

    hostname: str
    profile: emu_profiles.Profile
    host_info: fakelibvirt.HostInfo
    emulator: emu_mount.Emulator
    #: cache id -> host CPUs; cache id i is fake NUMA node i.
    banks: dict[int, list[int]]
    #: The ``[rdt] sysfs_cpu_root`` given to the compute: ``cpu*/cache/
    #: index3`` for the fake host's CPUs (the emulator's own tree, for the
    #: profile's CPUs, stays at ``emulator.sysfs_cpu``).
    sysfs_cpu_root: str
    cache_xml: str
    memory_bandwidth_xml: str | None
    #: ``[rdt] state_path``: the hook's domain records for this host.
    state_path: str = ""

    @property
    def resctrl_root(self) -> str:
        return self.emulator.mountpoint

    def flags(self) -> dict[str, str]:
        return {"resctrl_root": self.resctrl_root,
                "sysfs_cpu_root": self.sysfs_cpu_root,
                "state_path": self.state_path}


# -- libvirt 9.0 capabilities -------------------------------------------------

@dataclasses.dataclass
class _ExternalResctrl:
    """A resctrl mount the harness did not make (``resctrl_root=``)."""

    mountpoint: str

    def stop(self) -> None:
        pass


def _format_int_pretty(value: int) -> tuple[int, str]:
    """libvirt's virFormatIntPretty(): the largest unit that divides."""
    unit = "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value == 0 or value % 1024:
            break
        value //= 1024
        unit = bigger
    return value, unit


def _cache_control(granularity: int, minimum: int, scope: str,
                   max_allocs: int) -> str:
    """One ``<control/>`` of a cache bank (virCapabilitiesFormatCaches)."""
    gran_short, unit = _format_int_pretty(granularity)
    min_short, min_unit = _format_int_pretty(minimum)
    if min_short:
        # Both values in the smaller of the two units.
        gran_div = granularity // gran_short
        min_div = minimum // min_short
        if min_div > gran_div:
            min_short *= min_div // gran_div
        elif min_div < gran_div:
            unit = min_unit
            gran_short *= gran_div // min_div
    attrs = f"granularity='{gran_short}'"
    if min_short:
        attrs += f" min='{min_short}'"
    return (f"<control {attrs} unit='{unit}' type='{scope}' "
            f"maxAllocs='{max_allocs}'/>")


def _monitor(profile: emu_profiles.Profile, prefix: str) -> str:
    """``<monitor>`` for features starting with ``prefix`` ('' if none)."""
    mon = profile.monitor
    features = [f for f in (mon.features if mon else ()) if
                f.startswith(prefix)]
    if not features:
        return ""
    attrs = ""
    if prefix == "llc_":
        # The kernel's max_threshold_occupancy, as the emulator computes it.
        threshold = ((profile.l3.size // mon.num_rmids)
                     // emu_kernel.MON_SCALE * emu_kernel.MON_SCALE)
        attrs = f"level='3' reuseThreshold='{threshold}' "
    body = "".join(f"<feature name='{f}'/>" for f in features)
    return f"<monitor {attrs}maxMonitors='{mon.num_rmids}'>{body}</monitor>"


def libvirt_resctrl_caps(profile: emu_profiles.Profile,
                         banks: dict[int, list[int]]
                         ) -> tuple[str, str | None]:
    """``<cache>`` and ``<memory_bandwidth>`` (or None) as libvirt 9.0 would
    report them for ``profile`` with L3 cache id -> CPUs ``banks``.

    From libvirt's virCapabilitiesFormatCaches/-MemoryBandwidth and
    virResctrlInfoGetCache: the bank size is sysfs ``index3/size``;
    granularity = size / popcount(cbm_mask); ``min`` only when
    min_cbm_bits != 1; one control per info/L3* directory (type both, or
    code and data under CDP) with maxAllocs = its num_closids; the MB node
    of each L3 bank has granularity = bandwidth_gran, min = min_bandwidth
    and maxAllocs = MB's num_closids.  ``<monitor>`` elements follow the
    banks/nodes when info/L3_MON lists llc_*/mbm_* features.  A host with
    MBM but no MBA (e7-8890-v4) gets a ``<memory_bandwidth>`` holding only
    a ``<monitor>``: libvirt 9.0 formats exactly that, although its own
    capability.rng wants at least one ``<node>``.
    """
    l3 = profile.l3
    if profile.cdp:
        scopes = [("code", l3.num_closids // 2), ("data", l3.num_closids // 2)]
    else:
        scopes = [("both", l3.num_closids)]
    granularity = l3.size // l3.cbm_len
    minimum = l3.min_cbm_bits * granularity if l3.min_cbm_bits != 1 else 0
    size, size_unit = _format_int_pretty(l3.size)
    parts = ["<cache>"]
    for cache_id, cpus in sorted(banks.items()):
        controls = "".join(_cache_control(granularity, minimum, scope, n)
                           for scope, n in scopes)
        parts.append(
            f"<bank id='{cache_id}' level='{l3.level}' type='both' "
            f"size='{size}' unit='{size_unit}' "
            f"cpus='{format_cpu_list(cpus)}'>{controls}</bank>")
    parts.append(_monitor(profile, "llc_"))
    parts.append("</cache>")
    cache_xml = "".join(parts)

    mb = next((b for b in profile.bandwidth if b.name == "MB"), None)
    nodes = []
    if mb is not None:
        for cache_id, cpus in sorted(banks.items()):
            nodes.append(
                f"<node id='{cache_id}' cpus='{format_cpu_list(cpus)}'>"
                f"<control granularity='{mb.bandwidth_gran}' "
                f"min='{mb.min_bandwidth}' maxAllocs='{mb.num_closids}'/>"
                f"</node>")
    mon = _monitor(profile, "mbm_")
    membw_xml = (f"<memory_bandwidth>{''.join(nodes)}{mon}</memory_bandwidth>"
                 if nodes or mon else None)
    return cache_xml, membw_xml


def _inject_resctrl_caps(caps_xml: str, host: RdtHost) -> str:
    """Put the host's ``<cache>``/``<memory_bandwidth>`` where libvirt does:
    after the NUMA ``<topology>``, before ``<secmodel>``."""
    root = etree.fromstring(caps_xml)
    host_el = root.find("host")
    anchor = host_el.find("topology")
    pos = (list(host_el).index(anchor) + 1 if anchor is not None
           else len(host_el.findall("*")))
    for fragment in (host.cache_xml, host.memory_bandwidth_xml):
        if fragment:
            host_el.insert(pos, etree.fromstring(fragment))
            pos += 1
    return etree.tostring(root, encoding="unicode")


def _write_host_sysfs(profile: emu_profiles.Profile,
                      banks: dict[int, list[int]], root: str) -> str:
    """``cpuN/cache/index3`` for the fake host's CPUs, cache id = NUMA node."""
    all_cpus = sorted(c for cpus in banks.values() for c in cpus)
    nbits = max(all_cpus) + 1
    for cache_id, cpus in banks.items():
        files = emu_topology.index3_files(profile, cache_id, sorted(cpus),
                                          nbits)
        for cpu in cpus:
            d = os.path.join(root, f"cpu{cpu}", "cache", "index3")
            os.makedirs(d, exist_ok=True)
            for name, text in files.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
    with open(os.path.join(root, "online"), "w") as f:
        f.write(format_cpu_list(all_cpus) + "\n")
    return root


_RELAXNG: dict[str, etree.RelaxNG] = {}


def _relaxng(path: str) -> etree.RelaxNG:
    if path not in _RELAXNG:
        _RELAXNG[path] = etree.RelaxNG(etree.parse(path))
    return _RELAXNG[path]


def _xml_uuid(xml) -> str | None:
    try:
        data = xml.encode() if isinstance(xml, str) else xml
        return etree.fromstring(data).findtext("uuid")
    except (etree.XMLSyntaxError, ValueError):
        return None


# -- the test base ------------------------------------------------------------

class RdtServersTestBase(libvirt_base.ServersTestBase):
    """ServersTestBase with RDT hosts, domain XML capture and validation."""

    #: compute_driver for every compute this test starts (set before any
    #: starts); the product's is 'rdt.LibvirtRDTDriver'.
    COMPUTE_DRIVER = "libvirt.LibvirtDriver"
    #: [wsgi] api_paste_config; None means the installed Nova's
    #: api-paste.ini (conftest.py applies it).
    API_PASTE_CONFIG = None
    #: NUMA layout of an RDT host when start_rdt_compute gets none: one
    #: node per L3 cache domain of the profile (2 for gold-6252).
    RDT_HOST_INFO = dict(cpu_nodes=2, cpu_sockets=1, cpu_cores=4,
                         cpu_threads=1)

    #: Run nova-rdt's privsep entry points (nova_rdt.privsep) in the test
    #: process instead of a helper daemon, as Nova's PrivsepFixture does
    #: for nova.privsep; Nova's own contexts stay forbidden.
    RDT_PRIVSEP_IN_PROCESS = True

    ADMIN_API = True
    microversion = "latest"

    def setUp(self):
        # Registered before Nova's own set-up so that they run after its
        # cleanups (the computes stop first, then the emulators unmount,
        # then their directory goes).  Underscored: nova.test.TestCase
        # deletes public attributes in a cleanup.
        self._rdt_tmp = self.useFixture(fixtures.TempDir()).path
        self._rdt_hosts: dict[str, RdtHost] = {}
        self._rdt_emulators: list[emu_mount.Emulator] = []
        self._captured: list[CapturedXML] = []
        self.addCleanup(self._stop_rdt_emulators)
        register_rdt_opts()
        super().setUp()
        self._patch_fakelibvirt()
        if self.RDT_PRIVSEP_IN_PROCESS:
            self._rdt_privsep_in_process()

    def _setup_compute_service(self):
        # Computes are started by the test; only choose the driver here.
        self.flags(compute_driver=self.COMPUTE_DRIVER)

    def _rdt_privsep_in_process(self):
        try:
            from nova_rdt import privsep as rdt_privsep
        except ImportError:
            return
        from oslo_privsep import priv_context
        for value in vars(rdt_privsep).values():
            if isinstance(value, priv_context.PrivContext):
                self.useFixture(fixtures.MockPatchObject(
                    value, "client_mode", False))

    # -- fake libvirt hooks ---------------------------------------------------

    def _patch_fakelibvirt(self):
        conn_cls = fakelibvirt.Connection
        orig_caps = conn_cls.getCapabilities
        orig_define = conn_cls.defineXML
        orig_create = conn_cls.createXML
        hosts, captured = self._rdt_hosts, self._captured

        def getCapabilities(conn):
            xml = orig_caps(conn)
            host = hosts.get(conn.hostname)
            return _inject_resctrl_caps(xml, host) if host else xml

        def defineXML(conn, xml):
            captured.append(CapturedXML(conn.hostname, "defineXML",
                                        _xml_uuid(xml), xml))
            return orig_define(conn, xml)

        def createXML(conn, xml, flags):
            captured.append(CapturedXML(conn.hostname, "createXML",
                                        _xml_uuid(xml), xml))
            return orig_create(conn, xml, flags)

        for name, func in (("getCapabilities", getCapabilities),
                           ("defineXML", defineXML),
                           ("createXML", createXML)):
            self.useFixture(fixtures.MonkeyPatch(
                f"nova.tests.fixtures.libvirt.Connection.{name}", func))

    # -- RDT hosts ------------------------------------------------------------

    def start_rdt_compute(self, hostname: str = "compute1",
                          profile: str = "gold-6252",
                          host_info: fakelibvirt.HostInfo | None = None,
                          resctrl_root: str | None = None,
                          **kwargs) -> str:
        """Start a compute on an emulated RDT host; returns the hostname.

        Mounts the resctrl emulator for ``profile``, points ``[rdt]
        resctrl_root``/``sysfs_cpu_root`` at it (the driver reads them at
        init_host, so they are set just before this compute starts) and
        makes the host's fake libvirt report the resctrl capabilities.
        ``host_info`` must have one NUMA node per L3 domain of the profile;
        L3 cache id i covers NUMA node i's CPUs.  Other keyword arguments go
        to ``start_compute`` (pci_info, libvirt_version, ...).  Skips the
        test when FUSE is unavailable.
        """
        prof = emu_profiles.get(profile)
        if host_info is None:
            host_info = fakelibvirt.HostInfo(**self.RDT_HOST_INFO)
        cells = host_info.numa_topology.cells
        if len(cells) != prof.domains:
            raise ValueError(
                f"profile {prof.name} has {prof.domains} L3 cache domains "
                f"but host_info has {len(cells)} NUMA nodes; they must match")
        if hostname in self._rdt_hosts:
            raise ValueError(f"RDT host {hostname} already exists")
        banks = {i: sorted(cpu.id for cpu in cell.cpus)
                 for i, cell in enumerate(cells)}
        workdir = os.path.join(self._rdt_tmp, hostname)
        if resctrl_root is not None:
            # Someone else's resctrl (the Host lab's, where a real libvirtd
            # allocates): nothing to mount or unmount here.
            emulator = _ExternalResctrl(resctrl_root)
        else:
            reason = emu_mount.fuse_unavailable_reason()
            if reason:
                self.skipTest(f"resctrl emulator unavailable: {reason}")
            emulator = emu_mount.Emulator(
                prof.name, mountpoint=os.path.join(workdir, "resctrl"),
                state_dir=os.path.join(workdir, "emulator"))
            # Stopped by _stop_rdt_emulators, after the computes (stop()
            # is safe on an emulator that never started).
            self._rdt_emulators.append(emulator)
            emulator.start()
        cache_xml, membw_xml = libvirt_resctrl_caps(prof, banks)
        host = RdtHost(
            hostname=hostname, profile=prof, host_info=host_info,
            emulator=emulator, banks=banks,
            sysfs_cpu_root=_write_host_sysfs(
                prof, banks, os.path.join(workdir, "sysfs-cpu")),
            cache_xml=cache_xml, memory_bandwidth_xml=membw_xml,
            state_path=os.path.join(workdir, "state"))
        self._rdt_hosts[hostname] = host
        self.flags(group="rdt", **host.flags())
        return self.start_compute(hostname=hostname, host_info=host_info,
                                  **kwargs)

    def restart_compute_service(self, hostname, *args, **kwargs):
        """Nova's restart, with ``[rdt]`` pointed back at this host first."""
        host = self._rdt_hosts.get(hostname)
        if host is not None:
            self.flags(group="rdt", **host.flags())
        return super().restart_compute_service(hostname, *args, **kwargs)

    def rdt_host(self, hostname: str) -> RdtHost:
        """The :class:`RdtHost` of a host started by start_rdt_compute."""
        host = self._rdt_hosts.get(hostname)
        if host is None:
            raise KeyError(f"{hostname} was not started by start_rdt_compute")
        return host

    def _stop_rdt_emulators(self):
        for emulator in reversed(self._rdt_emulators):
            emulator.stop()

    # -- what libvirt saw -----------------------------------------------------

    def capabilities_xml(self, hostname: str) -> str:
        """getCapabilities() of the host's fake libvirt connection."""
        return self.computes[hostname].driver._host.get_connection() \
            .getCapabilities()

    @property
    def captured_xmls(self) -> list[CapturedXML]:
        """Every XML given to defineXML/createXML so far, in order."""
        return list(self._captured)

    def defined_xmls(self, hostname: str,
                     server_id: str | None = None) -> list[str]:
        """XML strings defined/created on ``hostname``, oldest first,
        optionally only those of one instance."""
        return [c.xml for c in self._captured if c.hostname == hostname
                and (server_id is None or c.uuid == server_id)]

    def domain_xml(self, server_id: str, hostname: str | None = None) -> str:
        """The latest XML defined/created for the server (on ``hostname``,
        or on any host); fails the test when there is none."""
        for c in reversed(self._captured):
            if c.uuid == server_id and hostname in (None, c.hostname):
                return c.xml
        where = f" on {hostname}" if hostname else ""
        seen = [(c.hostname, c.uuid) for c in self._captured]
        self.fail(f"no domain XML was defined for {server_id}{where}; "
                  f"captured (host, uuid): {seen}")

    def relaxng_validate(self, xml, schema: str = "domain") -> None:
        """Validate against libvirt's ``<schema>.rng`` (domain, capability,
        ...); fails the test with libxml2's errors when invalid, skips it
        when the schema is not installed."""
        path = os.path.join(LIBVIRT_SCHEMA_DIR, f"{schema}.rng")
        if not os.path.exists(path):
            self.skipTest(f"libvirt RelaxNG schema {path} is not installed "
                          "(apt-get install libvirt-daemon)")
        rng = _relaxng(path)
        doc = etree.fromstring(xml.encode() if isinstance(xml, str) else xml)
        if not rng.validate(doc):
            errors = "\n".join(str(e) for e in rng.error_log)
            self.fail(f"XML does not validate against {path}:\n{errors}\n"
                      f"{xml if isinstance(xml, str) else xml.decode()}")


class RdtMigrationTestBase(LibvirtMigrationMixin, RdtServersTestBase):
    """RdtServersTestBase with Nova's live-migration stub.

    Set ``self.server``, ``self.src`` and ``self.dest`` (compute services)
    before migrating, as LibvirtMigrationMixin requires.
    """
