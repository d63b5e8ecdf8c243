"""Publish a compute's RDT state now, not at the next periodic task.

The scheduler reads what a compute can give from the compute node's
``stats``.  Nova's ResourceTracker refills them from the driver only in
``update_available_resource`` (every ``update_resources_interval``,
60 s by default): between two runs, a claim or a release the driver made
is invisible to RDTFilter, which then passes hosts that will refuse, or
refuses hosts that have room again.

The tracker keeps one ``Stats`` dict per node (``rt.stats[nodename]``),
and every time it saves the node (each instance claim, each change of an
instance's state, the periodic task) it writes that dict as the node's
``stats``.  So the driver's new RDT stats go into that dict, and the
node is saved once, under the tracker's own lock: later saves by the
tracker carry them too, instead of putting the old ones back.

The tracker is reached through the ``virtapi`` Nova hands every driver
(``ComputeVirtAPI._compute`` is the ComputeManager, ``.rt`` its tracker).
Where it is not there (another virtapi, a tracker not started yet) or
the save fails, nothing is published and the periodic task publishes as
before: a claim or a release never fails for this.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


def tracker(virtapi) -> object | None:
    """The compute's ResourceTracker, or None where there is none."""
    compute = getattr(virtapi, "_compute", None)
    return getattr(compute, "rt", None)


def publish(virtapi, stats: Callable[[], Mapping[str, str]],
            nodename: str | None = None) -> bool:
    """Write ``stats()`` into the node's stats and save it, at once.

    ``stats`` is called under the tracker's lock, so two publishes (or a
    publish and the periodic task) cannot write their states out of
    order.  ``nodename`` None: every node of this compute (libvirt has
    one).  Returns whether a node was saved; False when nothing changed
    or nothing could be published (the periodic task will).

    Not for the driver's own ``get_available_resource`` or
    ``update_provider_tree``: the tracker calls those itself.
    """
    rt = tracker(virtapi)
    if rt is None or not hasattr(rt, "compute_nodes"):
        return False
    # Imported here: the driver module imports this one, and Nova's
    # compute package is there wherever a driver runs.
    from nova import utils as nova_utils
    from nova.compute import resource_tracker

    @nova_utils.synchronized(resource_tracker.COMPUTE_RESOURCE_SEMAPHORE,
                             fair=True)
    def _locked() -> bool:
        new = dict(stats())
        if not new:
            return False
        saved = False
        for cn in _merge(rt, new, nodename):
            cn.save()
            saved = True
        return saved

    try:
        return _locked()
    except Exception:
        LOG.warning("nova-rdt: could not publish the host's RDT state now; "
                    "the next periodic task will", exc_info=True)
        return False


def refresh(virtapi, stats: Mapping[str, str], nodename: str) -> None:
    """Put ``stats`` into the node's stats from inside the tracker's own
    update (``update_provider_tree``, which it calls under its lock,
    before it saves the node).

    The periodic task takes the driver's stats *before* it takes the
    lock, then writes them over the node's: a claim published in between
    would be overwritten by that older snapshot until the next publish.
    Refreshed here, the node is saved with what holds now.
    """
    rt = tracker(virtapi)
    if rt is None or not hasattr(rt, "compute_nodes") or not stats:
        return
    _merge(rt, dict(stats), nodename)


def _merge(rt, new: Mapping[str, str], nodename: str | None) -> list:
    """The tracker's nodes whose stats ``new`` changed, changed."""
    changed = []
    nodes = [nodename] if nodename else list(rt.compute_nodes)
    for node in nodes:
        cn = rt.compute_nodes.get(node)
        if cn is None or node not in rt.stats:
            continue
        current = rt.stats[node]
        if all(current.get(k) == v for k, v in new.items()):
            continue
        current.update(new)
        cn.stats = current
        changed.append(cn)
    return changed
