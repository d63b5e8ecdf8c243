"""The compute's claim, run by the scheduler on what the compute published.

A compute that publishes its solver's input
(:class:`~nova_rdt.allocation.hoststate.SolverInput`) is judged by the
steps its own claim takes (``RdtCompute.decide`` and ``claim``): the
demand from the request and Nova's NUMA fit (:func:`planner.demand`),
the RMID and class checks, then the placement solver on the published
book.  Nothing here weighs ways itself, so the filter cannot pass a host
the claim refuses, nor refuse one it accepts.  Pure: no Nova objects.
"""

from __future__ import annotations

from collections.abc import Sequence
import dataclasses
import itertools

from nova_rdt.allocation import hostplan
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import placement
from nova_rdt.allocation import planner
from nova_rdt.allocation import spec

# Per guest node: (the host cell Nova's fit gives it, its sorted (vCPU,
# pCPU) pinning or None).  None for a request without NUMA topology.
Fit = tuple[tuple[int, tuple[tuple[int, int], ...] | None], ...] | None

_TAKEN = itertools.count(1)


@dataclasses.dataclass(frozen=True)
class Claimed:
    """What one claim decided: the plan, and what it reserved."""

    plan: placement.Plan
    new: placement.Reservation
    demand: planner.Demand
    mb_only: bool


def guest_cells(placement_: planner.Placement, fit: Fit
                ) -> list[planner.GuestCell] | None:
    """The guest cells the compute builds from Nova's fitted topology
    (``guest_rdt.instance_cells``): each node's vCPUs, host cell and
    pinning.  Without a fit, every node on every cache id: a demand
    that holds more than any fit gives (see :data:`ANYWHERE`)."""
    if placement_.guest is None:
        return None
    if not fit:
        return [planner.GuestCell(i, vcpus)
                for i, vcpus in enumerate(placement_.guest)]
    return [planner.GuestCell(
        i, placement_.guest[i], cell,
        None if not pinning else {v: frozenset([p]) for v, p in pinning})
        for i, (cell, pinning) in enumerate(fit)]


# No fit asked of Nova: each guest node on every cache id.  Any fit asks
# for a part of that (a node's ways on its cells' cache ids only), and
# what the solver places it also places with fewer ways on fewer ids (its
# rules are per cache id, the CLOS and RMID the same), so a claim that
# passes here passes under whatever fit Nova makes, which is then not
# worth its cost.  A refusal here says nothing: Nova's fit decides.
ANYWHERE: Fit = ()


def claim(state: hoststate.HostRdtState, request: spec.RdtRequest,
          placement_: planner.Placement, fit: Fit) -> Claimed:
    """The compute's claim of one new instance; CannotHonour says why
    the compute would refuse it, in the compute's words."""
    solver = state.solver
    assert solver is not None
    d = planner.demand(request, placement_.vcpus,
                       guest_cells(placement_, fit), state,
                       dict(state.cells), solver.monitor)
    if (d.needs_clos or d.monitor) and state.mon_capable \
            and state.rmids_free < 1:
        raise planner.CannotHonour("no free RMID (monitoring ID) left on "
                                   "this host")
    name = request.rdt_class
    cls = (state.classes or {}).get(name) if name else None
    if cls is not None and not cls.exists:
        why = state.class_problem(cls)
        if why:
            raise planner.CannotHonour(
                f"rdt:class={name}: its group cannot be made: {why}")
    mb_only = bool(d.mb) and not d.cache and name is None
    new = placement.Reservation(
        hoststate.PROBE, hostplan.ways_of(d.cache),
        pmd_share=request.pmd_share and solver.pmd_cos, rdt_class=name,
        movable=request.slo != "latency")
    try:
        plan = solver.place(new, mb_only=mb_only)
    except placement.NoPlacement as e:
        raise planner.CannotHonour(str(e)) from None
    return Claimed(plan, new, d, mb_only)


def after(state: hoststate.HostRdtState, c: Claimed
          ) -> hoststate.HostRdtState:
    """``state`` with the claimed instance in the book, as the compute's
    book holds it after the claim: its masks, the moves the plan made,
    the class groups where the plan put them, its RMID and CLOS."""
    solver = state.solver
    assert solver is not None
    book = {u: dataclasses.replace(r, masks=c.plan.instances[u])
            if u in c.plan.moved else r
            for u, r in solver.reservations.items()}
    book[f"taken-{next(_TAKEN)}"] = dataclasses.replace(
        c.new, masks=c.plan.instances.get(hoststate.PROBE, {}))
    groups = {n: dataclasses.replace(g, masks=c.plan.classes[n])
              if n in c.plan.classes else g
              for n, g in solver.classes.items()}
    host = solver.host
    if c.mb_only:
        host = dataclasses.replace(host, clos=host.clos - 1)
    classes = state.classes
    name = c.new.rdt_class
    # One RMID per new group: the instance's own, or its class's first.
    groups_made = int(c.demand.needs_clos or c.demand.monitor)
    if classes is not None and name is not None and name in classes \
            and not classes[name].exists:
        groups_made += 1
        classes = {**classes,
                   name: dataclasses.replace(classes[name], exists=True)}
    rmids = state.rmids_free
    if state.mon_capable:
        rmids -= groups_made
    return dataclasses.replace(
        state, classes=classes, rmids_free=max(rmids, 0),
        solver=dataclasses.replace(solver, host=host, reservations=book,
                                   classes=groups))


def refusal(state: hoststate.HostRdtState, request: spec.RdtRequest,
            placement_: planner.Placement, fit: Fit) -> str | None:
    """Why the compute would refuse the request; None: it accepts."""
    try:
        claim(state, request, placement_, fit)
    except planner.CannotHonour as e:
        # The solver names a demand by its reservation; its CLOS refusal
        # does not know the probe's name means "not an instance yet".
        return str(e).replace(f"instance {hoststate.PROBE}",
                              "the new instance")
    return None


def after_all(state: hoststate.HostRdtState, request: spec.RdtRequest,
              placement_: planner.Placement, fits: Sequence[Fit]
              ) -> hoststate.HostRdtState | None:
    """``state`` with one instance claimed per fit in ``fits``; None
    when one of them is refused (then so is any further one)."""
    for fit in fits:
        try:
            state = after(state, claim(state, request, placement_, fit))
        except planner.CannotHonour:
            return None
    return state
