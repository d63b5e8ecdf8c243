"""Where every way goes: one placement plan for a host.  Pure.

``<cachetune>`` carries sizes only, and libvirt picks the position (the
smallest free run that fits, lowest ways first).  Predicting that choice
fails as soon as starts interleave, a stopped VM's group goes away or a
neighbour leaves.  So nova-rdt decides the position of every mask itself
here -- VMs, class groups and the OVS-DPDK PMD COS together -- and the
driver and the hook write the decided masks into libvirt's groups under
the host's flock before the guest runs.

The plan covers one cache *resource* at a time as the kernel names it
(``L3``, or ``L3CODE``/``L3DATA`` under CDP) and one cache id at a time:
every rule below is per (resource, id), so a host's placement problem
splits into small independent ones.

Rules, per (resource, id):

* every mask is one the kernel accepts: inside ``cbm_len``, at least
  ``min_bits`` ways, one run unless the resource allows sparse masks;
* an instance's mask is one run even where the resource allows sparse
  masks: its group is libvirt's, which makes it from the ``<cachetune>``
  size at every start (a hard reboot, a start after a stop, a migration
  in) and finds only contiguous free runs
  (virResctrlAllocFindUnused), "Not enough room" otherwise.
  The decided run is free when libvirt looks -- the start writes the
  moves first and keeps it out of the PMD COS (``Placer.make_room``) --
  so libvirt always finds a run, and the decided masks are written
  over its choice before the guest runs.  Instances moved to make room
  keep one run too: they will be libvirt's to make again at their next
  start.  Only groups nova-rdt makes and writes itself, class groups and
  the PMD COS, take scattered ways where the resource allows;
* the host's ways (the root group's mask) are never given out;
* instances that do not share with the PMDs, and class groups, are
  pairwise disjoint and disjoint from the PMD COS;
* on the cache ids that hold PMD cores (``Host.pmd_ids``), the PMD COS
  is the span of its base and its sharers' masks, and must itself be a
  valid mask that covers no one else's ways: sharers therefore sit next
  to the base and to each other (never on the base, nor on one
  another's ways).  Under sparse masks it is their union instead.  On
  other cache ids a sharer is placed as any instance is, the base is not
  the PMDs' (its ways are handed out) and the PMD COS holds the host's
  ways, as it does where there is neither base nor sharer: a CBM may not
  be empty;
* a placed reservation keeps its masks (a running VM's ways are not
  moved under it) unless compaction is asked for and it is movable.

A reservation holds what will be used: a running VM's masks, a stopped
VM's (it can always start again), a claimed VM not started yet, and a
class whose group does not exist yet (it costs a CLOS and its ways until
it does).

How a position is chosen, per (resource, id).  The others stay where they
are, so every window of the right size in the free ways is a candidate
(for a class group under sparse masks, when no window fits, scattered
free ways) and the search is exhaustive: a demand is refused only when
no candidate is valid, and on a sparse resource whose free ways number
enough but hold no run the refusal says so.  Among valid candidates the
one that keeps most options open wins:

* a sharer goes where it widens the PMD span the least (into a hole a
  departed sharer left, or right next to the span), else into the
  smallest free run that fits, at its top end;
* any other group goes into the smallest free run that fits, at its low
  end (libvirt's own choice), but not onto the ways right next to the
  PMD span when another choice exists: sharers grow the span there.

With ``compaction``, a demand that the free ways hold in number but not
in one run moves the fewest movable reservations that make room (never
one with ``movable=False``, never a class group) and reports them.
Without it, class groups in the way are still placed again (they are
nova-rdt's own), which on a sparse resource gathers scattered free ways
into a run wherever the class can take the scattered rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import itertools

from nova_rdt import exception
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl import cbmrules

# resource -> cache id -> a value (ways wanted, or a mask).
PerId = Mapping[str, Mapping[int, int]]

# The name of a demand the scheduler asks about (:func:`room`): no
# instance has it, and refusals call it "the new instance".
ROOM_PROBE = "being scheduled"


class NoPlacement(exception.NovaRdtError):
    """No valid placement exists; str() says where and why."""


class InvalidState(NoPlacement):
    """The placed masks given already break a rule (two groups overlap, a
    mask the kernel refuses, a PMD span over another group's ways, a class
    nobody defined): no plan can keep them.  str() names the groups."""


@dataclasses.dataclass(frozen=True)
class Resource:
    """What the kernel accepts for one cache resource."""

    cbm_len: int
    min_bits: int = 1
    sparse: bool = False


@dataclasses.dataclass(frozen=True)
class Host:
    """The fixed part of a host's layout.

    ``resources``: the cache resources nova-rdt places on (``L3``, or
    ``L3CODE`` and ``L3DATA``), each with its cache ids in ``ids``.
    ``host_ways``: the root group's masks, never given out.
    ``foreign``: masks of groups nova-rdt does not own (pqos ``COS*``...):
    avoided, never moved.
    ``pmd_base``: the PMD COS's own ways per resource and id (0 or absent:
    none).  ``pmd_ids``: the cache ids whose CPUs run PMD threads; None
    when the PMD COS is off (``rdt:pmd_share`` then places as any VM).
    ``clos``: CLOS nova-rdt may spend on reservations and classes (the
    usable CLOS minus the root, the PMD group and foreign groups).
    """

    resources: Mapping[str, Resource]
    ids: Mapping[str, tuple[int, ...]]
    host_ways: PerId
    foreign: PerId = dataclasses.field(default_factory=dict)
    pmd_base: PerId = dataclasses.field(default_factory=dict)
    pmd_ids: frozenset[int] | None = None
    clos: int = 0


@dataclasses.dataclass(frozen=True)
class Reservation:
    """One instance's share of the host.

    ``ways``: ways wanted per resource and id (ids it does not name get
    nothing: libvirt copies the root's mask there).  ``masks``: where
    they are, or None for a demand not placed yet.  A class member
    (``rdt_class``) has no ways of its own; its class holds them.
    ``movable``: compaction may move it (never an ``rdt:slo=latency``
    instance).
    """

    uuid: str
    ways: PerId
    masks: PerId | None = None
    pmd_share: bool = False
    rdt_class: str | None = None
    movable: bool = True

    @property
    def needs_clos(self) -> bool:
        """Whether it has a group of its own (a class member shares its
        class's)."""
        return self.rdt_class is None and any(
            n for per in self.ways.values() for n in per.values())


@dataclasses.dataclass(frozen=True)
class ClassGroup:
    """A shared class group: its ways per resource and id, and where they
    are (None: the group does not exist yet and is placed on demand)."""

    name: str
    ways: PerId
    masks: PerId | None = None


@dataclasses.dataclass(frozen=True)
class Plan:
    """Every mask on the host after adding one demand.

    ``instances``: uuid -> masks, for every reservation (the new one
    included); ``classes``: name -> masks of every class in use;
    ``pmd``: the PMD COS's masks on every resource and id (absent when the
    PMD COS is off).  ``moved``: uuids whose masks compaction changed;
    ``moved_classes``: class groups placed again to make room (nova-rdt's
    own groups move without compaction).
    """

    instances: Mapping[str, PerId]
    classes: Mapping[str, PerId]
    pmd: PerId
    moved: tuple[str, ...] = ()
    moved_classes: tuple[str, ...] = ()


def place(host: Host, reservations: Mapping[str, Reservation],
          classes: Mapping[str, ClassGroup], new: Reservation,
          compaction: bool = False) -> Plan:
    """The plan with ``new`` added to ``reservations``.

    ``reservations`` are the host's current ones (``new.uuid`` among them
    is replaced: a re-plan of the same instance keeps its old masks when
    they are still valid).  Raises :class:`NoPlacement` only when no valid
    placement of everything reserved plus ``new`` exists (without moving
    placed reservations unless ``compaction``).

    ``new.masks``, when given, are kept where still valid (else the old
    reservation's); where neither is, ``new`` is placed afresh.  Placed
    masks on a cache id a reservation asks no ways of are ignored (libvirt
    copies the root's mask there).  Raises :class:`InvalidState` (a
    :class:`NoPlacement`) when the placed masks given break a rule.
    """
    return _plan(host, reservations, classes, new, compaction)


def release(host: Host, reservations: Mapping[str, Reservation],
            classes: Mapping[str, ClassGroup], uuid: str) -> Plan:
    """The plan without ``uuid``: the PMD COS shrinks to its base and the
    remaining sharers, and a class left with no member is dropped.

    Nothing placed moves.  Reservations or classes not placed yet are
    placed as :func:`place` would; only they can make it raise
    :class:`NoPlacement` (or :class:`InvalidState` for broken input).
    An unknown ``uuid`` gives the plan of ``reservations`` as they are.
    """
    return _plan(host, {u: r for u, r in reservations.items() if u != uuid},
                 classes, None, False)


def check(host: Host, reservations: Mapping[str, Reservation],
          classes: Mapping[str, ClassGroup]) -> Plan:
    """The plan of the placed masks given, as they are: what a start
    applies is what its claim decided, checked against the rules, never
    decided again.  Reservations and classes not placed are left out.
    Raises :class:`InvalidState` when the masks break a rule now."""
    return _plan(host,
                 {u: r for u, r in reservations.items()
                  if r.masks is not None},
                 {n: g for n, g in classes.items() if g.masks is not None},
                 None, False)


# -- one cache: the rules of one (resource, cache id) ----------------------

# Search steps compaction may spend before it gives up (a refusal, never
# a wrong plan); far above what a cache of 20 ways needs.
_COMPACTION_BUDGET = 200_000


class _GaveUp(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class _Cache:
    res: str
    cid: int
    rules: Resource
    blocked: int    # the host's and foreign ways: never given, never spanned
    base: int       # the PMD COS's own ways, where its span rule holds
    pmd: bool       # the span rule holds here (PMD COS on, PMD cores here)

    @property
    def full(self) -> int:
        return cbm.full_mask(self.rules.cbm_len)

    def __str__(self) -> str:
        return f"{self.res} cache id {self.cid}"


@dataclasses.dataclass(frozen=True)
class _Item:
    """A group to place on one cache: an instance's or a class's."""

    kind: str           # "instance" or "class"
    name: str
    ways: int
    sharer: bool        # bound by the span rule here
    movable: bool = False

    @property
    def one_run(self) -> bool:
        """Whether its group is libvirt's: made from a size, on a
        contiguous free run only (see the module's docstring)."""
        return self.kind == "instance"

    def __str__(self) -> str:
        if self.name == ROOM_PROBE:
            return "the new instance"
        return f"{self.kind} {self.name}"


@dataclasses.dataclass(frozen=True)
class _State:
    """What is placed on one cache, as three masks."""

    occ: int     # held by anyone: blocked, the base, every placed group
    excl: int    # what the PMD COS may not cover: blocked, non-sharers
    want: int    # what the PMD COS must cover: the base, the sharers

    def add(self, item: _Item, mask: int) -> _State:
        if item.sharer:
            return _State(self.occ | mask, self.excl, self.want | mask)
        return _State(self.occ | mask, self.excl | mask, self.want)


def span(mask: int) -> int:
    """The smallest contiguous mask covering ``mask`` (0 for 0)."""
    if not mask:
        return 0
    low = (mask & -mask).bit_length() - 1
    return cbm.Run(low, mask.bit_length() - low).mask


def pmd_cover(want: int, sparse: bool) -> int:
    """The PMD COS over ``want`` (its base and its sharers' ways) on one
    cache id: one run unless the resource takes sparse masks.  The one
    rule the planner decides by and the PMD COS is written by
    (:func:`nova_rdt.allocation.pmdplan.plan_id`)."""
    return want if sparse else span(want)


def _pmd_cover(cache: _Cache, want: int) -> int:
    """The PMD COS's ways that are nobody else's business (0 where the
    span rule does not hold or nothing is shared)."""
    if not cache.pmd or not want:
        return 0
    return pmd_cover(want, cache.rules.sparse)


def _conflict(cache: _Cache, st: _State, item: _Item, x: int) -> str | None:
    """Why ``item`` may not hold ``x`` on top of ``st``; None if it may."""
    r = cache.rules
    try:
        cbm.check(x, r.cbm_len, r.min_bits, r.sparse)
    except cbm.CbmError as e:
        return f"{x:#x} is not a valid mask ({e})"
    if cbm.popcount(x) != item.ways:
        return f"{x:#x} holds {cbm.popcount(x)} ways, not {item.ways}"
    if x & st.occ:
        return f"{x:#x} overlaps ways already held ({x & st.occ:#x})"
    if item.sharer:
        cover = _pmd_cover(cache, st.want | x)
        if cover & st.excl:
            return (f"the PMD COS would span {cover:#x}, over others' ways "
                    f"{cover & st.excl:#x}")
    elif x & _pmd_cover(cache, st.want):
        return (f"{x:#x} overlaps the PMD COS "
                f"{_pmd_cover(cache, st.want):#x}")
    return None


def _free_for(cache: _Cache, st: _State, item: _Item) -> int:
    free = cache.full & ~st.occ
    if not item.sharer:
        # Holes in the span are the PMDs' until the span shrinks.
        free &= ~_pmd_cover(cache, st.want)
    return free


def _run_around(free: int, x: int) -> cbm.Run:
    """The free run holding contiguous ``x``."""
    lo = (x & -x).bit_length() - 1
    hi = x.bit_length() - 1
    while lo > 0 and free >> (lo - 1) & 1:
        lo -= 1
    while free >> (hi + 1) & 1:
        hi += 1
    return cbm.Run(lo, hi - lo + 1)


def _score(cache: _Cache, st: _State, item: _Item, x: int,
           free: int) -> tuple[int, int, int, int]:
    """Lower is better: see the module's docstring."""
    run = _run_around(free, x)
    lo = (x & -x).bit_length() - 1
    at_end = lo == run.start or x.bit_length() == run.start + run.length
    if item.sharer and not cache.rules.sparse:
        joined = st.want | x
        absorbed = cbm.popcount(span(joined) & ~joined)
        return (absorbed, run.length, int(not at_end), -lo)
    cover = 0 if cache.rules.sparse else _pmd_cover(cache, st.want)
    touches = bool(((x << 1) | (x >> 1)) & cover)
    return (int(touches), run.length, int(not at_end), lo)


def _candidates(cache: _Cache, st: _State, item: _Item) -> list[int]:
    """Every valid mask for ``item`` (sparse: the best one), best first."""
    r = cache.rules
    n = item.ways
    if n <= 0 or n > r.cbm_len or n < r.min_bits:
        return []
    free = _free_for(cache, st, item)
    scored = []
    for start in range(r.cbm_len - n + 1):
        x = cbm.Run(start, n).mask
        if x & free == x and _conflict(cache, st, item, x) is None:
            scored.append((_score(cache, st, item, x, free), x))
    scored.sort()
    out = [x for _, x in scored]
    # Only the windows for a group libvirt makes (the module's rule);
    # nova-rdt's own class groups take scattered ways when no window fits.
    if not out and r.sparse and not item.one_run:
        pick = _sparse_pick(free, n, r)
        if pick is not None and _conflict(cache, st, item, pick) is None:
            out.append(pick)
    return out


def _greedy(free: int, n: int) -> int | None:
    """``n`` ways of ``free`` from as few runs as possible: whole largest
    runs, then the smallest run that holds the rest."""
    out = 0
    runs = cbm.runs(free)
    while n > 0:
        fitting = [r for r in runs if r.length >= n]
        if fitting:
            r = min(fitting, key=lambda r: (r.length, r.start))
            return out | cbm.Run(r.start, n).mask
        if not runs:
            return None
        r = max(runs, key=lambda r: (r.length, -r.start))
        runs.remove(r)
        out |= r.mask
        n -= r.length
    return out


def _sparse_pick(free: int, n: int, rules: Resource) -> int | None:
    """A valid sparse mask of ``n`` free ways, or None if none exists.

    The kernel checks only the lowest run against ``min_bits``; a valid
    mask exists iff some ``min_bits`` free ways in a row have enough free
    ways above them, so trying each such start is exhaustive.
    """
    def valid(x: int) -> bool:
        try:
            cbm.check(x, rules.cbm_len, rules.min_bits, True)
        except cbm.CbmError:
            return False
        return True

    pick = _greedy(free, n)
    if pick is not None and valid(pick):
        return pick
    low = max(rules.min_bits, 1)
    for p in range(rules.cbm_len - low + 1):
        w = cbm.Run(p, low).mask
        if w & free != w:
            continue
        rest = _greedy(free & ~((1 << (p + low)) - 1), n - low)
        if rest is None:
            return None     # higher starts have fewer ways above them
        if valid(w | rest):
            return w | rest
    return None


def _solve(cache: _Cache, st: _State, items: Sequence[_Item],
           budget: list[int] | None = None) -> list[int] | None:
    """Masks for ``items`` on top of ``st``, each taking its best
    candidate unless that leaves a later one no room (depth first, with
    the failed states remembered); None when no combination exists.
    ``budget`` (a one-element counter) raises _GaveUp when spent.

    On a sparse resource the groups that need a run go first: the class
    groups after them can take any valid scattered ways that are left,
    and only their windows and one scattered pick are candidates, so a
    class tried first could sit in the only run an instance can use.
    """
    order = list(range(len(items)))
    if cache.rules.sparse:
        order.sort(key=lambda i: not items[i].one_run)
    ordered = [items[i] for i in order]
    sol = _solve_in_order(cache, st, ordered, budget)
    if sol is None:
        return None
    out = [0] * len(items)
    for i, x in zip(order, sol):
        out[i] = x
    return out


def _solve_in_order(cache: _Cache, st: _State, items: Sequence[_Item],
                    budget: list[int] | None) -> list[int] | None:
    failed: set[tuple[int, int, int, int]] = set()
    out: list[int] = []

    def go(i: int, st: _State) -> bool:
        if i == len(items):
            return True
        key = (i, st.occ, st.excl, st.want)
        if key in failed:
            return False
        if budget is not None:
            budget[0] -= 1
            if budget[0] < 0:
                raise _GaveUp
        for x in _candidates(cache, st, items[i]):
            out.append(x)
            if go(i + 1, st.add(items[i], x)):
                return True
            out.pop()
        failed.add(key)
        return False

    return out if go(0, st) else None


def _initial(cache: _Cache) -> _State:
    return _State(cache.blocked | cache.base, cache.blocked & ~cache.base,
                  cache.base)


def _build(cache: _Cache, fixed: Sequence[tuple[_Item, int]]) -> _State:
    """The state of ``fixed``; InvalidState if they break a rule."""
    st = _initial(cache)
    for item, x in fixed:
        why = _conflict(cache, st, item, x)
        if why is not None:
            raise InvalidState(f"{cache}: {item} is placed at {x:#x}, but "
                               f"{why}")
        st = st.add(item, x)
    return st


def _refusal(cache: _Cache, st: _State, todo: Sequence[_Item]) -> str:
    """Why nothing fits, naming the first demand that has no place."""
    item = next((i for i in todo if not _candidates(cache, st, i)), todo[-1])
    r = cache.rules
    where = f"{cache}: no room for {_ways_text(item.ways)} of {item}"
    if item.ways > r.cbm_len:
        return f"{where}: the cache has {r.cbm_len} ways"
    if item.ways < r.min_bits:
        return f"{where}: masks need at least {r.min_bits} ways"
    cover = _pmd_cover(cache, st.want)
    free = _free_for(cache, st, item)
    runs = ", ".join(str(x) for x in cbm.runs(free))
    if r.sparse and item.one_run and cbm.popcount(free) >= item.ways \
            and cbmrules.longest_run(free) < item.ways:
        # The kernel would take these ways scattered; libvirt would not.
        where += (f": {_ways_text(cbm.popcount(free))} free, but no "
                  f"contiguous run of {item.ways}: libvirt allocates a "
                  f"contiguous run")
    out = f"{where}; free runs {runs or 'none'}"
    if item.sharer and cover and not r.sparse:
        out += (f"; a PMD sharer must keep the PMD COS ({cover:#x}) one "
                f"run over no other group's ways")
    elif cover and not item.sharer:
        out += f" outside the PMD COS {cover:#x}"
    return out


def _ways_text(n: int) -> str:
    return f"{n} way" if n == 1 else f"{n} ways"


def _compact(cache: _Cache, fixed: Sequence[tuple[_Item, int]],
             todo: Sequence[_Item]) -> dict[_Item, int] | None:
    """Masks for ``todo`` and for the fewest movable ``fixed`` groups
    moved to make room; None when even moving them all makes none."""
    movable = sorted((i for i, (item, _) in enumerate(fixed) if item.movable),
                     key=lambda i: (fixed[i][0].ways, fixed[i][0].name))
    budget = [_COMPACTION_BUDGET]

    def attempt(moving: Sequence[int]) -> dict[_Item, int] | None:
        skip = set(moving)
        st = _build(cache, [f for i, f in enumerate(fixed) if i not in skip])
        items = list(todo) + [fixed[i][0] for i in moving]
        sol = _solve(cache, st, items, budget)
        return None if sol is None else dict(zip(items, sol))

    try:
        # Moving more never hurts: if moving all of them makes no room,
        # no subset does.
        if not movable or attempt(movable) is None:
            return None
        for k in range(1, len(movable) + 1):
            for moving in itertools.combinations(movable, k):
                sol = attempt(moving)
                if sol is not None:
                    return sol
    except _GaveUp:
        return None
    return None  # pragma: no cover - attempt(movable) found one


# -- the host --------------------------------------------------------------

def _ways(per: PerId, res: str, cid: int) -> int:
    n = per.get(res, {}).get(cid, 0)
    if n < 0:
        raise ValueError(f"negative ways ({n}) on {res} cache id {cid}")
    return n


def _mask(masks: PerId | None, res: str, cid: int) -> int | None:
    if masks is None:
        return None
    return masks.get(res, {}).get(cid)


def _check_names(host: Host, book: Mapping[str, Reservation],
                 groups: Mapping[str, ClassGroup],
                 new: Reservation | None) -> None:
    """Every way asked for is on a resource and cache id of this host."""
    owners: list[tuple[str, PerId, bool]] = [
        (f"class {g.name}", g.ways, False) for g in groups.values()]
    owners += [(f"instance {u}", r.ways, new is not None and u == new.uuid)
               for u, r in book.items() if r.rdt_class is None]
    for who, ways, is_new in owners:
        for res, per in ways.items():
            for cid, n in per.items():
                if n and cid not in host.ids.get(res, ()) \
                        or n and res not in host.resources:
                    err = NoPlacement if is_new else InvalidState
                    raise err(f"{who} asks for {n} ways on {res} cache id "
                              f"{cid}, where this host places none")


def _plan(host: Host, reservations: Mapping[str, Reservation],
          classes: Mapping[str, ClassGroup], new: Reservation | None,
          compaction: bool) -> Plan:
    book = dict(reservations)
    prefer: PerId | None = None
    if new is not None:
        old = book.get(new.uuid)
        prefer = new.masks if new.masks is not None else (
            old.masks if old is not None else None)
        book[new.uuid] = new
    in_use = sorted({r.rdt_class for r in book.values()
                     if r.rdt_class is not None})
    for name in in_use:
        if name not in classes:
            err = NoPlacement if new is not None \
                and new.rdt_class == name else InvalidState
            raise err(f"class {name!r} is not defined on this host")
    groups = {name: classes[name] for name in in_use}
    if new is not None:
        need = sum(1 for r in book.values() if r.needs_clos) + len(groups)
        if need > host.clos:
            what = f"class {new.rdt_class}'s group" if new.rdt_class \
                else f"instance {new.uuid}"
            raise NoPlacement(
                f"no CLOS left for {what}: the host's reservations and "
                f"classes would need {need} CLOS, and {host.clos} are "
                f"available")
    _check_names(host, book, groups, new)

    inst: dict[str, dict[str, dict[int, int]]] = {u: {} for u in book}
    cls: dict[str, dict[str, dict[int, int]]] = {c: {} for c in groups}
    pmd: dict[str, dict[int, int]] = {}
    moved: set[str] = set()
    moved_classes: set[str] = set()
    for res in host.resources:
        for cid in host.ids.get(res, ()):
            cache = _cache_of(host, res, cid)
            placed, floated = _place_floating(cache, book, groups, new,
                                              prefer, compaction)
            moved_classes |= floated
            want = cache.base
            for (item, x), was in placed.items():
                target = inst if item.kind == "instance" else cls
                target[item.name].setdefault(res, {})[cid] = x
                if item.sharer:
                    want |= x
                if was is not None and was != x:
                    moved.add(item.name)
            if host.pmd_ids is not None:
                fallback = _mask(host.host_ways, res, cid) or 0
                pmd.setdefault(res, {})[cid] = \
                    _pmd_cover(cache, want) or fallback
    return Plan(inst, cls, pmd, tuple(sorted(moved)),
                tuple(sorted(moved_classes)))


def _cache_of(host: Host, res: str, cid: int) -> _Cache:
    on = host.pmd_ids is not None and cid in host.pmd_ids
    return _Cache(
        res, cid, host.resources[res],
        blocked=(_mask(host.host_ways, res, cid) or 0)
        | (_mask(host.foreign, res, cid) or 0),
        base=(_mask(host.pmd_base, res, cid) or 0) if on else 0,
        pmd=on)


def _place_floating(cache: _Cache, book: Mapping[str, Reservation],
                    groups: Mapping[str, ClassGroup],
                    new: Reservation | None, prefer: PerId | None,
                    compaction: bool
                    ) -> tuple[dict[tuple[_Item, int], int | None], set[str]]:
    """:func:`_place_cache`, and when nothing fits, again with the class
    groups free to move; the classes that moved.

    Class groups are nova-rdt's own best-effort groups, its to move (the
    runtime controller reshapes them too): one in the way of a demand --
    case 2's class left next to the PMD base -- is placed again with it.
    Instances move only with compaction, and only where nothing else
    makes room: moving a class costs no instance its ways, so the plan
    without compaction comes first when there is one (compaction then
    changes nothing a plain placement would do).
    """
    if compaction:
        try:
            return _place_floating(cache, book, groups, new, prefer, False)
        except InvalidState:
            raise
        except NoPlacement:
            pass
    res, cid = cache.res, cache.cid
    try:
        return _place_cache(cache, book, groups, new, prefer,
                            compaction), set()
    except InvalidState:
        raise
    except NoPlacement:
        floating = {n: dataclasses.replace(
            g, masks=_without(g.masks, res, cid))
            for n, g in groups.items()
            if _mask(g.masks, res, cid) is not None}
        if not floating:
            raise
        placed = _place_cache(cache, book, {**groups, **floating}, new,
                              prefer, compaction)
    moved = {item.name for (item, x), _was in placed.items()
             if item.kind != "instance" and item.name in floating
             and x != _mask(groups[item.name].masks, res, cid)}
    return placed, moved


def room(host: Host, reservations: Mapping[str, Reservation],
         classes: Mapping[str, ClassGroup], res: str, cid: int,
         sharer: bool = False, compaction: bool = False) -> int:
    """The most ways one new instance can get on ``res`` cache id
    ``cid``: the largest demand :func:`place` accepts there, with the
    same inputs, everything else (CLOS) aside.

    The scheduler's question, answered by the planner itself: a demand
    on several cache ids fits iff it fits on each, since every rule is
    per (resource, cache id).  What fits in ``n`` ways fits in fewer, so
    the answer is found by bisection.
    """
    in_use = {r.rdt_class for r in reservations.values() if r.rdt_class}
    groups = {n: g for n, g in classes.items() if n in in_use}
    cache = _cache_of(host, res, cid)

    def fits(n: int) -> bool:
        new = Reservation(ROOM_PROBE, {res: {cid: n}}, pmd_share=sharer)
        book = {**reservations, ROOM_PROBE: new}
        try:
            _place_floating(cache, book, groups, new, None, compaction)
        except InvalidState:
            raise
        except NoPlacement:
            return False
        return True

    lo, hi = max(cache.rules.min_bits, 1), cache.rules.cbm_len
    if not fits(lo):
        return 0            # below min_bits nothing is valid anyway
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _without(masks: PerId | None, res: str, cid: int) -> PerId | None:
    """``masks`` without the one of ``res`` cache id ``cid``."""
    if masks is None:
        return None
    return {r: {c: m for c, m in per.items() if (r, c) != (res, cid)}
            for r, per in masks.items()}


def _place_cache(cache: _Cache, book: Mapping[str, Reservation],
                 groups: Mapping[str, ClassGroup], new: Reservation | None,
                 prefer: PerId | None, compaction: bool
                 ) -> dict[tuple[_Item, int], int | None]:
    """(item, its mask) -> the mask it had (None: newly placed)."""
    res, cid = cache.res, cache.cid
    fixed: list[tuple[_Item, int]] = []
    todo: list[_Item] = []
    for name, g in sorted(groups.items()):
        n = _ways(g.ways, res, cid)
        if n:
            item = _Item("class", name, n, False)
            x = _mask(g.masks, res, cid)
            if x is None:
                todo.append(item)
            else:
                fixed.append((item, x))
    last: list[_Item] = []
    for uuid, r in sorted(book.items()):
        n = _ways(r.ways, res, cid) if r.rdt_class is None else 0
        if not n:
            continue
        is_new = new is not None and uuid == new.uuid
        item = _Item("instance", uuid, n, r.pmd_share and cache.pmd,
                     r.movable and not is_new)
        x = _mask(r.masks, res, cid) if not is_new else None
        if x is not None:
            fixed.append((item, x))
        elif is_new:
            last.append(item)
        else:
            todo.append(item)
    st = _build(cache, fixed)
    for item in last:
        x = _mask(prefer, res, cid)
        # A restart keeps its place where libvirt can make it again: a
        # scattered mask (written by something else) is placed afresh.
        if x is not None and cbm.is_contiguous(x) \
                and _conflict(cache, st, item, x) is None:
            fixed.append((item, x))
            st = st.add(item, x)
        else:
            todo.append(item)
    placed: dict[tuple[_Item, int], int | None] = {
        (item, x): x for item, x in fixed}
    if not todo:
        return placed
    sol = _solve(cache, st, todo)
    if sol is not None:
        placed.update({(item, x): None for item, x in zip(todo, sol)})
        return placed
    if compaction:
        moves = _compact(cache, fixed, todo)
        if moves is not None:
            old = {item: x for item, x in fixed}
            kept: dict[tuple[_Item, int], int | None] = {
                (item, x): x for item, x in fixed if item not in moves}
            kept.update({(item, x): old.get(item)
                         for item, x in moves.items()})
            return kept
    raise NoPlacement(_refusal(cache, st, todo)
                      + ("; moving what may move makes no room either"
                         if compaction else ""))
