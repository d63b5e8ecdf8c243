"""Running managed domains the hook has no record of, adopted by reconcile.

The hook's ``started`` can be cut short between libvirt's resctrl writes
and the record (a crash, a full state path): the domain then runs with
its group but without a record, its PMD share and its class.  libvirt
keeps each running domain's live XML, metadata included, in its status
file (``<run dir>/<name>.xml``, a ``<domstatus>`` around the
``<domain>``) beside ``<name>.pid``: the same thing libvirt itself reads
back on restart (qemuProcessReconnect).  Reconcile reads it and replays
the hook's ``reconnect`` for each such domain, without calling libvirt.
"""

from __future__ import annotations

import logging
import os

from lxml import etree

from nova_rdt.hook import hookinput
from nova_rdt.host import procinfo
from nova_rdt.host.agent import Agent
from nova_rdt.host.agent import ReconcileReport

LOG = logging.getLogger("nova_rdt.hook")
MAX_STATUS_BYTES = 4 * 1024 * 1024


def unrecorded(run_dir: str, recorded_names: set[str]
               ) -> list[tuple[str, bytes]]:
    """(name, domain XML) of the running domains in ``run_dir`` that have
    no record; unreadable or odd files are skipped (said at debug)."""
    try:
        names = sorted(os.listdir(run_dir))
    except OSError as e:
        LOG.debug("adopt: cannot list %s: %s", run_dir, e)
        return []
    out = []
    for fname in names:
        if not fname.endswith(".pid"):
            continue
        name = fname[:-len(".pid")]
        if name in recorded_names:
            continue
        try:
            with open(os.path.join(run_dir, fname)) as f:
                pid = int(f.read().strip())
            if not procinfo.is_running(pid, None):
                continue
            with open(os.path.join(run_dir, f"{name}.xml"), "rb") as f:
                raw = f.read(MAX_STATUS_BYTES + 1)
        except (OSError, ValueError) as e:
            LOG.debug("adopt: %s: %s", name, e)
            continue
        domain = domain_xml(raw)
        if domain is not None:
            out.append((name, domain))
    return out


def domain_xml(raw: bytes) -> bytes | None:
    """The ``<domain>`` of a libvirt status file (or a bare domain)."""
    if len(raw) > MAX_STATUS_BYTES:
        return None
    parser = etree.XMLParser(resolve_entities=False, no_network=True,
                             huge_tree=False, remove_comments=True)
    try:
        root = etree.fromstring(raw, parser)
    except etree.XMLSyntaxError:
        return None
    dom = root if root.tag == "domain" else root.find("domain")
    if dom is None:
        return None
    return etree.tostring(dom)


def adopt(agent: Agent, report: ReconcileReport) -> None:
    """Replay ``reconnect`` for each unrecorded managed running domain."""
    recs, _bad = agent.records.all()
    for name, xml in unrecorded(agent.settings.libvirt_qemu_run_dir,
                                {r.name for r in recs}):
        try:
            event = hookinput.parse([name, "reconnect", "begin", "-"], xml)
        except hookinput.HookInputError as e:
            LOG.debug("adopt: %s: %s", name, e)
            continue
        if event is None or event.managed is None:
            continue
        if agent.records.has_file(event.uuid):
            # Its record is there but unreadable: reconcile reports it
            # (records_unreadable) and leaves it for the operator to
            # read; adopting would overwrite that evidence.
            LOG.warning("reconcile: not adopting running %s (%s): its "
                        "record file is unreadable and left in place",
                        name, event.uuid)
            continue
        try:
            agent.started(event)
        except Exception as e:          # one domain; the others go on
            LOG.error("reconcile: cannot adopt running %s (%s): %s", name,
                      event.uuid, e)
            continue
        report.adopted.append(event.uuid)
        LOG.info("reconcile: adopted running %s (%s): no record of it",
                 name, event.uuid)
