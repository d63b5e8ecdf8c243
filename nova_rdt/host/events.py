"""What the agent acts on: a libvirt domain event, already validated.

:mod:`nova_rdt.hook.hookinput` builds these from hostile input; the
agent trusts them.  Kept here, below the hook, so that the agent does
not depend on the hook's entry point.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Managed:
    """nova-rdt's metadata of one domain."""

    vcpus: frozenset[int]
    pmd_share: bool
    rdt_class: str | None
    monitor: bool
    #: (MB domain id, MBps) that libvirt cannot set; the hook writes them.
    mb_mbps: tuple[tuple[int, int], ...] = ()
    #: rdt:slo: the runtime controller protects this instance.
    slo: str | None = None
    #: (cache id, libvirt type) -> the mask nova-rdt decided for the
    #: domain's ways, and for its class group; empty from older versions.
    masks: tuple[tuple[tuple[int, str], int], ...] = ()
    #: (cache id, libvirt type, ways) the domain asked for.
    cache: tuple[tuple[int, str, int], ...] = ()
    class_masks: tuple[tuple[tuple[int, str], int], ...] = ()


@dataclasses.dataclass(frozen=True)
class HookEvent:
    operation: str
    sub_operation: str
    name: str
    uuid: str
    managed: Managed | None       # None: not nova-rdt's, ignore
    instance_name: str | None = None    # Nova's display name, for logs
    flavor: str | None = None           # Nova's flavor name
    project_id: str | None = None       # Nova's owner project
    project_name: str | None = None
