"""RDTFilter: pass only hosts that can give an instance its rdt: request.

Enable it with::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_rdt.scheduler.filter.RDTFilter
    enabled_filters = ...,RDTFilter

Cost matters: a scheduler runs this for every host of every request.  The
flavor's request is parsed once per request.  A host's published state is
parsed once per change of its content: Nova's HostManager reloads every
ComputeNode for every request and builds a new HostState with a new
``stats`` dict, so the cache is kept here, per (host, node), and keyed on
the published string itself, not on any object's identity.
"""

from __future__ import annotations

import itertools
import logging as std_logging

from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_rdt.allocation import hoststate
from nova_rdt.allocation import planner
from nova_rdt.allocation import spec

LOG = logging.getLogger(__name__)

_POLICIES_PINNED = ("dedicated", "mixed")
DEGRADED_STAT = hoststate.DEGRADED_STAT

# (host, node) -> (published string, its summary).  Not on the HostState:
# Nova 34's HostManager builds new HostState objects for every request
# (_get_host_states), from ComputeNode records loaded again.
_SUMMARIES: dict[tuple[str, str], tuple] = {}
_MAX_HOSTS = 200_000


def host_summary(host_state) -> planner.HostSummary | None:
    """The host's published state, parsed once per change of content."""
    stats = host_state.stats
    raw = stats.get(hoststate.STATS_KEY) if stats else None
    key = (host_state.host, host_state.nodename)
    cached = _SUMMARIES.get(key)
    # Equal strings compare in one memcmp; a new but equal one is a hit.
    if cached is not None and cached[0] == raw:
        return cached[1]
    summary = planner.HostSummary.parse(raw) if raw else None
    if len(_SUMMARIES) >= _MAX_HOSTS:
        _SUMMARIES.clear()            # hosts gone for good; start over
    _SUMMARIES[key] = (raw, summary)
    return summary


_REQUEST_KEYS: dict = {}
_REQUEST_IDS = itertools.count(1)


def _request_key(content) -> int:
    """A small int per distinct request; ids only grow, never alias."""
    key = _REQUEST_KEYS.get(content)
    if key is None:
        if len(_REQUEST_KEYS) > 4096:
            _REQUEST_KEYS.clear()
        key = _REQUEST_KEYS[content] = next(_REQUEST_IDS)
    return key


class _Request:
    """One request spec, read once for all the hosts it is checked on."""

    __slots__ = ("spec_obj", "req", "placement", "pinned", "memo", "key")

    def __init__(self, spec_obj):
        self.spec_obj = spec_obj
        self.memo: dict = {}
        self.pinned = None
        flavor = spec_obj.flavor
        extra = flavor.extra_specs if "extra_specs" in flavor else None
        topo = spec_obj.numa_topology if "numa_topology" in spec_obj \
            else None
        cells = list(topo.cells) if topo is not None else []
        if not extra or not any(spec.is_rdt_key(k) for k in extra):
            self.req = None
            return
        try:
            self.req = spec.parse(extra, flavor.vcpus, len(cells) or 1)
        except spec.SpecError as e:
            # The API validators normally stop this; a flavor from before
            # them cannot be placed anywhere.
            LOG.warning("RDTFilter: flavor %s has a bad spec: %s",
                        flavor.flavorid, e)
            self.req = e
            return
        if not cells:
            self.placement = planner.Placement(flavor.vcpus)
        else:
            self.placement = planner.Placement(flavor.vcpus, tuple(
                frozenset(c.cpuset) | frozenset(c.pcpuset) for c in cells))
        # Requests alike get one key, so a host whose content did not
        # change answers a request like the last one from its summary.
        self.key = _request_key((self.req, self.placement))
        if not cells:
            return
        # A pinned guest node can only go to a host cell with as many free
        # pCPUs: a necessary condition of NUMATopologyFilter's fit.
        if any(c.cpu_policy in _POLICIES_PINNED for c in cells
               if "cpu_policy" in c):
            self.pinned = tuple(
                len(c.pcpuset) if "cpu_policy" in c
                and c.cpu_policy in _POLICIES_PINNED else 0 for c in cells)

    def eligible(self, host_state, summary) -> planner.Eligible:
        """Per guest node, the host cells with room for its pinned CPUs."""
        if self.pinned is None or len(summary.cells) < 2:
            return None
        topo = host_state.numa_topology
        if topo is None:
            return None
        free = {c.id: len(c.pcpuset) - len(c.pinned_cpus)
                for c in topo.cells}
        return tuple(frozenset(cid for cid, n in free.items() if n >= need)
                     if need else None for need in self.pinned)


class RDTFilter(filters.BaseHostFilter):
    """Hosts with the RDT capabilities, free ways, CLOS, RMIDs and the
    class asked for, on the host cells the instance can use."""

    # On rebuild the instance stays where it is and already holds its ways.
    RUN_ON_REBUILD = False

    def __init__(self):
        super().__init__()
        self._last: _Request | None = None

    def _request(self, spec_obj) -> _Request:
        """The parsed request, reused for every host of the same request."""
        last = self._last
        if last is not None and last.spec_obj is spec_obj:
            return last
        self._last = _Request(spec_obj)
        return self._last

    def filter_all(self, filter_obj_list, spec_obj):
        """Nova's loop, without its per-host overhead.

        BaseHostFilter._filter_one imports a module and asks whether the
        request is a rebuild for every host; both answers are the same
        for the whole request, so they are asked once here.
        """
        if not self.RUN_ON_REBUILD and \
                scheduler_utils.request_is_rebuild(spec_obj):
            return list(filter_obj_list)
        r = self._request(spec_obj)
        if r.req is None:
            return list(filter_obj_list)
        passes = self._passes
        return [h for h in filter_obj_list if passes(h, r)]

    def host_passes(self, host_state, spec_obj):
        return self._passes(host_state, self._request(spec_obj))

    def _passes(self, host_state, r: _Request) -> bool:
        req = r.req
        if req is None:
            return True
        if isinstance(req, spec.SpecError):
            return False
        summary = host_summary(host_state)
        if summary is None:
            # An empty "rdt" stat is a host whose resctrl went away
            # (rdt_degraded says why): refused like a host without RDT.
            if LOG.isEnabledFor(std_logging.DEBUG):
                why = (host_state.stats or {}).get(DEGRADED_STAT)
                LOG.debug("RDTFilter: %s publishes no RDT state%s",
                          host_state, f" (degraded: {why})" if why else "")
            return False
        last = summary.last
        if last is not None and last[0] == r.key:
            verdict = last[1]
        else:
            verdict = summary.verdict(req, r.placement, r.memo)
            summary.last = (r.key, verdict)
        eligible = None
        if verdict == summary.SOME and r.pinned:
            # Only some host cells have the ways: which ones Nova can pick
            # matters, and reading the host's NUMA topology (costly
            # objects) is worth it only now.
            eligible = r.eligible(host_state, summary)
            if eligible is not None:
                verdict = summary.verdict(req, r.placement, r.memo,
                                          eligible)
        if verdict == summary.NO:
            if LOG.isEnabledFor(std_logging.DEBUG):
                state = hoststate.HostRdtState.from_stats(host_state.stats)
                LOG.debug("RDTFilter: %s fails: %s", host_state,
                          planner.fits_anywhere(state, req, r.placement,
                                                eligible)
                          if state is not None else "unreadable state")
            return False
        return True
