"""Stage 4, and the step of every boot that hands Nova's domain to the
lab's real libvirtd: a diskless guest with Nova's ``<cachetune>``/
``<memorytune>`` and metadata, so that libvirt allocates and the hook
acts."""

from __future__ import annotations

import os
import time

from lxml import etree

from nova_rdt import exception
from nova_rdt import naming
from nova_rdt.lab.libvirtd import diskless_domain_xml

NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"
_KEEP_TUNE = ("cachetune", "memorytune")
_KEEP_META = (f"{{{naming.METADATA_NS}}}instance", f"{{{NOVA_NS}}}instance")


def domain_for_libvirt(xml: str, domain_type: str) -> tuple[str, str, str]:
    """(name, uuid, diskless domain XML) keeping Nova's RDT elements and
    metadata from a domain XML Nova defined."""
    dom = etree.fromstring(xml.encode())
    name, uuid = dom.findtext("name"), dom.findtext("uuid")
    vcpus = int(dom.findtext("vcpu") or 1)
    tune = "".join(etree.tostring(e).decode()
                   for e in dom.findall("cputune/*") if e.tag in _KEEP_TUNE)
    meta = "".join(etree.tostring(e).decode()
                   for e in dom.findall("metadata/*") if e.tag in _KEEP_META)
    out = diskless_domain_xml(name, vcpus=vcpus, domain_type=domain_type,
                              cputune=tune, metadata=meta)
    return name, uuid, out.replace(
        "<name>", f"<uuid>{uuid}</uuid>\n  <name>", 1)


def wait_record(state_path: str, uuid: str, timeout: float = 20.0) -> None:
    """Until the hook has written the domain's record."""
    path = os.path.join(state_path, "domains", f"{uuid}.json")
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the hook wrote no record for {uuid}")
        time.sleep(0.05)


class Refused(exception.NovaRdtError):
    """libvirt (or the hook) did not take the domain."""

    def __init__(self, domain: str, why: str):
        super().__init__(f"{domain}: {why}")
        self.domain = domain
        self.why = why


def realize(lab, nova_xml: str, state_path: str, out_dir: str) -> str:
    """Define and start Nova's domain on the real libvirtd, wait for the
    hook, and keep what ``virsh dumpxml`` shows (libvirt's own additions
    included) in ``<out_dir>/domains``; returns the domain name, or
    raises :class:`Refused`."""
    name, uuid, xml = domain_for_libvirt(nova_xml, lab.libvirt.domain_type)
    try:
        lab.libvirt.define(xml)
        lab.libvirt.start_domain(name)
        wait_record(state_path, uuid)
    except Exception as e:
        raise Refused(name, str(e)) from e
    ddir = os.path.join(out_dir, "domains")
    os.makedirs(ddir, exist_ok=True)
    with open(os.path.join(ddir, f"{name}.xml"), "w") as f:
        f.write(lab.libvirt.dumpxml(name))
    return name


#: The hook releases and joins in the background after a start.
HOOK_SETTLE_SECONDS = 1.0


def show(lab, scenario, outcome, say) -> None:
    say.stage(4, "Real libvirt")
    say(f"{len(outcome.realized)} domains started by the real libvirtd "
        f"from Nova's XML: {', '.join(outcome.realized)}")
    for name, why in outcome.refused:
        say(f"  refused by libvirt: {name}: {why}")
    # Let the hook finish, then check the PMD COS against OVS as
    # `nova-rdt pmd sync` would.
    time.sleep(HOOK_SETTLE_SECONDS)
    if scenario.pmd_cos:
        say("PMD COS: " + lab.agent().sync_pmd())
