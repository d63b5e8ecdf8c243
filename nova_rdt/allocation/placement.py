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
* the host's ways (the root group's mask) are never given out;
* instances that do not share with the PMDs, and class groups, are
  pairwise disjoint and disjoint from the PMD COS;
* on the cache ids that hold PMD cores (``Host.pmd_ids``), the PMD COS
  is the span of its base and its sharers' masks, and must itself be a
  valid mask that covers no one else's ways: sharers therefore sit next
  to the base and to each other.  On other cache ids a sharer is placed
  as any instance is;
* a placed reservation keeps its masks (a running VM's ways are not
  moved under it) unless compaction is asked for and it is movable.

A reservation holds what will be used: a running VM's masks, a stopped
VM's (it can always start again), a claimed VM not started yet, and a
class whose group does not exist yet (it costs a CLOS and its ways until
it does).
"""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses

# resource -> cache id -> a value (ways wanted, or a mask).
PerId = Mapping[str, Mapping[int, int]]


class NoPlacement(Exception):
    """No valid placement exists; str() says where and why."""


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
    PMD COS is off).  ``moved``: uuids whose masks compaction changed.
    """

    instances: Mapping[str, PerId]
    classes: Mapping[str, PerId]
    pmd: PerId
    moved: tuple[str, ...] = ()

    @property
    def clos_used(self) -> int:
        """CLOS the plan's groups take (instances with ways of their own
        and classes in use; the PMD group is the host's)."""
        return sum(1 for m in self.instances.values()
                   if any(per for per in m.values())) + len(self.classes)


def place(host: Host, reservations: Mapping[str, Reservation],
          classes: Mapping[str, ClassGroup], new: Reservation,
          compaction: bool = False) -> Plan:
    """The plan with ``new`` added to ``reservations``.

    ``reservations`` are the host's current ones (``new.uuid`` among them
    is replaced: a re-plan of the same instance keeps its old masks when
    they are still valid).  Raises :class:`NoPlacement` only when no valid
    placement of everything reserved plus ``new`` exists (without moving
    placed reservations unless ``compaction``).
    """
    raise NotImplementedError


def release(host: Host, reservations: Mapping[str, Reservation],
            classes: Mapping[str, ClassGroup], uuid: str) -> Plan:
    """The plan without ``uuid``: the PMD COS shrinks to its base and the
    remaining sharers, and a class left with no member is dropped."""
    raise NotImplementedError
