"""Nova's domain XML made runnable by the lab's real libvirtd (pure).

Nova writes the domain for a host it only believes in (fakelibvirt's
NUMA topology, an instance directory on a disk image it never fetched).
What changes here, and only this:

* ``<kernel>``/``<initrd>``: the paths where Glance's kernel and ramdisk
  would have landed are replaced by the guest image's files (what the
  image brings);
* ``<disk>``: dropped; the image is a kernel and an initramfs, and the
  root disk Nova describes was never written (image creation is faked);
* host CPU sets (``vcpupin``, ``emulatorpin``) and NUMA node sets
  (``numatune``) are mapped onto this machine's CPUs and nodes, so that
  the pinning Nova chose stays a pinning, onto CPUs that exist;
* console logs go to a file the lab reads the guest's ready line from;
* only where this machine has no KVM at all (``domain type='qemu'``):
  ``<cachetune>`` and ``<memorytune>`` are taken out, because libvirt
  refuses them for non-KVM domains ("cachetune is only supported for
  KVM domains"); the caller is told what they were
  (:attr:`Realized.dropped_tune`) and says so.  Where KVM answers but
  cannot boot Linux, the domain stays kvm and its QEMU runs TCG
  (:mod:`nova_rdt.lab.tcg_qemu`): libvirt makes the groups itself.

Everything else Nova wrote stays: the domain type, vCPUs, the guest NUMA
cells, memory backing (file-backed, shared: vhost-user needs it), the
vhost-user ``<interface>`` elements, ``<cachetune>``/``<memorytune>`` and
the metadata.
"""

from __future__ import annotations

import dataclasses

from lxml import etree

from nova_rdt.resctrl import cpulist


@dataclasses.dataclass(frozen=True)
class HostMap:
    """How Nova's view of the host maps onto this machine."""

    #: Host CPUs guests may run on (Nova's CPU i goes to cpus[i % n]).
    cpus: tuple[int, ...]
    #: NUMA nodes of this machine (Nova's node i goes to nodes[i % n]).
    nodes: tuple[int, ...] = (0,)

    def __post_init__(self):
        if not self.cpus:
            raise ValueError("HostMap needs at least one CPU")
        if not self.nodes:
            raise ValueError("HostMap needs at least one NUMA node")

    def map_cpus(self, text: str) -> str:
        return _fmt(sorted({self.cpus[c % len(self.cpus)]
                            for c in cpulist.parse(text)}))

    def map_nodes(self, text: str) -> str:
        return _fmt(sorted({self.nodes[n % len(self.nodes)]
                            for n in cpulist.parse(text)}))


def _fmt(values: list[int]) -> str:
    return cpulist.format(values)


@dataclasses.dataclass(frozen=True)
class Realized:
    name: str
    uuid: str
    xml: str
    #: vhost-user sockets of the domain's interfaces, in order.
    vhostuser_sockets: tuple[str, ...]
    #: What was changed, one line each (for the report).
    changes: tuple[str, ...]
    #: The RDT elements taken out of a qemu-typed domain (XML strings).
    dropped_tune: tuple[str, ...] = ()


def for_real_libvirt(nova_xml: str, kernel: str, initrd: str,
                     hostmap: HostMap, console_log: str) -> Realized:
    """The domain to define on the lab's libvirtd; see the module doc."""
    dom = etree.fromstring(nova_xml.encode())
    changes: list[str] = []
    os_el = dom.find("os")
    if os_el is None:
        raise ValueError("Nova's domain has no <os> element")
    for tag, path in (("kernel", kernel), ("initrd", initrd)):
        el = os_el.find(tag)
        if el is None:
            raise ValueError(
                f"Nova's domain has no <os><{tag}>: the image needs "
                f"kernel_id and ramdisk_id properties")
        changes.append(f"<{tag}> {el.text} -> {path}")
        el.text = path
    devices = dom.find("devices")
    for disk in list(devices.findall("disk")):
        src = disk.find("source")
        changes.append("dropped <disk> " + (
            (src.get("file") or src.get("dev") or "") if src is not None
            else ""))
        devices.remove(disk)
    for el in dom.iterfind("cputune/*"):
        if el.get("cpuset") is not None:
            new = hostmap.map_cpus(el.get("cpuset"))
            changes.append(f"<{el.tag}{_vcpu_attr(el)}> cpuset "
                           f"{el.get('cpuset')} -> {new}")
            el.set("cpuset", new)
    for el in dom.iterfind("numatune/*"):
        if el.get("nodeset") is not None:
            new = hostmap.map_nodes(el.get("nodeset"))
            changes.append(f"<numatune><{el.tag}> nodeset "
                           f"{el.get('nodeset')} -> {new}")
            el.set("nodeset", new)
    logs = [el for tag in ("serial", "console")
            for el in devices.iterfind(f"{tag}/log")]
    if logs:
        for el in logs:
            el.set("file", console_log)
        changes.append(f"console log -> {console_log}")
    dropped = []
    if dom.get("type") == "qemu":
        cputune = dom.find("cputune")
        for el in list(cputune if cputune is not None else ()):
            if el.tag in ("cachetune", "memorytune"):
                dropped.append(etree.tostring(el, encoding="unicode"))
                cputune.remove(el)
                changes.append(f"dropped <{el.tag} vcpus='{el.get('vcpus')}'>"
                               f": libvirt allows it for KVM domains only, "
                               f"and this machine has no KVM")
    sockets = tuple(
        src.get("path") for src in devices.iterfind(
            "interface[@type='vhostuser']/source"))
    return Realized(name=dom.findtext("name"), uuid=dom.findtext("uuid"),
                    xml=etree.tostring(dom, encoding="unicode"),
                    vhostuser_sockets=sockets, changes=tuple(changes),
                    dropped_tune=tuple(dropped))


def _vcpu_attr(el) -> str:
    return f" vcpu='{el.get('vcpu')}'" if el.get("vcpu") is not None else ""
