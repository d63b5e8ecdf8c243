"""RDTFilter against the compute's own claim, on random hosts (issue 38).

Each trial is one host: a profile (gold-6252 with and without a PMD
base, PMD cores on one socket or both, 0-3 classes; e5-2658-v3;
gold-6252-cdp; amd-epyc with one L3 per NUMA cell or several, as NPS1
and NPS2 give), with or without NUMA, compaction on or off.  A random
sequence of boots (plain, PMD sharers, class members, pinned or not),
stops, starts and deletes runs through a real
:class:`~nova_rdt.virt.placer.Placer` and :class:`RdtCompute`'s own
decision; libvirt's allocator is emulated as DESIGN section 8 reads it
(sizes only, the smallest free contiguous run, lowest ways first, "Not
enough room" otherwise).  After every step, for every probe request,
``RDTFilter.host_passes`` on the document the compute publishes is
compared with the compute's own decision (a dry-run claim): a pass the
compute refuses is a late refusal and a reschedule, a refusal where it
accepts is a No valid host while there is room.  Every start of an
accepted boot must find its run in libvirt's allocator.  The document
carries the claim's solver input, which RDTFilter answers with the
claim.  The second instance of a multi-create is compared too, pinned guests
where Nova's fit puts them next to the first.

The resctrl side is held in memory (a :class:`HostView` per walk), so
the whole run is pure and takes seconds.  ``NOVA_RDT_DIFF_TRIALS`` sets
the number of trials (default 120); the figures are printed with ``-s``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import itertools
import os
import random

import pytest

nova = pytest.importorskip("nova", reason="needs nova (the nova extra)")

from nova import exception  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.virt import hardware  # noqa: E402

from nova_rdt import naming  # noqa: E402
from nova_rdt.allocation import hostlayout  # noqa: E402
from nova_rdt.allocation import planner  # noqa: E402
from nova_rdt.allocation import rdtclass  # noqa: E402
from nova_rdt.allocation import spec  # noqa: E402
from nova_rdt.emulator import topology  # noqa: E402
from nova_rdt.host import settings as settings_mod  # noqa: E402
from nova_rdt.resctrl import capabilities as caps_mod  # noqa: E402
from nova_rdt.resctrl import cbm  # noqa: E402
from nova_rdt.resctrl.hostview import GroupState  # noqa: E402
from nova_rdt.resctrl.hostview import HostView  # noqa: E402
from nova_rdt.scheduler import filter as rdt_filter  # noqa: E402
from nova_rdt.virt import placer as placer_mod  # noqa: E402
from nova_rdt.virt import rdt_compute  # noqa: E402
from tests.kernel_fixtures import make_kernel  # noqa: E402
from tests.kernel_fixtures import materialize  # noqa: E402

objects.register_all()

PREFIX = "nova-rdt-"
PMD = naming.pmd_group(PREFIX)
CLASS_POOL = ("be:l3_ways=2", "gold:l3_ways=3", "one:l3_ways=1")
CPUS_PER_ID = 4          # a small CPU model: Nova's NUMA fit stays cheap


# -- resctrl in memory ------------------------------------------------------

_CAPS: dict[str, caps_mod.Capabilities] = {}


def capabilities(profile: str, tmp_root: str) -> caps_mod.Capabilities:
    """The emulator's kernel model of ``profile``, read once as files by
    the library's own discovery."""
    caps = _CAPS.get(profile)
    if caps is None:
        k, _, _ = make_kernel(profile)
        root = materialize(k, os.path.join(tmp_root, profile, "resctrl"))
        cpu = topology.write_tree(k.profile,
                                  os.path.join(tmp_root, profile, "cpu"))
        caps = _CAPS[profile] = caps_mod.discover(root, cpu)
    return caps


class MemFs:
    """resctrl as the placer sees it: groups in memory, one HostView per
    walk (counted), writes merged as the kernel merges partial lines."""

    def __init__(self, caps: caps_mod.Capabilities):
        self.caps = caps
        self.prefix = PREFIX
        # name -> (schemata: resource -> id -> mask, cpus)
        self.groups: dict[str, tuple[dict, tuple]] = {}
        self.walks = 0
        self.picked: dict[str, dict] = {}   # libvirt's choice per group

    def resources(self):
        return [r for r in ("L3", "L3CODE", "L3DATA") if r in self.caps.cache]

    def ids(self):
        return sorted(self.caps.cache[self.resources()[0]].domains)

    def cbm_len(self):
        return self.caps.cache[self.resources()[0]].cbm_len

    def collect(self, _fs=None) -> HostView:
        self.walks += 1
        out = []
        for name, (sch, cpus) in sorted(self.groups.items()):
            owner = "root" if name == "/" else (
                "nova-rdt" if name.startswith(PREFIX) else "libvirt")
            out.append(GroupState(name, "ctrl", owner, None, "shareable",
                                  {r: dict(m) for r, m in sch.items()},
                                  tuple(cpus), 0))
        return HostView(self.caps, out)

    @contextlib.contextmanager
    def locked(self):
        yield

    def group(self, name):
        assert name in self.groups, name
        return name

    def write_schemata(self, name, update, allow_libvirt=False, **_kw):
        if not allow_libvirt:
            assert name.startswith(PREFIX), name   # never another's group
        sch, cpus = self.groups[name]
        for res, per in update.lines.items():
            for cid, mask in per.items():
                cbm.check(mask, self.caps.cache[res].cbm_len,
                          max(self.caps.cache[res].min_cbm_bits, 1),
                          self.caps.cache[res].sparse_masks)
                sch.setdefault(res, {})[cid] = mask

    def put(self, name, masks, cpus=()):
        self.groups[name] = ({r: dict(m) for r, m in masks.items()},
                             tuple(cpus))

    def used(self, res, cid) -> int:
        """virResctrlAllocGetUnused's "used": the default group's ways
        and every other control group's, whoever owns it (the PMD COS,
        nova-rdt's class groups, other domains')."""
        used = 0
        for sch, _ in self.groups.values():
            used |= sch.get(res, {}).get(cid, 0)
        return used

    def libvirt_allocate(self, name, ways) -> None:
        """virResctrlAllocFindUnused: per named cache, the smallest free
        run that fits, lowest ways first; the root's mask elsewhere."""
        root = self.groups["/"][0]
        masks = {}
        for res in self.resources():
            for cid in self.ids():
                n = ways.get(res, {}).get(cid, 0)
                if not n:
                    masks.setdefault(res, {})[cid] = root[res][cid]
                    continue
                free = cbm.full_mask(self.cbm_len()) & ~self.used(res, cid)
                fits = [r for r in cbm.runs(free) if r.length >= n]
                if not fits:
                    raise NotEnoughRoom(f"Not enough room for {n} ways of "
                                        f"{res} cache {cid}")
                best = min(fits, key=lambda r: (r.length, r.start))
                masks.setdefault(res, {})[cid] = cbm.Run(best.start, n).mask
        self.put(name, masks)
        self.picked[name] = masks


class NotEnoughRoom(Exception):
    pass


# -- one host ---------------------------------------------------------------

@dataclasses.dataclass
class Setup:
    profile: str
    reserved: int
    pmd_cos: bool
    pmd_ways: int
    pmd_ids: tuple          # cache ids whose CPUs run PMD threads
    classes: tuple
    compaction: bool
    cells: dict | None      # host cell -> cache ids; None: no NUMA


def random_setup(rng: random.Random, profile: str | None = None) -> Setup:
    """``profile``: this one instead of a random one."""
    drawn = rng.choice(["gold-6252", "gold-6252", "e5-2658-v3",
                        "gold-6252-cdp", "amd-epyc"])
    profile = profile or drawn
    reserved = 4 if profile == "e5-2658-v3" else 2
    pmd_cos = rng.random() < 0.6
    pmd_ways = rng.choice([0, 2]) if pmd_cos else 0
    ids = (0, 1, 2, 3) if profile == "amd-epyc" else (0, 1)
    pmd_ids = rng.choice([ids, ids[:1]])
    classes = tuple(rng.sample(CLASS_POOL, rng.randint(0, 3)))
    cells = None
    if rng.random() < 0.6:
        if profile == "amd-epyc":
            cells = rng.choice([{0: ids},                       # NPS1
                                {0: ids[:2], 1: ids[2:]},       # NPS2
                                {i: (i,) for i in ids}])        # NPS4
        else:
            cells = {i: (i,) for i in ids}
    return Setup(profile, reserved, pmd_cos, pmd_ways, pmd_ids, classes,
                 rng.random() < 0.3, cells)


def cache_cpus(ids):
    return {cid: frozenset(range(cid * CPUS_PER_ID, (cid + 1) * CPUS_PER_ID))
            for cid in ids}


_FIT = object()


class Host:
    """One compute: resctrl in memory, its Placer and RdtCompute, and
    Nova's view of its NUMA cells."""

    def __init__(self, s: Setup, tmp_root: str):
        self.s = s
        caps = capabilities(s.profile, tmp_root)
        self.fs = MemFs(caps)
        layout = hostlayout.plan(caps, s.reserved, s.pmd_ways)
        self.fs.put("/", layout.root.lines)
        ids = self.fs.ids()
        self.cache_cpus = cache_cpus(ids)
        if s.pmd_cos:
            pmd = layout.pmd.lines if layout.pmd else layout.root.lines
            cpus = sorted(c for cid in s.pmd_ids
                          for c in list(self.cache_cpus[cid])[:1])
            self.fs.put(PMD, {r: m for r, m in pmd.items()
                              if r in self.fs.resources()}, cpus)
        self.classes = rdtclass.parse_all(list(s.classes))
        self.placer = placer_mod.Placer(
            self.fs, self.classes, s.reserved, s.pmd_ways, s.pmd_cos,
            compaction=s.compaction, collect=self.fs.collect)
        self.rc = rdt_compute.RdtCompute(host=None)
        self.rc.placer = self.placer
        self.host_cells = {}
        self.numa = None
        if s.cells is not None:
            self.host_cells = {
                cell: frozenset().union(*(self.cache_cpus[c] for c in cids))
                for cell, cids in s.cells.items()}
            self.numa = nova_numa(self.host_cells)
        self.domains: dict[str, tuple[str, Boot]] = {}   # uuid -> domain
        self.one_run_starts = 0     # cache ids a start found its run on
        self.running: set[str] = set()
        self.n = itertools.count(1)

    # The compute's two answers -------------------------------------------

    def published(self) -> dict:
        """What the compute publishes: the state, with its claim's solver
        input (the claim's own, ``Placer._inputs``, on the same walk)."""
        view = self.fs.collect()
        state = self.placer.published(view, self.cache_cpus, None,
                                      self.host_cells)
        _owners, host, book, groups = self.placer._inputs(view)
        assert state.solver is not None
        assert (state.solver.host, state.solver.reservations) == (host, book)
        assert state.solver.compaction == self.s.compaction
        return state.to_stats()

    def decide(self, boot: Boot, uuid: str, dry_run: bool,
               topology=_FIT):
        """RdtCompute's own decision (spawn's extend_guest path), on
        ``topology`` (default: Nova's fit on this host)."""
        view = self.fs.collect()
        state = self.placer.state_of(view, self.cache_cpus, None,
                                     self.host_cells)
        allocated = naming.LibvirtMachines(
            g.name for g in view.groups if g.kind == "ctrl")
        inst = Instance(uuid, f"instance-{uuid}", boot.vcpus,
                        boot.fitted(self) if topology is _FIT else topology)
        return self.rc.decide(inst, boot.request(), inst.numa_topology,
                              state, allocated, self.host_cells,
                              exception.ComputeResourcesUnavailable,
                              dry_run=dry_run, view=view)

    def accepts(self, boot: Boot, topology=_FIT) -> tuple[bool, str]:
        try:
            self.decide(boot, "probe", dry_run=True, topology=topology)
        except (planner.CannotHonour,
                exception.ComputeResourcesUnavailable) as e:
            return False, str(e)
        return True, ""

    # Lifecycle ------------------------------------------------------------

    def boot(self, boot: Boot) -> str | None:
        uuid = f"u{next(self.n)}"
        try:
            self.decide(boot, uuid, dry_run=False)
        except (planner.CannotHonour, exception.ComputeResourcesUnavailable):
            return None
        self.domains[uuid] = (f"instance-{uuid}", boot)
        self.start(uuid)
        return uuid

    def start(self, uuid: str) -> None:
        """As RdtCompute.starting: room made, libvirt allocates from the
        sizes, the decided masks written; a class member's group is made
        by the hook at its decided masks."""
        domain, boot = self.domains[uuid]
        ways = self.placer.masks_of(uuid)
        with self.placer.starting():
            self.placer.make_room(uuid)
            if ways and any(ways.values()):
                sizes = {r: {c: bin(m).count("1") for c, m in per.items()}
                         for r, per in ways.items()}
                # The decided masks are one run each, free for libvirt's
                # allocator now that the room is made (sparse masks or
                # not): it finds a run, whichever it picks.
                for res, per in ways.items():
                    for cid, mask in per.items():
                        assert cbm.is_contiguous(mask), (uuid, res, cid)
                        assert not mask & self.fs.used(res, cid), \
                            (uuid, res, cid, mask)
                        self.one_run_starts += 1
                self.fs.libvirt_allocate(f"qemu-{next(self.n)}-{domain}-"
                                         f"vcpus_0", sizes)
                _group, seen = self.placer.enforce_seen(uuid)
                # What the compute publishes after the start comes from
                # the walk enforce read, with its writes laid over it:
                # it must be what a new walk reads.
                walks = self.fs.walks
                fresh = self.fs.collect()
                self.fs.walks = walks
                assert self.placer.published(seen, self.cache_cpus, None,
                                             self.host_cells) == \
                    self.placer.published(fresh, self.cache_cpus, None,
                                          self.host_cells)
                assert {g.name: g.schemata for g in seen.groups} == \
                    {g.name: g.schemata for g in fresh.groups}
        if boot.cls:
            group = naming.class_group(PREFIX, boot.cls)
            if group not in self.fs.groups:
                self.fs.put(group, self.placer.class_masks(boot.cls))
        self.running.add(uuid)

    def stop(self, uuid: str) -> None:
        domain, boot = self.domains[uuid]
        for name in [g for g in self.fs.groups if g.endswith(
                f"-{domain}-vcpus_0")]:
            del self.fs.groups[name]
        self.running.discard(uuid)
        self._drop_empty_class(boot.cls, uuid, running_only=True)

    def delete(self, uuid: str) -> None:
        self.stop(uuid)
        _domain, boot = self.domains.pop(uuid)
        self.placer.release(uuid)

    def power_on(self, uuid: str) -> None:
        _domain, boot = self.domains[uuid]
        self.decide(boot, uuid, dry_run=False)
        self.start(uuid)

    def _drop_empty_class(self, cls, gone, running_only):
        """The hook removes a class group its last running member left."""
        if not cls:
            return
        if not any(b.cls == cls and u in self.running
                   for u, (_d, b) in self.domains.items() if u != gone):
            self.fs.groups.pop(naming.class_group(PREFIX, cls), None)


def nova_numa(host_cells):
    """Nova's host cells: of each L3's CPUs, the first half shared, the
    rest dedicated (pinned guests land on those)."""
    def shared(c):
        return c % CPUS_PER_ID < CPUS_PER_ID // 2

    return objects.NUMATopology(cells=[
        objects.NUMACell(
            id=cell, socket=cell, cpuset={c for c in cpus if shared(c)},
            pcpuset={c for c in cpus if not shared(c)},
            memory=65536, memory_usage=0, cpu_usage=0, pinned_cpus=set(),
            siblings=[{c} for c in sorted(cpus)],
            mempages=[objects.NUMAPagesTopology(size_kb=4,
                                                total=65536 * 256, used=0)],
            network_metadata=objects.NetworkMetadata(physnets=set(),
                                                     tunneled=False))
        for cell, cpus in sorted(host_cells.items())])


@dataclasses.dataclass(frozen=True)
class Instance:
    uuid: str
    name: str
    vcpus: int
    numa_topology: object

    @property
    def flavor(self):
        return objects.Flavor(vcpus=self.vcpus)


@dataclasses.dataclass(frozen=True)
class Boot:
    """One flavor's rdt: request, and its NUMA shape."""

    ways: int = 0
    share: bool = False
    cls: str | None = None
    pinned: bool = False
    numa: bool = False
    vcpus: int = 2

    def extra(self):
        if self.cls:
            return {"rdt:class": self.cls}
        out = {"rdt:l3_cache_ways": str(self.ways)}
        if self.share:
            out["rdt:pmd_share"] = "true"
        return out

    def request(self):
        return spec.parse(self.extra(), self.vcpus, 1)

    def topology(self):
        if not (self.numa or self.pinned):
            return None
        cpus = set(range(self.vcpus))
        return objects.InstanceNUMATopology(cells=[objects.InstanceNUMACell(
            id=0, cpuset=set() if self.pinned else cpus,
            pcpuset=cpus if self.pinned else set(), memory=512,
            cpu_policy="dedicated" if self.pinned else None)])

    def fitted(self, host: Host):
        """The instance's NUMA topology as Nova's claim fits it."""
        topo = self.topology()
        if topo is None or host.numa is None:
            return None
        return hardware.numa_fit_instance_to_host(host.numa, topo,
                                                  provider_mapping=None)

    def spec_obj(self):
        return objects.RequestSpec(
            flavor=objects.Flavor(flavorid="f", vcpus=self.vcpus,
                                  memory_mb=512, root_gb=1, ephemeral_gb=0,
                                  swap=0, extra_specs=self.extra()),
            numa_topology=self.topology(), pci_requests=None,
            num_instances=1, requested_resources=[],
            instance_uuid="00000000-0000-0000-0000-000000000000")


_LOADS = itertools.count()


def filter_passes(host: Host, boot: Boot, stats=None) -> bool:
    hs = host_manager.HostState("h", "h", "cell")
    hs.stats = stats if stats is not None else host.published()
    hs.num_instances = 0
    hs.numa_topology = host.numa
    hs.limits = {}
    hs.pci_stats = None
    hs.updated = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) \
        + datetime.timedelta(seconds=next(_LOADS))
    return rdt_filter.RDTFilter().host_passes(hs, boot.spec_obj())


def random_boot(rng: random.Random, host: Host) -> Boot:
    s = host.s
    numa = s.cells is not None and rng.random() < 0.7
    pinned = numa and rng.random() < 0.6
    if host.classes and rng.random() < 0.25:
        return Boot(cls=rng.choice(sorted(host.classes)), numa=numa,
                    pinned=pinned)
    return Boot(ways=rng.randint(1, host.fs.cbm_len() - 1),
                share=s.pmd_cos and rng.random() < 0.4, numa=numa,
                pinned=pinned)


def probes(rng: random.Random, host: Host, k: int) -> list[Boot]:
    return [random_boot(rng, host) for _ in range(k)]


def multi_create(host: Host, boot: Boot, stats: dict
                 ) -> tuple[bool, bool] | None:
    """The second instance of a two-instance request, after the first
    went to this host: (the filter passes it, the compute accepts it);
    None where Nova's NUMA fit refuses either (not RDT's business).

    The filter runs in Nova's loop (filter, consume, filter again); the
    compute claims the first for real where Nova's fit put it, then asks
    for the second where Nova's fit puts it next to the first (its pCPUs
    taken), and the first's reservation is given back."""
    numa = boot.topology() is not None and host.numa is not None
    if numa and boot.fitted(host) is None:
        return None
    hs = host_manager.HostState("h", "h", "cell")
    hs.stats = stats
    hs.num_instances = 0
    hs.numa_topology = host.numa.obj_clone() if numa else None
    hs.limits, hs.pci_stats = {}, None
    hs.free_ram_mb = hs.total_usable_ram_mb = 1 << 20
    hs.free_disk_mb = 1 << 30
    hs.vcpus_total, hs.vcpus_used = 1024, 0
    hs.updated = None
    spec_obj = boot.spec_obj()
    spec_obj.num_instances = 2
    f = rdt_filter.RDTFilter()
    f.run_filter_for_index(0)
    try:
        f.filter_all([hs], spec_obj)
    except exception.NoValidHost:
        return False, False
    hs.consume_from_request(spec_obj)
    first = spec_obj.numa_topology if numa else _FIT
    second = _FIT
    if numa:
        second = hardware.numa_fit_instance_to_host(hs.numa_topology,
                                                    boot.topology(),
                                                    provider_mapping=None)
        if second is None:
            return None
    f.run_filter_for_index(1)
    passes = bool(f.filter_all([hs], spec_obj))
    try:
        host.decide(boot, "first", dry_run=False, topology=first)
    except (planner.CannotHonour, exception.ComputeResourcesUnavailable):
        return passes, False
    try:
        accepts, _why = host.accepts(boot, topology=second)
    finally:
        host.placer.release("first")
    return passes, accepts


@dataclasses.dataclass
class Tally:
    states: int = 0
    pairs: int = 0
    late: list = dataclasses.field(default_factory=list)    # pass, refuse
    early: list = dataclasses.field(default_factory=list)   # refuse, accept
    multi: int = 0              # second instances of a multi-create
    multi_pinned: int = 0       # of them pinned where Nova's fit put them
    multi_late: list = dataclasses.field(default_factory=list)
    multi_early: list = dataclasses.field(default_factory=list)
    starts: int = 0
    no_room: list = dataclasses.field(default_factory=list)
    no_run: int = 0             # refusals for free ways in no one run


def compare(host: Host, boot: Boot, t: Tally, where: str,
            stats: dict) -> None:
    if boot.topology() is not None and host.numa is not None \
            and boot.fitted(host) is None:
        return          # NUMATopologyFilter's refusal, not RDT's
    passes = filter_passes(host, boot, stats)
    accepts, why = host.accepts(boot)
    t.pairs += 1
    t.no_run += "no contiguous run" in why
    if passes and not accepts:
        t.late.append((where, host.s, boot, why))
    elif accepts and not passes:
        t.early.append((where, host.s, boot))


def run_trial(seed: int, tmp_root: str, t: Tally, steps: int = 7,
              k: int = 6, multi: bool = False,
              profile: str | None = None) -> Host:
    rng = random.Random(seed)
    host = Host(random_setup(rng, profile), tmp_root)
    for step in range(steps):
        t.states += 1
        stats = host.published()        # what the scheduler reads now
        for boot in probes(rng, host, k):
            compare(host, boot, t, f"seed {seed} step {step}", stats)
        verdicts = None
        if multi:
            boot = random_boot(rng, host)
            verdicts = multi_create(host, boot, stats)
        if verdicts is not None:
            passes, accepts = verdicts
            t.multi += 1
            t.multi_pinned += boot.pinned and host.numa is not None
            if passes and not accepts:
                t.multi_late.append((seed, step, host.s, boot))
            elif accepts and not passes:
                t.multi_early.append((seed, step, host.s, boot))
        op = rng.random()
        try:
            if op < 0.6 or not host.domains:
                if host.boot(random_boot(rng, host)) is not None:
                    t.starts += 1
            elif op < 0.75:
                host.delete(rng.choice(sorted(host.domains)))
            elif op < 0.9:
                running = sorted(host.running)
                if running:
                    host.stop(rng.choice(running))
            else:
                stopped = sorted(set(host.domains) - host.running)
                if stopped:
                    host.power_on(rng.choice(stopped))
                    t.starts += 1
        except NotEnoughRoom as e:
            t.no_room.append((f"seed {seed} step {step}", host.s, str(e)))
            return host
    return host


def test_the_filter_and_the_compute_never_disagree(tmp_path):
    trials = int(os.environ.get("NOVA_RDT_DIFF_TRIALS", "120"))
    t = Tally()
    for seed in range(trials):
        run_trial(seed, str(tmp_path), t)
    print(f"\ndifferential: "
          f"{trials} hosts, {t.states} states, {t.pairs} "
          f"verdict pairs, {t.starts} starts; filter passes / compute "
          f"refuses: {len(t.late)}; filter refuses / compute accepts: "
          f"{len(t.early)}; libvirt found no run: {len(t.no_room)}")
    assert t.pairs > 1000
    assert not t.late, t.late[:3]
    assert not t.early, t.early[:3]
    assert not t.no_room, t.no_room[:3]


def test_sparse_hosts_agree_and_every_start_finds_its_run(tmp_path):
    """amd-epyc only (sparse masks): longer lives, so the free ways
    fragment.  The filter and the claim agree, and every accepted claim
    starts: its decided masks are one run each, free for libvirt's
    allocator after make_room (asserted in Host.start)."""
    trials = int(os.environ.get("NOVA_RDT_DIFF_TRIALS", "120")) // 3
    t = Tally()
    one_run = 0
    for seed in range(trials):
        host = run_trial(20_000 + seed, str(tmp_path), t, steps=12, k=4,
                         profile="amd-epyc")
        one_run += host.one_run_starts
    print(f"\nsparse: {trials} "
          f"hosts, {t.pairs} verdict pairs, {t.starts} starts, {one_run} "
          f"runs found, {t.no_run} refusals for free ways in no one "
          f"run; filter passes / compute refuses: {len(t.late)}; "
          f"filter refuses / compute accepts: {len(t.early)}; libvirt "
          f"found no run: {len(t.no_room)}")
    assert t.pairs > 300 and one_run > 100
    assert t.no_run > 0         # the fragmented case happens
    assert not t.late, t.late[:3]
    assert not t.early, t.early[:3]
    assert not t.no_room, t.no_room[:3]


# -- the four causes the issue names ---------------------------------------

def _host(tmp_path, **kw):
    base = dict(profile="gold-6252", reserved=2, pmd_cos=False, pmd_ways=0,
                pmd_ids=(0, 1), classes=(), compaction=False, cells=None)
    base.update(kw)
    return Host(Setup(**base), str(tmp_path))


def test_cause1_pmd_cos_off_with_shared_ways_is_refused_at_start():
    """The PMD COS off and pmd_shared_ways > 0: host preparation made a
    PMD group the planner ignored, and the compute wedged.  Refused,
    naming both options."""
    with pytest.raises(settings_mod.SettingsError,
                       match=r"pmd_shared_ways=2.*pmd_cos"):
        settings_mod.HookSettings(pmd_cos=False, pmd_shared_ways=2)
    settings_mod.HookSettings(pmd_cos=True, pmd_shared_ways=2)
    settings_mod.HookSettings(pmd_cos=False, pmd_shared_ways=0)


def test_cause2_a_class_that_needs_a_move_is_not_refused_late(tmp_path):
    host = _host(tmp_path, classes=("be:l3_ways=2", "gold:l3_ways=3"))
    first = host.boot(Boot(ways=2))
    assert host.boot(Boot(cls="be")) is not None
    assert host.boot(Boot(ways=3)) is not None
    host.delete(first)
    gold = Boot(cls="gold")
    accepts, why = host.accepts(gold)
    assert filter_passes(host, gold) == accepts, why
    assert accepts, why
    assert host.boot(gold) is not None


def test_cause3_a_pinned_guest_is_judged_on_its_pinned_cpus_l3(tmp_path):
    """amd-epyc NPS1: one NUMA cell over four L3s.  A pinned guest uses
    only its pCPUs' L3, which Nova's pinning names."""
    host = _host(tmp_path, profile="amd-epyc",
                 cells={0: (0, 1, 2, 3)})
    # Fill every L3 but the one Nova pins the guest onto.
    pinned = Boot(ways=13, pinned=True)
    topo = pinned.fitted(host)
    pcpus = set(topo.cells[0].cpu_pinning.values())
    mine = {cid for cid, cpus in host.cache_cpus.items() if cpus & pcpus}
    others = {cid for cid in host.cache_cpus if cid not in mine}
    ways = {"L3": {cid: 13 for cid in others}}
    host.placer.claim("filler", "instance-filler", ways)
    host.domains["filler"] = ("instance-filler", Boot(ways=13))
    host.start("filler")
    accepts, why = host.accepts(pinned)
    assert accepts, why
    assert filter_passes(host, pinned)


def test_cause4_fragmented_sparse_ways_are_no_room_for_libvirt(tmp_path):
    """amd-epyc: free ways that are no run pass nothing: libvirt finds
    only contiguous runs.  Both refuse; with compaction a run is made
    and the start finds it."""
    for compaction in (False, True):
        host = _host(tmp_path / str(compaction), profile="amd-epyc",
                     compaction=compaction)
        booted = [host.boot(Boot(ways=n)) for n in (2, 3, 3, 4, 2)]
        assert None not in booted
        host.delete(booted[0])
        host.delete(booted[2])          # free: 2 ways and 3 ways, apart
        four = Boot(ways=4)
        accepts, why = host.accepts(four)
        assert filter_passes(host, four) == accepts \
            == compaction
        if not compaction:
            assert "5 ways free, but no contiguous run of 4: libvirt " \
                "allocates a contiguous run" in why, why
        if compaction:
            assert host.boot(four) is not None       # libvirt found a run


def test_libvirt_picking_another_run_is_overwritten_with_the_decided_one(
        tmp_path):
    """amd-epyc: a stopped instance's kept ways (2-3) are free to
    libvirt, whose best fit for a new 2-way instance is exactly there;
    the claim decided 7-8, and the start writes 7-8 over libvirt's
    choice before the guest runs."""
    host = _host(tmp_path, profile="amd-epyc")
    a = host.boot(Boot(ways=2))
    assert host.boot(Boot(ways=3)) is not None
    host.stop(a)
    c = host.boot(Boot(ways=2))
    decided = host.placer.masks_of(c)["L3"]
    group = next(g for g in host.fs.groups if g.endswith(f"instance-{c}-"
                                                          "vcpus_0"))
    assert host.fs.picked[group]["L3"][0] == 0b1100          # libvirt's
    assert decided[0] == 0b110000000                         # the plan's
    assert host.fs.groups[group][0]["L3"] == dict(decided)


# -- what No valid host says -------------------------------------------------

def test_no_valid_host_names_the_rdt_hosts_reason_not_a_plain_hosts(
        tmp_path):
    """One host without RDT and one without a free CLOS: the fault says
    what the RDT host lacks, in English."""
    host = _host(tmp_path, profile="e5-2658-v3", reserved=4)
    for _ in range(3):                  # e5-2658-v3: 3 CLOS past the root
        assert host.boot(Boot(ways=2)) is not None
    boot = Boot(ways=2)
    rdt = host_manager.HostState("a", "a", "cell")
    rdt.stats = host.published()
    plain = host_manager.HostState("b", "b", "cell")
    plain.stats = {}
    for hs in (rdt, plain):
        hs.numa_topology, hs.limits, hs.pci_stats = None, {}, None
        hs.num_instances, hs.updated = 0, None
    f = rdt_filter.RDTFilter()
    f.run_filter_for_index(0)
    with pytest.raises(exception.NoValidHost) as ctx:
        f.filter_all([plain, rdt], boot.spec_obj())
    # The compute claim's own words.
    why = ("no CLOS left for the new instance: the host's reservations "
           "and classes would need 4 CLOS, and 3 are available")
    assert str(ctx.value) == (
        "No valid host was found. RDTFilter: no host can give this "
        f"flavor's rdt: request: {why}")


# -- walks of resctrl per spawn ---------------------------------------------

@pytest.mark.parametrize("share", [False, True])
def test_a_spawn_walks_resctrl_three_times(tmp_path, share):
    """The claim decides on the walk that built the guest's config (the
    publication after it reuses that walk: only the book changed); the
    start walks once to make room and once, after libvirt made the
    group, to write the decided masks, and the publication after the
    start reads that walk with the writes laid over it (checked equal to
    a new walk in Host.start)."""
    host = _host(tmp_path, pmd_cos=True, pmd_ways=2,
                 classes=("be:l3_ways=2",))
    assert host.boot(Boot(ways=2)) is not None
    before = host.fs.walks
    assert host.boot(Boot(ways=3, share=share)) is not None
    assert host.fs.walks - before == 3


def test_a_multi_create_second_instance(tmp_path):
    """The filter counts a request's earlier instances on the published
    document (as Nova's consume_from_request counts their RAM); the
    compute then places the next one, as it places the first."""
    trials = int(os.environ.get("NOVA_RDT_DIFF_TRIALS", "120")) // 2
    t = Tally()
    for seed in range(trials):
        run_trial(10_000 + seed, str(tmp_path), t, k=0, multi=True)
    print(f"\nmulti-create: {t.multi} second instances ({t.multi_pinned} "
          f"pinned next to the first); filter passes / "
          f"compute refuses: {len(t.multi_late)}; filter refuses / compute "
          f"accepts: {len(t.multi_early)}")
    assert t.multi > 100 and t.multi_pinned > 10
    assert not t.multi_late, t.multi_late[:3]
    assert not t.multi_early, t.multi_early[:3]
