"""A test double of libvirt's resctrl allocator, for fakelibvirt.

Nova's functional framework runs fakelibvirt, which knows nothing of
resctrl; the Nova tests' base class (:mod:`tests.functional.nova.base`)
gives it this model, so that a starting domain gets the group libvirt
would make and a stopping one loses it.  It is a double, not a part of
the product: no lab that runs the real libvirtd uses it, and
``tests/integration/test_libvirt_model_conformance.py`` holds it equal to
the real libvirtd 9.0 on the same emulated hosts (MB beside a group at
100%, CDP, a full cache, a fragmented one).  The rules follow libvirt
9.0's src/util/virresctrl.c and src/hypervisor/domain_driver.c, with its
wording:

* one allocation per distinct vCPU set; a ``<memorytune>`` over the same
  vCPUs as a ``<cachetune>`` joins its allocation (one group, one CLOS);
* free ways per cache id = all ways - the default (root) group's mask -
  every other group's mask (virResctrlAllocGetUnused);
* the new group starts from the default group's cache masks
  (virResctrlAllocCopyMasks), then each requested size becomes ways
  (size / granularity, granularity = cache size / CBM length) taken from
  the smallest free run that fits, lowest ways first
  (virResctrlAllocFindUnused, which is :func:`nova_rdt.resctrl.cbm.
  best_fit`);
* MB values are checked against the controller's granularity and
  minimum only: libvirt 9.0 does not count what other groups hold
  (a domain at 50% starts beside a group at 100%, measured);
* the group is ``<machine name>-vcpus_<list>``, the machine name being
  ``qemu-<domain id>-<name made hostname-safe>`` (at most 64 characters);
* a ``<monitor>`` over the allocation's vCPUs is the allocation's own
  group; one over fewer vCPUs is a monitor group inside it.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses

from lxml import etree

from nova_rdt import naming
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl import cpulist
from nova_rdt.resctrl.schemata import Schemata

#: libvirt's XML cache types -> resctrl's resource name suffix.
TYPE_SUFFIX = {"both": "", "code": "CODE", "data": "DATA"}
#: virScaleInteger's units (cachetune sizes).
_UNITS = {"b": 1, "bytes": 1, "k": 1024, "kib": 1024, "kb": 1000,
          "m": 1024 ** 2, "mib": 1024 ** 2, "mb": 1000 ** 2,
          "g": 1024 ** 3, "gib": 1024 ** 3, "gb": 1000 ** 3,
          "t": 1024 ** 4, "tib": 1024 ** 4, "tb": 1000 ** 4}


class TuneError(ValueError):
    """libvirt would refuse this allocation; ``str()`` says why, in
    libvirt's words where it has them."""


@dataclasses.dataclass(frozen=True)
class CacheRequest:
    cache_id: int
    level: int
    type: str          # both | code | data
    size: int          # bytes

    @property
    def resource(self) -> str:
        return f"L{self.level}{TYPE_SUFFIX[self.type]}"


@dataclasses.dataclass(frozen=True)
class Tune:
    """One allocation: the RDT elements over one vCPU set."""

    vcpus: frozenset[int]
    caches: tuple[CacheRequest, ...] = ()
    #: MB node -> bandwidth (percent).
    mb: Mapping[int, int] = dataclasses.field(default_factory=dict)
    #: vCPU sets of the ``<monitor>`` elements.
    monitors: tuple[frozenset[int], ...] = ()

    @property
    def alloc_id(self) -> str:
        return vcpus_id(self.vcpus)

    @property
    def allocates(self) -> bool:
        """False for a monitor-only tune: libvirt's allocation is then the
        default group (virResctrlAllocIsEmpty)."""
        return bool(self.caches or self.mb)


@dataclasses.dataclass(frozen=True)
class CacheInfo:
    """One cache resource as libvirt's virResctrlInfo sees it."""

    cbm_len: int
    min_cbm_bits: int
    #: cache id -> size in bytes (sysfs), None if unknown.
    sizes: Mapping[int, int | None]

    def granularity(self, cache_id: int) -> int | None:
        size = self.sizes.get(cache_id)
        return cbm.way_size(size, self.cbm_len) if size else None


@dataclasses.dataclass(frozen=True)
class MbInfo:
    granularity: int
    min_bandwidth: int
    node_ids: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class FsState:
    """The resctrl mount as the allocation needs it."""

    cache: Mapping[str, CacheInfo]       # L3, L3CODE, L3DATA, L2...
    mb: MbInfo | None
    default: Schemata                    # the root group's
    others: Mapping[str, Schemata]       # every other control group's

    def with_group(self, name: str, schemata: Schemata) -> FsState:
        return dataclasses.replace(self, others={**self.others,
                                                 name: schemata})


@dataclasses.dataclass(frozen=True)
class MonitorPlan:
    vcpus: frozenset[int]
    #: None: the allocation's own group; else a monitor group's name in
    #: ``parent``'s mon_groups ("" = the default group's).
    name: str | None
    parent: str | None


@dataclasses.dataclass(frozen=True)
class Allocation:
    """What to make: a group (None: the default group), its schemata,
    its vCPUs and monitors, and the ways each request got."""

    group: str | None
    vcpus: frozenset[int]
    schemata: Schemata | None
    #: resource -> cache id -> mask, for the requests only.
    granted: Mapping[str, Mapping[int, int]]
    monitors: tuple[MonitorPlan, ...]

    def describe(self) -> str:
        """``L3 0=0x0f0 (4 ways)`` and ``MB 0=50%`` parts, for messages."""
        parts = []
        for res, doms in self.granted.items():
            parts += [f"{res} {cid}={m:#x} ({cbm.popcount(m)} ways)"
                      for cid, m in sorted(doms.items())]
        if self.schemata is not None:
            parts += [f"MB {node}={v}%" for node, v in
                      sorted(self.schemata.domains("MB").items())]
        return ", ".join(parts) or "no allocation"


# -- names ------------------------------------------------------------------

def machine_name(domain_id: int, name: str) -> str:
    """libvirt's machine name of a privileged QEMU domain (the rule is
    :func:`nova_rdt.naming.libvirt_machine_name`)."""
    try:
        return naming.libvirt_machine_name(domain_id, name)
    except ValueError as e:
        raise TuneError(str(e)) from None


def vcpus_id(vcpus: Iterable[int]) -> str:
    """The id libvirt gives a cachetune/memorytune/monitor without one."""
    return "vcpus_" + cpulist.format(vcpus)


def group_name(domain_id: int, name: str, vcpus: Iterable[int]) -> str:
    """virResctrlAllocDeterminePath's directory name."""
    return f"{machine_name(domain_id, name)}-{vcpus_id(vcpus)}"


# -- the XML ----------------------------------------------------------------

def _int_attr(el, attr: str, what: str) -> int:
    raw = el.get(attr)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise TuneError(f"<{what}> {attr}={raw!r} is not an integer") \
            from None
    if value < 0:
        raise TuneError(f"<{what}> {attr}={raw!r} is negative")
    return value


def _vcpus(el, what: str) -> frozenset[int]:
    raw = el.get("vcpus")
    if not raw:
        raise TuneError(f"<{what}> has no vcpus attribute")
    try:
        out = frozenset(cpulist.parse(raw))
    except ValueError as e:
        raise TuneError(f"<{what} vcpus={raw!r}>: {e}") from None
    if not out:
        raise TuneError(f"<{what} vcpus={raw!r}> names no vCPU")
    return out


def _size(el) -> int:
    value = _int_attr(el, "size", "cache")
    unit = (el.get("unit") or "b").lower()
    if unit not in _UNITS:
        raise TuneError(f"<cache unit={el.get('unit')!r}> is not a unit "
                        f"libvirt knows")
    return value * _UNITS[unit]


def parse_tunes(elements: Iterable[str]) -> list[Tune]:
    """The allocations the dropped ``<cachetune>``/``<memorytune>`` XML
    strings ask for, one per distinct vCPU set, in document order."""
    by_vcpus: dict[frozenset[int], dict] = {}
    seen: dict[str, list[frozenset[int]]] = {"cachetune": [],
                                             "memorytune": []}
    for text in elements:
        try:
            el = etree.fromstring(text.encode() if isinstance(text, str)
                                  else text)
        except etree.XMLSyntaxError as e:
            raise TuneError(f"RDT element does not parse: {e}") from None
        if el.tag not in seen:
            raise TuneError(f"<{el.tag}> is not <cachetune> or "
                            f"<memorytune>")
        vcpus = _vcpus(el, el.tag)
        for other in seen[el.tag]:
            if other & vcpus:
                raise TuneError(f"Overlapping vcpus in {el.tag}s")
        seen[el.tag].append(vcpus)
        # A memorytune joins the cachetune over the same vCPUs; one over
        # overlapping but different vCPUs is refused, as libvirt does.
        for other in by_vcpus:
            if other != vcpus and other & vcpus:
                raise TuneError(f"Overlapping vcpus in resctrls: "
                                f"{cpulist.format(vcpus)} and "
                                f"{cpulist.format(other)}")
        entry = by_vcpus.setdefault(vcpus, {"caches": [], "mb": {},
                                            "monitors": []})
        for child in el:
            if not isinstance(child.tag, str):
                continue        # comments
            if el.tag == "cachetune" and child.tag == "cache":
                typ = child.get("type") or "both"
                if typ not in TYPE_SUFFIX:
                    raise TuneError(f"<cache type={typ!r}> is not one of "
                                    f"{', '.join(TYPE_SUFFIX)}")
                req = CacheRequest(_int_attr(child, "id", "cache"),
                                   _int_attr(child, "level", "cache"),
                                   typ, _size(child))
                if any((r.cache_id, r.resource) ==
                       (req.cache_id, req.resource)
                       for r in entry["caches"]):
                    raise TuneError(f"cache {req.resource} id "
                                    f"{req.cache_id} given twice")
                entry["caches"].append(req)
            elif el.tag == "memorytune" and child.tag == "node":
                node = _int_attr(child, "id", "node")
                if node in entry["mb"]:
                    raise TuneError(f"<memorytune> node {node} given twice")
                entry["mb"][node] = _int_attr(child, "bandwidth", "node")
            elif child.tag == "monitor":
                mon = _vcpus(child, "monitor")
                if not mon <= vcpus:
                    raise TuneError(
                        f"<monitor vcpus={child.get('vcpus')!r}> is not "
                        f"within its {el.tag}'s vcpus "
                        f"{cpulist.format(vcpus)}")
                if mon not in entry["monitors"]:
                    entry["monitors"].append(mon)
            else:
                raise TuneError(f"<{child.tag}> inside <{el.tag}> is not "
                                f"understood")
    return [Tune(v, tuple(e["caches"]), dict(e["mb"]), tuple(e["monitors"]))
            for v, e in by_vcpus.items()]


# -- the allocation -----------------------------------------------------------

def free_masks(state: FsState, resource: str) -> dict[int, int]:
    """Per cache id: the ways neither the default group nor any other
    group holds (virResctrlAllocGetUnused)."""
    info = state.cache[resource]
    ids = set(info.sizes) | set(state.default.domains(resource))
    out = {}
    for cid in sorted(ids):
        used = state.default.get(resource, cid) or 0
        for sch in state.others.values():
            used |= sch.get(resource, cid) or 0
        out[cid] = cbm.full_mask(info.cbm_len) & ~used
    return out


def _check_mb(tune: Tune, state: FsState) -> None:
    """virResctrlAllocMemoryBandwidth, as libvirt 9.0 behaves: no room
    check against other groups (the conformance test measures it)."""
    if not tune.mb:
        return
    if state.mb is None:
        raise TuneError("RDT Memory Bandwidth allocation unsupported")
    info = state.mb
    for node, bw in sorted(tune.mb.items()):
        if info.granularity and bw % info.granularity:
            raise TuneError(f"Memory Bandwidth allocation of size {bw} is "
                            f"not divisible by granularity "
                            f"{info.granularity}")
        if bw < info.min_bandwidth:
            raise TuneError(f"Memory Bandwidth allocation of size {bw} is "
                            f"smaller than the minimum allowed allocation "
                            f"{info.min_bandwidth}")
        if node not in info.node_ids:
            raise TuneError(f"bandwidth controller id {node} does not "
                            f"exist, max controller id "
                            f"{max(info.node_ids, default=0)}")


def _find_unused(req: CacheRequest, info: CacheInfo,
                 free: Mapping[int, int]) -> int:
    """virResctrlAllocFindUnused: the mask for one request."""
    level, cid, size = req.level, req.cache_id, req.size
    if cid not in free:
        raise TuneError(f"Cache with id {cid} does not exists for level "
                        f"{level}")
    whole = info.sizes.get(cid)
    gran = info.granularity(cid)
    if not whole or not gran:
        raise TuneError(f"the size of level {level} cache {cid} is unknown "
                        f"(no sysfs cache size): no granularity")
    if size == whole:
        raise TuneError(f"Cache allocation for the whole cache is not "
                        f"possible, specify size smaller than {whole}")
    if size % gran:
        raise TuneError(f"Cache allocation of size {size} is not divisible "
                        f"by granularity {gran}")
    need = size // gran
    if need < info.min_cbm_bits or need == 0:
        raise TuneError(f"Cache allocation of size {size} is smaller than "
                        f"the minimum allowed allocation "
                        f"{gran * max(info.min_cbm_bits, 1)}")
    mask = cbm.best_fit(free[cid], need)
    if mask is None:
        raise TuneError(f"Not enough room for allocation of {size} bytes "
                        f"for level {level} cache {cid} scope type "
                        f"'{req.type}'")
    return mask


def plan(tune: Tune, state: FsState, domain_id: int,
         name: str) -> Allocation:
    """The group libvirt would make for ``tune`` on ``state``; raises
    :class:`TuneError` where libvirt would refuse."""
    group = group_name(domain_id, name, tune.vcpus) if tune.allocates \
        else None
    machine = machine_name(domain_id, name)
    monitors = tuple(
        MonitorPlan(m, None, None) if m == tune.vcpus and group is not None
        else MonitorPlan(m, f"{machine}-{vcpus_id(m)}", group or "")
        for m in tune.monitors)
    if group is None:
        return Allocation(None, tune.vcpus, None, {}, monitors)
    _check_mb(tune, state)
    # The default group's cache masks, for every cache the request does
    # not name (virResctrlAllocCopyMasks).
    lines: dict[str, dict[int, int]] = {
        res: dict(doms) for res, doms in state.default.lines.items()
        if res in state.cache}
    granted: dict[str, dict[int, int]] = {}
    for req in tune.caches:
        if req.resource not in state.cache:
            raise TuneError(f"Cache level {req.level} does not support "
                            f"tuning for scope type '{req.type}'")
        mask = _find_unused(req, state.cache[req.resource],
                            free_masks(state, req.resource))
        lines.setdefault(req.resource, {})[req.cache_id] = mask
        granted.setdefault(req.resource, {})[req.cache_id] = mask
    ordered = {res: lines[res] for res in sorted(lines, key=_res_order)}
    if tune.mb:
        # Nodes the XML does not name keep the default group's value
        # (virResctrlAllocCopyMemBW), as cache ids do.
        ordered["MB"] = {**dict(state.default.domains("MB")),
                         **dict(sorted(tune.mb.items()))}
    return Allocation(group, tune.vcpus, Schemata(ordered), granted,
                      monitors)


def _res_order(res: str) -> tuple:
    """libvirt writes levels in order, each as unified, code, data."""
    suffix = res[2:]
    return (int(res[1]), list(TYPE_SUFFIX.values()).index(suffix)
            if suffix in TYPE_SUFFIX.values() else 9, res)


def plan_all(tunes: Iterable[Tune], state: FsState, domain_id: int,
             name: str) -> list[Allocation]:
    """Every tune's allocation, each seeing the groups made before it."""
    out = []
    for tune in tunes:
        alloc = plan(tune, state, domain_id, name)
        if alloc.group is not None:
            state = state.with_group(alloc.group, alloc.schemata)
        out.append(alloc)
    return out


# -- the double's I/O: what libvirtd does on the mount ---------------------

def read_state(fs) -> FsState:
    """The mount as :func:`plan` needs it (the caller holds the lock)."""
    from nova_rdt.resctrl import errors

    caps = fs.capabilities()
    cache = {name: CacheInfo(r.cbm_len, r.min_cbm_bits,
                             {cid: d.size for cid, d in r.domains.items()})
             for name, r in caps.cache.items()}
    bw = caps.bandwidth.get("MB")
    mb = (MbInfo(bw.bandwidth_gran, bw.min_bandwidth, bw.domain_ids)
          if bw is not None else None)
    others = {}
    for g in fs.groups(with_mon=False):
        if g.is_root:
            continue
        try:
            others[g.name] = g.schemata()
        except errors.GroupNotFound:
            continue        # removed while listing: holds nothing
    return FsState(cache, mb, fs.root_group().schemata(), others)


class Refused(Exception):
    """libvirt would refuse the start, with this message."""


def _mkdir(fs, g) -> None:
    from nova_rdt.resctrl import errors
    try:
        fs.ops.mkdir(g.path)
    except OSError as e:
        raise errors.ResctrlError(
            f"Cannot create resctrl directory '{g.path}'", errno=e.errno,
            path=g.path, status=fs.last_cmd_status()) from e


def allocate(fs, domain_id: int, name: str, xml: str) -> None:
    """virResctrlAllocCreate for a starting domain: each ``<cachetune>``/
    ``<memorytune>`` becomes the group libvirt would make (no vCPU tasks:
    fakelibvirt runs no threads).  Raises :class:`Refused` with
    libvirt's message, having removed what it made."""
    from nova_rdt.resctrl import errors
    from nova_rdt.resctrl.groups import Group

    dom = etree.fromstring(xml.encode())
    tunes = parse_tunes(
        etree.tostring(e) for e in dom.findall("cputune/cachetune")
        + dom.findall("cputune/memorytune"))
    if not tunes:
        return
    made: list = []
    try:
        with fs.locked():
            for a in plan_all(tunes, read_state(fs), domain_id, name):
                if a.group is not None:
                    g = Group(fs, a.group)
                    _mkdir(fs, g)
                    made.append(g)
                    fs.write_schemata(g, a.schemata, allow_libvirt=True)
                for m in a.monitors:
                    if m.name is not None:
                        mg = Group(fs, m.name, m.parent)
                        _mkdir(fs, mg)
                        made.append(mg)
    except (TuneError, errors.ResctrlError) as e:
        with fs.locked():
            for g in reversed(made):
                if g.parent is None or not any(
                        p.name == g.parent for p in made):
                    _rmdir(fs, g)
        raise Refused(str(e)) from None


def _rmdir(fs, g) -> None:
    try:
        fs.ops.rmdir(g.path)
    except FileNotFoundError:
        pass


def remove(fs, name: str) -> None:
    """virResctrlAllocRemove: the stopped domain's groups go."""
    with fs.locked():
        for g in fs.groups(with_mon=True):
            if naming.is_libvirt_group_of(g.name, name):
                _rmdir(fs, g)
