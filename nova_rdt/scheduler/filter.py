"""RDTFilter: pass only hosts that can give an instance its rdt: request.

Enable it with::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_rdt.scheduler.filter.RDTFilter
    enabled_filters = ...,RDTFilter

Cost matters: a scheduler runs this for every host of every request.  The
flavor's request is parsed once per request, and a host's published state
once per host-state update (it is cached on the HostState, keyed by the
identity of the stats dict that Nova replaces on every update).
"""

from __future__ import annotations

from nova.scheduler import filters
import logging as std_logging

from oslo_log import log as logging

from nova_rdt.allocation import hoststate
from nova_rdt.allocation import planner
from nova_rdt.allocation import spec

LOG = logging.getLogger(__name__)

_CACHE_ATTR = "_nova_rdt_state"


def host_summary(host_state) -> planner.HostSummary | None:
    """The host's published state, parsed once per host-state update."""
    stats = host_state.stats
    cached = getattr(host_state, _CACHE_ATTR, None)
    if cached is not None and cached[0] is stats:
        return cached[1]
    state = hoststate.HostRdtState.from_stats(stats)
    summary = planner.HostSummary.of(state) if state is not None else None
    setattr(host_state, _CACHE_ATTR, (stats, summary))
    return summary


class RDTFilter(filters.BaseHostFilter):
    """Hosts with the RDT capabilities, free ways and a free CLOS asked for."""

    # On rebuild the instance stays where it is and already holds its ways.
    RUN_ON_REBUILD = False

    def __init__(self):
        super().__init__()
        self._last: tuple | None = None

    def _request(self, spec_obj):
        """The parsed request, reused for every host of the same request."""
        last = self._last
        if last is not None and last[4] is spec_obj:
            return last[3], last[1], last[5]
        flavor = spec_obj.flavor
        extra = flavor.extra_specs if "extra_specs" in flavor else None
        topo = spec_obj.numa_topology if "numa_topology" in spec_obj \
            else None
        nodes = len(topo.cells) if topo is not None else None
        if not extra or not any(k.startswith(spec.PREFIX) for k in extra):
            req = None
        else:
            try:
                req = spec.parse(extra, flavor.vcpus, nodes or 1)
            except spec.SpecError as e:
                # The API validators normally stop this; a flavor from
                # before them cannot be placed anywhere.
                LOG.warning("RDTFilter: flavor %s has a bad spec: %s",
                            flavor.flavorid, e)
                req = e
        # The spec object itself is kept, so identity cannot be reused.
        self._last = (extra, nodes, flavor.vcpus, req, spec_obj, {})
        return req, nodes, self._last[5]

    def host_passes(self, host_state, spec_obj):
        req, nodes, memo = self._request(spec_obj)
        if req is None:
            return True
        if isinstance(req, spec.SpecError):
            return False
        summary = host_summary(host_state)
        if summary is None:
            LOG.debug("RDTFilter: %s publishes no RDT state", host_state)
            return False
        if not summary.fits(req, nodes, memo):
            if LOG.isEnabledFor(std_logging.DEBUG):
                LOG.debug("RDTFilter: %s fails: %s", host_state,
                          planner.fits_anywhere(summary.state, req, nodes))
            return False
        return True
