"""Ways promised to instances that libvirt has not allocated yet.

Between the driver writing an instance's ``<cachetune>`` and libvirt
creating its resctrl group there is a window (image, network plugging,
vif-plugged events) in which parallel builds on the same host would all
see the same free ways.  Each build therefore claims its ways here, and
every later plan is made against resctrl's live state *plus* the claims
whose libvirt group does not exist yet.  Once libvirt's group shows up in
resctrl it carries the allocation itself and the claim stops counting.
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
from nova_rdt.allocation import hoststate
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

    def placements(self, live: hoststate.HostRdtState,
                   allocated_names: Container[str], exclude: str | None = None
                   ) -> tuple[hoststate.HostRdtState,
                              list[tuple[Claim, dict[int, dict[str, int]]]]]:
        """``live`` with every pending claim laid on in claim order, and
        the masks libvirt is predicted to give each of them."""
        state = live
        placed = []
        for c in self.pending(allocated_names, exclude):
            try:
                masks = planner.place(state, c.demand)
            except planner.CannotHonour:
                # The host changed under the claim (a foreign group took
                # the ways).  libvirt will refuse that start; the claim
                # must not also block everyone else.
                continue
            state = state.with_allocation(masks)
            placed.append((c, masks))
        return state, placed

    def effective(self, live: hoststate.HostRdtState,
                  allocated_names: Container[str],
                  exclude: str | None = None) -> hoststate.HostRdtState:
        """``live`` with every pending claim laid on in claim order."""
        return self.placements(live, allocated_names, exclude)[0]

    def claim(self, instance_uuid: str, domain_name: str,
              d: planner.Demand, live: hoststate.HostRdtState,
              allocated_names: Container[str], pmd_share: bool = False
              ) -> dict[int, dict[str, int]]:
        """Plan ``d`` against live state and pending claims; record it.

        An instance's earlier claim (hard reboot, rescue, resize to the
        same host) is replaced, not added to.  Raises CannotHonour.
        """
        with self._lock:
            state = self.effective(live, allocated_names,
                                   exclude=instance_uuid)
            masks = planner.place(state, d)
            self._claims[instance_uuid] = Claim(
                instance_uuid, domain_name, d, next(self._seq),
                self._clock(), pmd_share)
            return masks

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
