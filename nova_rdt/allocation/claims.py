"""Which instances hold a claim whose libvirt group does not exist yet.

The claim's *positions* are the placement plan's, kept by the compute's
:class:`~nova_rdt.virt.placer.Placer`.  This ledger keeps only who
claimed what, and when: a claim precedes its domain's definition by the
build's plugging time, and one whose domain never appears (a failed
migration, a build that died) is forgotten after a grace period.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Container
from collections.abc import Iterable
import dataclasses
import itertools
import threading
import time

from nova_rdt import naming
from nova_rdt.allocation import planner


@dataclasses.dataclass(frozen=True)
class Claim:
    instance_uuid: str
    domain_name: str
    demand: planner.Demand
    seq: int
    created: float
    pmd_share: bool = False


def libvirt_domain_names(group_names: Iterable[str]
                         ) -> naming.LibvirtMachines:
    """The libvirt groups among ``group_names``; ``domain_name in`` it
    says whether libvirt has made that domain's group."""
    return naming.LibvirtMachines(group_names)


class ClaimLedger:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._claims: dict[str, Claim] = {}
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._clock = clock

    def __len__(self) -> int:
        return len(self._claims)

    def pending(self, allocated_names: Container[str],
                exclude: str | None = None) -> list[Claim]:
        """Claims whose domain has no group in ``allocated_names`` (see
        :func:`libvirt_domain_names`)."""
        return sorted((c for c in self._claims.values()
                       if c.instance_uuid != exclude
                       and c.demand.needs_clos
                       and c.domain_name not in allocated_names),
                      key=lambda c: c.seq)

    def record(self, instance_uuid: str, domain_name: str,
               d: planner.Demand, pmd_share: bool = False) -> None:
        """Note a claim that was decided elsewhere (the placement plan);
        an instance's earlier claim is replaced."""
        with self._lock:
            self._claims[instance_uuid] = Claim(
                instance_uuid, domain_name, d, next(self._seq),
                self._clock(), pmd_share)

    def release(self, instance_uuid: str) -> bool:
        with self._lock:
            return self._claims.pop(instance_uuid, None) is not None

    def forget_unless(self, defined_uuids: set[str],
                      grace: float) -> list[str]:
        """Drop claims of instances no longer defined here after ``grace`` s.

        A claim precedes its domain's definition by the build's plugging
        time, hence the grace; after it, an undefined domain's claim is a
        leftover of a path that did not tell us (a failed migration).
        """
        now = self._clock()
        with self._lock:
            gone = [u for u, c in self._claims.items()
                    if u not in defined_uuids and now - c.created > grace]
            for u in gone:
                del self._claims[u]
            return gone
