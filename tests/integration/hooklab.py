"""Helpers for tests of the hook, PMD COS and classes on the Host lab."""

from __future__ import annotations

import os
import time
import uuid as uuid_mod

from nova_rdt.hook.hookinput import NOVA_NS
from nova_rdt.lab import diskless_domain_xml
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.virt import config as rdt_config


def managed_domain(lab, name: str, cache_kib: int | None = None,
                   pmd_share: bool = False, rdt_class: str | None = None,
                   vcpus: int = 1,
                   mb: list[tuple[int, int, str]] | None = None,
                   nova: tuple[str, str] | None = None,
                   cache_id: int = 0, ways: int | None = None) -> str:
    """A diskless domain with nova-rdt's metadata, as the driver writes it
    (without decided masks, as an older nova-rdt wrote it: the hook then
    places it); ``nova`` = (display name, flavor) adds Nova's own
    metadata; the ways are on L3 cache id ``cache_id``."""
    meta = rdt_config.LibvirtConfigGuestMetaNovaRdt()
    meta.vcpus = set(range(vcpus))
    meta.pmd_share = pmd_share
    meta.rdt_class = rdt_class
    meta.mb = mb or []
    if ways:
        meta.cache = [(cache_id, "both", ways)]
    tune = ""
    if cache_kib:
        cpus = f"0-{vcpus - 1}" if vcpus > 1 else "0"
        tune = (f"<cachetune vcpus='{cpus}'><cache id='{cache_id}' "
                f"level='3' type='both' size='{cache_kib}' unit='KiB'/>"
                f"</cachetune>")
    metadata = meta.to_xml()
    if nova:
        metadata += (
            f'<nova:instance xmlns:nova="{NOVA_NS}">'
            f"<nova:name>{nova[0]}</nova:name>"
            f'<nova:flavor name="{nova[1]}"/></nova:instance>')
    xml = diskless_domain_xml(
        name, vcpus=vcpus, domain_type=lab.libvirt.domain_type,
        cputune=tune, metadata=metadata)
    return xml.replace("<name>", f"<uuid>{uuid_mod.uuid4()}</uuid>\n  <name>",
                       1)


def fs(lab) -> Resctrl:
    return Resctrl(lab.resctrl_root, sysfs_cpu=lab.sysfs_cpu_root)


def group_of(lab, name: str) -> str:
    """libvirt's group for domain ``name``."""
    found = [g for g in os.listdir(lab.resctrl_root)
             if g.startswith("qemu-") and f"-{name}-vcpus_" in g]
    assert len(found) == 1, (name, found)
    return found[0]


def schemata(lab, group: str = "") -> Schemata:
    with open(os.path.join(lab.resctrl_root, group, "schemata")) as f:
        return Schemata.parse(f.read())


def hook_errors(lab) -> list[str]:
    path = os.path.join(lab.log_dir, "hook.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line for line in f if " ERROR " in line]


def eventually(check, timeout: float = 15.0):
    """Poll ``check()`` until it returns a true value.

    Outside strict mode the hook works in the background, after libvirt
    returned; tests wait for its result rather than race it.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout}s: "
                                 f"{check.__doc__ or check}")
        time.sleep(0.02)
