"""libvirt's hook input, read as hostile.

libvirt runs ``/etc/libvirt/hooks/qemu NAME OPERATION SUB-OPERATION EXTRA``
as root with the domain XML on stdin.  A tenant chooses none of it
directly, but domain names and XML pass through many hands, so nothing
here trusts them: the XML parser resolves no entities and loads no DTD,
its size is bounded, the name must be a single safe path component and
match the XML, the uuid must be a uuid, and only domains carrying
nova-rdt's metadata are acted on.  Pure: no I/O beyond the bytes given.
"""

from __future__ import annotations

import uuid as uuid_mod

from lxml import etree

from nova_rdt import exception
from nova_rdt import naming
from nova_rdt.allocation import metadata
from nova_rdt.host.events import HookEvent
from nova_rdt.host.events import Managed

NOVA_RDT_NS = naming.METADATA_NS
NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"
MAX_XML_BYTES = 4 * 1024 * 1024
MAX_NAME = naming.MAX_DOMAIN_NAME

# Operations acted on; libvirt has others (start, stopped, attach...).
HANDLED = ("prepare", "started", "release", "migrate", "restore",
           "reconnect")


class HookInputError(exception.NovaRdtError, ValueError):
    """The input is malformed or unsafe; never acted on."""


def safe_name(name: str) -> str:
    """The domain name, if it can be used as one path component."""
    try:
        return naming.check_domain_name(name)
    except ValueError as e:
        raise HookInputError(str(e)) from None


def _parse_xml(data: bytes):
    if len(data) > MAX_XML_BYTES:
        raise HookInputError(f"domain XML of {len(data)} bytes refused "
                             f"(limit {MAX_XML_BYTES})")
    parser = etree.XMLParser(resolve_entities=False, no_network=True,
                             load_dtd=False, dtd_validation=False,
                             huge_tree=False, remove_pis=True)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as e:
        raise HookInputError(f"domain XML does not parse: {e}") from None
    if root.getroottree().docinfo.internalDTD is not None \
            or root.getroottree().docinfo.doctype:
        raise HookInputError("domain XML with a DOCTYPE refused")
    return root


def parse_managed(meta) -> Managed:
    """nova-rdt's metadata, read by the class the driver writes it with."""
    try:
        rec = metadata.RdtMetadata.parse_dom(meta)
    except metadata.MetadataError as e:
        raise HookInputError(str(e)) from None
    return Managed(vcpus=rec.vcpus, pmd_share=rec.pmd_share,
                   rdt_class=rec.rdt_class, monitor=rec.monitor,
                   mb_mbps=rec.mb_mbps(), slo=rec.slo,
                   masks=tuple(sorted(rec.masks.items())),
                   cache=tuple(rec.cache),
                   class_masks=tuple(sorted(rec.class_masks.items())))


def parse(argv: list[str], stdin: bytes) -> HookEvent | None:
    """The event, or None when the operation is not one we act on."""
    if len(argv) < 2:
        raise HookInputError("expected NAME OPERATION [SUB-OPERATION "
                             "[EXTRA]] as arguments")
    name, operation = argv[0], argv[1]
    sub_operation = argv[2] if len(argv) > 2 else "-"
    if operation not in HANDLED:
        return None
    name = safe_name(name)
    root = _parse_xml(stdin)
    if root.tag != "domain":
        raise HookInputError(f"expected a <domain>, got <{root.tag}>")
    xml_name = root.findtext("name")
    if xml_name != name:
        raise HookInputError(f"domain name {name!r} does not match the "
                             f"XML's {xml_name!r}")
    raw_uuid = (root.findtext("uuid") or "").strip()
    try:
        uuid = str(uuid_mod.UUID(raw_uuid))
    except ValueError:
        raise HookInputError(f"domain uuid {raw_uuid!r} is not a "
                             f"uuid") from None
    meta = root.find(f"metadata/{{{NOVA_RDT_NS}}}instance")
    managed = parse_managed(meta) if meta is not None else None
    nova = root.find(f"metadata/{{{NOVA_NS}}}instance")
    nova_name = flavor = project_id = project_name = None
    if nova is not None:
        nova_name = _label(nova.findtext(f"{{{NOVA_NS}}}name"))
        el = nova.find(f"{{{NOVA_NS}}}flavor")
        flavor = _label(el.get("name") if el is not None else None)
        # <nova:owner><nova:project uuid="...">name</nova:project>: the
        # tenant, so that two tenants' "web-1" stay apart on dashboards.
        el = nova.find(f"{{{NOVA_NS}}}owner/{{{NOVA_NS}}}project")
        if el is not None:
            project_id = _label(el.get("uuid"))
            project_name = _label(el.text)
    return HookEvent(operation, sub_operation, name, uuid, managed,
                     nova_name, flavor, project_id, project_name)


def _label(text: str | None) -> str | None:
    """Nova's names end up in logs, metric labels and a web page: printable
    and bounded, or dropped (they only label, never decide)."""
    if not text:
        return None
    text = text.strip()[:255]
    return text if text.isprintable() else None
