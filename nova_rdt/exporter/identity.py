"""Who a resctrl group belongs to: pure, from names and the hook's records.

Kinds, as operators read them:

``instance``  libvirt's group of a Nova instance nova-rdt manages
``class``     a shared class group (``<prefix>class-<name>``)
``pmd``       the OVS-DPDK PMD COS (``<prefix>pmd``)
``host``      the root group: the host-reserved ways
``foreign``   anything else (pqos ``COS*``, other domains' groups)
"""

from __future__ import annotations

from collections.abc import Iterable
import dataclasses

from nova_rdt import naming

KINDS = ("instance", "class", "pmd", "host", "foreign")


@dataclasses.dataclass(frozen=True)
class Identity:
    kind: str
    instance_uuid: str = ""
    instance_name: str = ""
    flavor: str = ""
    rdt_class: str = ""
    # Nova's owner project: its id, and its name where the domain XML
    # gave it (records older than the field have neither).
    project_id: str = ""
    project_name: str = ""


HOST = Identity("host")
FOREIGN = Identity("foreign")


class Resolver:
    """Names groups from the hook's records (see nova_rdt.host.records)."""

    def __init__(self, prefix: str, records: Iterable):
        self.prefix = prefix
        self._by_group = {}
        self._by_name = {}
        # A group's name carries its domain id, and libvirt's cut of the
        # domain name depends on it: machine names per id, made on first
        # sight of that id.
        self._by_machine: dict[int, dict[str, Identity]] = {}
        for rec in records:
            ident = Identity("instance", rec.uuid,
                             rec.instance_name or rec.name,
                             rec.flavor or "", rec.rdt_class or "",
                             rec.project_id or "", rec.project_name or "")
            if rec.group:
                self._by_group[rec.group] = ident
            self._by_name[rec.name] = ident
        self._class_prefix = prefix + naming.CLASS_INFIX

    def resolve(self, name: str, parent: str | None = None) -> Identity:
        """``name`` of a control group, or of a monitor group in
        ``parent`` ("" for the root's monitor groups)."""
        if parent:
            # A monitor group inside a control group is part of it.
            return self.resolve(parent)
        if not name and parent is None:
            return HOST
        if name == naming.pmd_group(self.prefix):
            return Identity("pmd")
        if name.startswith(self._class_prefix):
            return Identity("class", rdt_class=name[len(self._class_prefix):])
        if name in self._by_group:
            return self._by_group[name]
        parsed = naming.libvirt_group_machine(name)
        if parsed is not None:
            domid, machine = parsed
            if domid not in self._by_machine:
                self._by_machine[domid] = {
                    naming.libvirt_machine_name(domid, n): ident
                    for n, ident in self._by_name.items()}
            ident = self._by_machine[domid].get(machine)
            if ident is not None:
                return ident
        return FOREIGN
