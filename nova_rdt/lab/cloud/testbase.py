"""The base class of the Nova functional tests, and of the lab's Nova
cloud.

:class:`RdtServersTestBase` is Nova's libvirt ``ServersTestBase`` (real
API, conductor, scheduler, compute and placement in one process, libvirt
faked by ``nova.tests.fixtures.libvirt``) with:

* :meth:`~RdtServersTestBase.start_rdt_compute`: a compute whose host has
  a resctrl filesystem (our FUSE emulator, one per host, or a resctrl
  someone else mounted), a sysfs cache topology that agrees with the fake
  NUMA topology, ``[rdt]`` options pointing at both, and libvirt
  capabilities with the ``<cache>`` and ``<memory_bandwidth>`` elements
  libvirt 9.0 reports on such a host.  ``start_compute`` still starts
  plain hosts.
* capture of every domain XML handed to ``defineXML``/``createXML``
  (fakelibvirt's ``XMLDesc()`` drops ``<cachetune>``/``<memorytune>``):
  :meth:`~RdtServersTestBase.domain_xml`,
  :meth:`~RdtServersTestBase.defined_xmls`.
* :meth:`~RdtServersTestBase.relaxng_validate` against libvirt's schemas.
* ``API_PASTE_CONFIG``: the ``[wsgi] api_paste_config`` its API loads.

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
from nova import conf as nova_conf
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base as libvirt_base
from oslo_config import cfg

import nova_rdt.conf
from nova_rdt.emulator import mount as emu_mount
from nova_rdt.emulator import profiles as emu_profiles
from nova_rdt.lab.cloud.host_sysfs import write_host_sysfs
from nova_rdt.lab.cloud.libvirt_caps import inject_resctrl_caps
from nova_rdt.lab.cloud.libvirt_caps import libvirt_resctrl_caps

CONF = nova_conf.CONF

#: Where libvirt's RelaxNG schemas live (Debian: libvirt-daemon's files).
LIBVIRT_SCHEMA_DIR = os.environ.get("NOVA_RDT_LIBVIRT_SCHEMA_DIR",
                                    "/usr/share/libvirt/schemas")

LibvirtMigrationMixin = libvirt_base.LibvirtMigrationMixin

__all__ = ["CapturedXML", "LibvirtMigrationMixin", "RdtHost",
           "RdtMigrationTestBase", "RdtServersTestBase",
           "libvirt_resctrl_caps", "register_rdt_opts"]


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


@dataclasses.dataclass
class _ExternalResctrl:
    """A resctrl mount the harness did not make (``resctrl_root=``)."""

    mountpoint: str

    def stop(self) -> None:
        pass


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


class RdtServersTestBase(libvirt_base.ServersTestBase):
    """ServersTestBase with RDT hosts, domain XML capture and validation."""

    #: compute_driver for every compute this test starts (set before any
    #: starts); the product's is 'rdt.LibvirtRDTDriver'.
    COMPUTE_DRIVER = "libvirt.LibvirtDriver"
    #: [wsgi] api_paste_config for the API this test starts; None leaves
    #: Nova's (tests/functional/nova/conftest.py makes that the installed
    #: Nova's api-paste.ini).
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

    #: What makes the resctrl groups libvirt makes when a domain starts,
    #: and removes them when it stops, since fakelibvirt knows nothing of
    #: resctrl: a module or object with ``allocate(fs, domain_id, name,
    #: xml)`` (raising its ``Refused`` with libvirt's message) and
    #: ``remove(fs, name)``.  The Nova tests give theirs
    #: (``tests/libvirt_model.py``, a double held equal to the real
    #: libvirtd); None (the labs, whose real libvirtd makes the groups):
    #: nothing is made in libvirt's place.
    RDT_LIBVIRT_ALLOCATOR = None

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

    def _setup_services(self):
        # Between Nova's ConfFixture (which resets [wsgi]) and the API
        # fixture (which loads the paste pipeline): the one place where
        # the option takes effect.
        if self.API_PASTE_CONFIG:
            self.flags(api_paste_config=self.API_PASTE_CONFIG, group="wsgi")
        super()._setup_services()

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
        orig_running = conn_cls._mark_running
        orig_stopped = conn_cls._mark_not_running
        hosts, captured = self._rdt_hosts, self._captured
        allocator = self.RDT_LIBVIRT_ALLOCATOR

        def latest_xml(hostname, uuid):
            for c in reversed(captured):
                if c.hostname == hostname and c.uuid == uuid:
                    return c.xml
            return None

        orig_xmldesc = fakelibvirt.Domain.XMLDesc

        def XMLDesc(dom, flags):
            # fakelibvirt writes its XML anew from what it parsed, without
            # the <metadata> libvirt keeps: put nova-rdt's back, as
            # libvirt would return it.
            xml = orig_xmldesc(dom, flags)
            defined = latest_xml(dom._connection.hostname, dom.UUIDString())
            if defined is None:
                return xml
            return with_rdt_metadata(xml, defined)

        def _mark_running(conn, dom):
            # libvirt makes a domain's resctrl groups before its vCPUs
            # run, and refuses the start when it cannot.
            host = hosts.get(conn.hostname)
            if allocator and host is not None and isinstance(
                    host.emulator, emu_mount.Emulator):
                if hasattr(dom, "_def"):
                    xml = latest_xml(conn.hostname, dom.UUIDString())
                else:
                    # createXML: fakelibvirt marks the domain running
                    # before it has parsed it; its XML was just captured.
                    xml = next((c.xml for c in reversed(captured)
                                if c.hostname == conn.hostname), None)
                if xml is not None:
                    name = etree.fromstring(xml.encode()).findtext("name")
                    try:
                        allocator.allocate(_resctrl_of(host),
                                           conn._id_counter, name, xml)
                    except allocator.Refused as e:
                        raise fakelibvirt.make_libvirtError(
                            fakelibvirt.libvirtError, str(e),
                            error_code=fakelibvirt.VIR_ERR_INTERNAL_ERROR,
                            error_domain=fakelibvirt.VIR_FROM_DOMAIN) \
                            from None
            return orig_running(conn, dom)

        def _mark_not_running(conn, dom):
            host = hosts.get(conn.hostname)
            if allocator and host is not None and isinstance(
                    host.emulator, emu_mount.Emulator):
                allocator.remove(_resctrl_of(host), dom.name())
            return orig_stopped(conn, dom)

        def getCapabilities(conn):
            xml = orig_caps(conn)
            host = hosts.get(conn.hostname)
            return (inject_resctrl_caps(xml, host.cache_xml,
                                        host.memory_bandwidth_xml)
                    if host else xml)

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
                           ("createXML", createXML),
                           ("_mark_running", _mark_running),
                           ("_mark_not_running", _mark_not_running)):
            self.useFixture(fixtures.MonkeyPatch(
                f"nova.tests.fixtures.libvirt.Connection.{name}", func))
        self.useFixture(fixtures.MonkeyPatch(
            "nova.tests.fixtures.libvirt.Domain.XMLDesc", XMLDesc))

    # -- RDT hosts ------------------------------------------------------------

    def start_rdt_compute(self, hostname: str = "compute1",
                          profile: str = "gold-6252",
                          host_info: fakelibvirt.HostInfo | None = None,
                          resctrl_root: str | None = None,
                          state_path: str | None = None,
                          **kwargs) -> str:
        """Start a compute on an emulated RDT host; returns the hostname.

        Mounts the resctrl emulator for ``profile``, points ``[rdt]
        resctrl_root``/``sysfs_cpu_root`` at it (the driver reads them at
        init_host, so they are set just before this compute starts) and
        makes the host's fake libvirt report the resctrl capabilities.
        ``state_path`` is ``[rdt] state_path`` (default: a directory of
        this host's own): a lab passes its hook's, so that the compute
        reads the records the real hook writes.
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
            sysfs_cpu_root=write_host_sysfs(
                prof, banks, os.path.join(workdir, "sysfs-cpu")),
            cache_xml=cache_xml, memory_bandwidth_xml=membw_xml,
            state_path=state_path or os.path.join(workdir, "state"))
        self._rdt_hosts[hostname] = host
        self.flags(group="rdt", **host.flags())
        name = self.start_compute(hostname=hostname, host_info=host_info,
                                  **kwargs)
        if resctrl_root is not None:
            # The real libvirtd that allocates on that resctrl starts the
            # domain later, and its hook writes the decided masks.
            self.computes[hostname].driver.rdt.enforce_on_create = False
        return name

    def restart_compute_service(self, hostname, *args, **kwargs):
        """Nova's restart, with ``[rdt]`` pointed back at this host first."""
        host = self._rdt_hosts.get(hostname)
        if host is not None:
            self.flags(group="rdt", **host.flags())
        service = super().restart_compute_service(hostname, *args,
                                                  **kwargs)
        if host is not None and isinstance(host.emulator, _ExternalResctrl):
            self.computes[hostname].driver.rdt.enforce_on_create = False
        return service

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


def _resctrl_of(host: RdtHost):
    from nova_rdt.resctrl.groups import Resctrl

    return Resctrl(host.resctrl_root, sysfs_cpu=host.sysfs_cpu_root)


def with_rdt_metadata(xml: str, defined: str) -> str:
    """``xml`` with the nova-rdt ``<metadata>`` record of ``defined``."""
    from nova_rdt import naming

    tag = f"{{{naming.METADATA_NS}}}instance"
    src = etree.fromstring(defined.encode()).find(f"metadata/{tag}")
    if src is None:
        return xml
    dom = etree.fromstring(xml.encode())
    md = dom.find("metadata")
    if md is None:
        md = etree.SubElement(dom, "metadata")
    for old in md.findall(tag):
        md.remove(old)
    md.append(src)
    return etree.tostring(dom, encoding="unicode")
