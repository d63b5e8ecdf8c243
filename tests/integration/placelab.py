"""A compute's placement on the Host lab, driven as the driver drives it.

:class:`Compute` plays nova-compute's RDT part without Nova: a
:class:`~nova_rdt.virt.placer.Placer` on the lab's resctrl decides and
reserves each boot's ways (``claim``), the domain carries ``<cachetune>``
sizes and the decided masks in its nova-rdt metadata (as
``RdtCompute.extend_guest`` renders them), and a start is the driver's
``_create_guest``: ``virsh start --paused``, ``placer.enforce``, ``virsh
resume``, under ``placer.starting()``.  Stop keeps the reservation;
delete releases it.  The installed hook runs on every libvirt event.

:func:`check` reads the raw resctrl files (and sysfs for which cache ids
hold the PMD cores) after every step and asserts what issue 33 asks of
every step; it trusts nothing the placer says except which masks it
decided.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid as uuid_mod

from nova_rdt.lab import diskless_domain_xml
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.virt import config as rdt_config
from nova_rdt.virt import guest_rdt
from nova_rdt.virt import placer as placer_mod
from tests.integration import hooklab

PMD = "nova-rdt-pmd"
CLASS_PREFIX = "nova-rdt-class-"


@dataclasses.dataclass
class Dom:
    name: str
    uuid: str
    ways: int
    ids: tuple[int, ...]
    share: bool = False
    rdt_class: str | None = None
    running: bool = False
    # Not claimed through the placer (defined by hand, or by an older
    # nova-rdt): no decided masks in its metadata; ``expect`` is where the
    # hook must place it.
    planned: bool = True
    expect: dict[int, int] | None = None


class Compute:
    """One compute host's placement on ``lab`` (module-scoped lab, one
    Compute per test: its book starts empty)."""

    def __init__(self, lab, classes: dict, reserved_host_ways: int,
                 pmd_shared_ways: int, base: int, way_kib: int):
        self.lab = lab
        self.base = base
        self.way_kib = way_kib
        self.placer = placer_mod.Placer(
            hooklab.fs(lab), classes, reserved_host_ways, pmd_shared_ways,
            pmd_cos=True)
        self.doms: dict[str, Dom] = {}
        self.steps: list[str] = []

    # -- what the driver does -------------------------------------------

    def claim(self, name: str, ways: int, ids=(0, 1), share=False,
              rdt_class: str | None = None):
        """Decide and reserve (``placement.NoPlacement`` when no valid
        placement exists), then define the domain with the decided masks
        in its metadata."""
        uuid = str(uuid_mod.uuid4())
        per = {"L3": {cid: ways for cid in ids}} if ways else {}
        plan = self.placer.claim(uuid, name, per, pmd_share=share,
                                 rdt_class=rdt_class)
        dom = Dom(name, uuid, ways, tuple(ids) if ways else (), share,
                  rdt_class)
        self.lab.libvirt.define(self.domain_xml(dom, plan))
        self.doms[name] = dom
        return plan

    def domain_xml(self, dom: Dom, plan=None) -> str:
        meta = rdt_config.LibvirtConfigGuestMetaNovaRdt()
        meta.vcpus = {0}
        meta.pmd_share = dom.share
        meta.rdt_class = dom.rdt_class
        meta.cache = [(cid, "both", dom.ways) for cid in dom.ids]
        tune = ""
        if dom.ways:
            ct = rdt_config.LibvirtConfigGuestCacheTune({0})
            ct.caches = [rdt_config.LibvirtConfigGuestCacheTuneCache(
                cid, 3, "both", dom.ways * self.way_kib) for cid in dom.ids]
            tune = ct.to_xml()
        if plan is not None:
            meta.masks = placer_mod.metadata_masks(
                plan.instances.get(dom.uuid))
            if dom.rdt_class:
                meta.class_masks = placer_mod.metadata_masks(
                    plan.classes.get(dom.rdt_class))
        xml = diskless_domain_xml(
            dom.name, vcpus=1, domain_type=self.lab.libvirt.domain_type,
            cputune=tune, metadata=meta.to_xml())
        return xml.replace("<name>", f"<uuid>{dom.uuid}</uuid>\n  <name>", 1)

    def start(self, name: str) -> None:
        """``_create_guest``: room made, started paused, the decided masks
        written, resumed."""
        dom = self.doms[name]
        with self.placer.starting():
            # As RdtCompute.starting: nova-rdt domains the book does not
            # hold yet (started by hand) are adopted first.
            for other, d in self.doms.items():
                if d.uuid not in self.placer and d.running:
                    self.adopt(other)
            self.placer.make_room(dom.uuid)
            self.lab.libvirt.start_domain(name, paused=True)
            self.placer.enforce(dom.uuid)
        self.lab.libvirt.virsh("resume", name)
        dom.running = True
        self.settle(f"start {name}")

    def boot(self, name: str, ways: int, ids=(0, 1), share=False,
             rdt_class: str | None = None):
        plan = self.claim(name, ways, ids, share, rdt_class)
        self.start(name)
        return plan

    def start_by_hand(self, name: str, ways: int, ids=(0, 1), share=False,
                      expect: dict[int, int] | None = None) -> None:
        """A domain with nova-rdt's metadata but no decided masks, started
        straight with virsh: the hook places it (issue 33 case 13)."""
        dom = Dom(name, str(uuid_mod.uuid4()), ways, tuple(ids), share,
                  planned=False, expect=expect)
        self.lab.libvirt.define(self.domain_xml(dom))
        self.doms[name] = dom
        self.lab.libvirt.start_domain(name, paused=False)
        dom.running = True
        self.settle(f"start {name} by hand")

    def adopt(self, name: str) -> None:
        """What nova-compute's start does with a defined domain
        (``driver._rdt_adopt``): its reservation, from its metadata."""
        dom = self.doms[name]
        md = guest_rdt.read_metadata(self.lab.libvirt.dumpxml(name))
        self.placer.adopt(dom.uuid, name, md, movable=md.slo != "latency")

    def stop(self, name: str) -> None:
        """Power off: libvirt removes its group; the reservation stays."""
        self.lab.libvirt.destroy(name)
        self.doms[name].running = False
        self.settle(f"stop {name}")

    def delete(self, name: str) -> None:
        dom = self.doms.pop(name)
        if dom.running:
            self.lab.libvirt.destroy(name)
        self.lab.libvirt.undefine(name)
        self.placer.release(dom.uuid)
        self.settle(f"delete {name}")

    def delete_all(self) -> None:
        for name in list(self.doms):
            self.lab.libvirt.virsh("destroy", name, check=False)
            self.lab.libvirt.virsh("undefine", name, check=False)
            self.placer.release(self.doms.pop(name).uuid)
        wait_for_hooks()

    # -- what resctrl holds ---------------------------------------------

    def masks(self, name: str) -> dict[int, int]:
        """Domain ``name``'s L3 masks on the ids it asked, as resctrl
        holds them."""
        dom = self.doms[name]
        s = hooklab.schemata(self.lab, hooklab.group_of(self.lab, name))
        return {cid: s.get("L3", cid) for cid in dom.ids}

    def decided(self, name: str) -> dict[int, int]:
        """The masks the placer decided for ``name`` (for a domain it did
        not place, where the hook must have put it)."""
        masks = self.placer.masks_of(self.doms[name].uuid)
        if not masks and not self.doms[name].planned:
            return dict(self.doms[name].expect or {})
        return dict((masks or {}).get("L3", {}))

    def settle(self, step: str) -> None:
        """Wait for the hook's background work, then check every rule."""
        wait_for_hooks()
        self.steps.append(f"{step}: {layout(self.lab)}")
        check(self)


def wait_for_hooks(timeout: float = 30.0) -> None:
    """Until no nova-rdt hook process runs.  Outside strict mode the shim
    hands its work to a background process before libvirt returns, so
    once virsh has returned, a hook still to finish is visible here."""
    deadline = time.monotonic() + timeout
    while _hook_pids():
        if time.monotonic() > deadline:
            raise AssertionError(f"hook processes {_hook_pids()} still "
                                 f"running after {timeout}s")
        time.sleep(0.05)


def _hook_pids() -> list[int]:
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"nova_rdt.hook.main" in cmd or b"qemu.d/nova-rdt" in cmd:
            pids.append(int(entry))
    return pids


# -- the rules, from the raw files ----------------------------------------

def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def ctrl_groups(root: str) -> dict[str, Schemata]:
    """Every control group's schemata; the root is ``/``."""
    out = {"/": Schemata.parse(_read(os.path.join(root, "schemata")))}
    for entry in sorted(os.listdir(root)):
        path = os.path.join(root, entry, "schemata")
        if entry != "info" and os.path.isfile(path):
            out[entry] = Schemata.parse(_read(path))
    return out


def _cpus(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def pmd_cache_ids(lab) -> set[int]:
    """L3 ids whose CPUs hold a PMD core (the PMD group's cpus_list, and
    sysfs's cache topology)."""
    cores = _cpus(_read(os.path.join(lab.resctrl_root, PMD, "cpus_list")))
    ids = set()
    for cpu in cores:
        cache = os.path.join(lab.sysfs_cpu_root, f"cpu{cpu}", "cache")
        for index in os.listdir(cache):
            d = os.path.join(cache, index)
            if index.startswith("index") \
                    and _read(os.path.join(d, "level")).strip() == "3":
                ids.add(int(_read(os.path.join(d, "id"))))
    return ids


def span(mask: int) -> int:
    if not mask:
        return 0
    low = (mask & -mask).bit_length() - 1
    return ((1 << mask.bit_length()) - 1) & ~((1 << low) - 1)


def layout(lab) -> str:
    groups = ctrl_groups(lab.resctrl_root)
    return "; ".join(f"{n} " + " ".join(
        f"{cid}={m:x}" for cid, m in sorted(s.domains("L3").items()))
        for n, s in groups.items() if "L3" in s.resources())


def _tasks(lab, group: str) -> set[int]:
    return {int(t) for t in _read(os.path.join(
        lab.resctrl_root, group, "tasks")).split()}


def check(c: Compute) -> None:
    lab = c.lab
    root = lab.resctrl_root
    info = os.path.join(root, "info", "L3")
    cbm_len = int(_read(os.path.join(info, "cbm_mask")), 16).bit_length()
    min_bits = int(_read(os.path.join(info, "min_cbm_bits")))
    groups = ctrl_groups(root)
    host = groups["/"]
    ids = sorted(host.domains("L3"))
    running = [d for d in c.doms.values() if d.running]
    own = {d.name: hooklab.group_of(lab, d.name)
           for d in running if d.ways}
    classes = {d.rdt_class for d in running if d.rdt_class}
    # No group but the host's, the PMD COS, the running domains' and the
    # classes in use: a stopped domain's group is gone.
    assert set(groups) == ({"/", PMD} | set(own.values())
                           | {CLASS_PREFIX + n for n in classes}), \
        sorted(groups)
    # Every mask is one the kernel takes.
    for name, s in groups.items():
        for cid, m in s.domains("L3").items():
            assert m and m >> cbm_len == 0 and (m + (m & -m)) & m == 0 \
                and bin(m).count("1") >= min_bits, (name, cid, hex(m))
    pmd_ids = pmd_cache_ids(lab)
    for cid in ids:
        held = [("host", host.get("L3", cid), False)]
        for d in running:
            if d.ways and cid in d.ids:
                m = groups[own[d.name]].get("L3", cid)
                held.append((d.name, m, d.share))
                # What nova-rdt decided is what the instance holds, and it
                # is what its flavor asked for.
                assert m == c.decided(d.name)[cid], (
                    d.name, cid, hex(m), c.decided(d.name))
                assert bin(m).count("1") == d.ways, (d.name, cid, hex(m))
        for n in classes:
            m = groups[CLASS_PREFIX + n].get("L3", cid)
            want = (c.placer.class_masks(n) or {}).get("L3", {}).get(cid)
            assert want is None or m == want, (n, cid, hex(m), want)
            held.append((CLASS_PREFIX + n, m, False))
        # Instances, classes and the host pairwise disjoint (sharers too:
        # they share with the PMDs, never with each other).
        for i, (a, ma, _s) in enumerate(held):
            for b, mb, _t in held[i + 1:]:
                assert ma & mb == 0, (cid, a, hex(ma), b, hex(mb))
        pmd = groups[PMD].get("L3", cid)
        if cid in pmd_ids:
            want = c.base
            for _n, m, share in held:
                if share:
                    want |= m
            # One run over exactly the base and the sharers (and the
            # holes between them), covering nobody else's ways.
            assert pmd == span(want), (cid, hex(pmd), hex(span(want)))
            for n, m, share in held:
                assert share or pmd & m == 0, (cid, n, hex(m), hex(pmd))
        else:
            # No PMD runs here: the PMD COS holds the host's ways.
            assert pmd == host.get("L3", cid), (cid, hex(pmd))
    # Nothing that asked for isolation runs in the root group: every
    # vCPU is in its own group (or its class's).
    root_tasks = _tasks(lab, "")
    for d in running:
        group = own.get(d.name) or (CLASS_PREFIX + d.rdt_class
                                    if d.rdt_class else None)
        if group is None:
            continue
        vcpus = set(lab.libvirt.vcpu_tids(d.name).values())
        assert vcpus and vcpus <= _tasks(lab, group), (d.name, group)
        assert not vcpus & root_tasks, d.name
    # The decided masks travel with the domain, as the hook reads them.
    for d in running:
        md = guest_rdt.read_metadata(lab.libvirt.dumpxml(d.name))
        assert {cid: m for (cid, _k), m in md.masks.items()} \
            == (c.decided(d.name) if d.planned else {}), d.name
    assert hooklab.hook_errors(lab) == []
