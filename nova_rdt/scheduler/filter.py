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

What the compute will decide, the filter decides first, with the
compute's own answers: one model, the compute's.

* a compute publishes its claim's solver input, and the host is judged
  by that claim run on it (:mod:`nova_rdt.scheduler.claim`), so the two
  cannot disagree; a compute that publishes none (an older nova-rdt, or
  one that has not reported yet) gets no ``rdt:`` request, and the log
  says so and what to do;
* a guest with a NUMA topology is judged on the host cells and the
  pinning Nova's own NUMA fit will give it
  (``hardware.numa_fit_instance_to_host``: the first fitting cell in
  Nova's order, whatever room the others have), as the compute's claim
  is given them;
* the earlier instances of a multi-create count, as Nova's
  ``HostState.consume_from_request`` counts their RAM and CPUs: Nova
  filters the same hosts again for each instance of one RequestSpec, and
  the host it picked shows one more ``num_instances`` the next time.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging as std_logging
import threading
import weakref

from nova import exception
from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils
from nova.virt import hardware
from oslo_log import log as logging

from nova_rdt.allocation import hoststate
from nova_rdt.allocation import planner
from nova_rdt.allocation import spec
from nova_rdt.scheduler import claim as claim_mod

LOG = logging.getLogger(__name__)

DEGRADED_STAT = hoststate.DEGRADED_STAT

# (host, node) -> (published string, what it reads as).  Not on the
# HostState: Nova 34's HostManager builds new HostState objects for every
# request (_get_host_states), from ComputeNode records loaded again.
_SUMMARIES: dict[tuple[str, str], tuple] = {}
_MAX_HOSTS = 200_000


class Published:
    """A document with the compute's solver input, read once per
    content: the state, and the claim's verdicts already asked of it
    (request key, Nova's fit) -> why the compute refuses, or None."""

    __slots__ = ("state", "memo")

    def __init__(self, state: hoststate.HostRdtState):
        self.state = state
        self.memo: dict = {}

    def refusal(self, r: _Request, fit: claim_mod.Fit) -> str | None:
        key = (r.key, fit)
        try:
            return self.memo[key]
        except KeyError:
            pass
        why = self.memo[key] = claim_mod.refusal(self.state, r.req,
                                                 r.placement, fit)
        return why


# Why a host with an RDT document is refused every rdt: request when the
# document holds no solver input this scheduler can run.  Tenants read
# these in a fault (no host names); the log adds the host and the fix.
_NO_INPUT = ("no nova-rdt solver input (nova-rdt older than the "
             "scheduler's, or not yet reported)")
_NO_INPUT_FIX = "upgrade nova-rdt on it"
_UNREADABLE = ("an RDT state this scheduler cannot read (nova-rdt newer "
               "than the scheduler's)")
_UNREADABLE_FIX = "upgrade nova-rdt on the schedulers"
_FIXES = {_NO_INPUT: _NO_INPUT_FIX, _UNREADABLE: _UNREADABLE_FIX}


def _read(raw: str) -> Published | str:
    """The compute's claim input, or why there is none to judge by (one
    of :data:`_FIXES`' keys).

    There is no other model to fall back on: a host is judged by the
    claim it will make, or gets no rdt: request.  Nova upgrades the
    schedulers before the computes, so during a rolling upgrade the
    computes not upgraded yet take no rdt: request (the others do, and
    non-rdt requests go everywhere as before).
    """
    # Hosts alike (idle ones of one model) publish equal documents: one
    # reading and one set of verdicts serves them all.
    pub = _PUBLISHED.get(raw)
    if pub is not None:
        return pub
    state = hoststate.HostRdtState.from_stats({hoststate.STATS_KEY: raw})
    if state is None or (state.solver is None and '"plan":' in raw):
        # A version or an input form this reader does not know.
        return _UNREADABLE
    if state.solver is None:
        return _NO_INPUT
    if len(_PUBLISHED) >= _MAX_HOSTS:
        _PUBLISHED.clear()
    pub = _PUBLISHED[raw] = Published(state)
    return pub


_PUBLISHED: dict[str, Published] = {}


def host_summary(host_state) -> Published | str | None:
    """The host's published state, read once per change of content:
    the compute's claim input, why it has none (a str), or None for a
    host that publishes no RDT state at all."""
    stats = host_state.stats
    raw = stats.get(hoststate.STATS_KEY) if stats else None
    key = (host_state.host, host_state.nodename)
    cached = _SUMMARIES.get(key)
    # Equal strings compare in one memcmp; a new but equal one is a hit.
    if cached is not None and cached[0] == raw:
        return cached[1]
    summary = _read(raw) if raw else None
    if isinstance(summary, str):
        # Once per change of the host's document, not per request: the
        # operator's to fix, and every rdt: request skips this host.
        LOG.warning("RDTFilter: compute %s publishes %s: %s; it gets no "
                    "rdt: request until then", host_state.host, summary,
                    _FIXES[summary])
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

    __slots__ = ("spec_obj", "req", "placement", "key", "numa_key",
                 "several")

    def __init__(self, spec_obj):
        self.spec_obj = spec_obj
        self.numa_key = None
        # A multi-create: its earlier instances are counted (the field's
        # default is 1).
        self.several = "num_instances" in spec_obj \
            and (spec_obj.num_instances or 1) > 1
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
        # Requests alike get one key, so a document that did not change
        # answers a request like an earlier one from its memo.
        self.key = _request_key((self.req, self.placement))
        if cells:
            self.numa_key = _numa_key(spec_obj, topo)

    def nova_fit(self, host_state) -> tuple | None:
        """Per guest node, (the host cell, its (vCPU, pCPU) pinning or
        None) as Nova's NUMA fit gives them here; None when it finds
        none.

        The compute claims with the same function, on the same host
        topology and the limits the scheduler hands it
        (``host_state.limits['numa_topology']``, set by
        NUMATopologyFilter), taking the first cell that fits in Nova's
        order: so this is the cell the driver will be given.  The fit
        depends only on the host's NUMA usage, the limits and the
        request's NUMA shape, so it is worked out once per distinct
        triple (not when PCI devices are asked for: they depend on more),
        and looked up by the host and its ``updated`` time first.
        """
        topo = host_state.numa_topology
        limits = (host_state.limits or {}).get("numa_topology")
        key = seen = None
        if self.numa_key is not None:
            what = (_limits_key(limits), self.numa_key)
            if host_state.updated is not None:
                # The same host, not changed since (Nova moves ``updated``
                # with every save of its node and every consumption).
                seen = (host_state.host, host_state.nodename,
                        host_state.updated, what)
                hit = _NOVA_CELLS.get(seen, _MISS)
                if hit is not _MISS:
                    return hit
            # Another host, or this one changed: the same NUMA usage gives
            # the same fit.
            key = (_topology_key(topo), _pci_key(host_state.pci_stats),
                   what)
            hit = _NOVA_CELLS.get(key, _MISS)
            if hit is not _MISS:
                if seen is not None:
                    _NOVA_CELLS[seen] = hit
                return hit
        spec_obj = self.spec_obj
        pci = spec_obj.pci_requests if "pci_requests" in spec_obj else None
        candidates = getattr(host_state, "allocation_candidates", None)
        try:
            fitted = hardware.numa_fit_instance_to_host(
                topo, spec_obj.numa_topology.obj_clone(), limits=limits,
                pci_requests=pci.requests if pci else None,
                pci_stats=host_state.pci_stats,
                provider_mapping=candidates[0]["mappings"] if candidates
                else None)
        except Exception:                       # pragma: no cover
            # Nova's own filter meets the same error and refuses.
            LOG.debug("RDTFilter: NUMA fit failed on %s", host_state,
                      exc_info=True)
            fitted = None
        cells = None if fitted is None else _fit_of(fitted)
        if key is not None:
            if len(_NOVA_CELLS) >= _MAX_FITS:
                _NOVA_CELLS.clear()
            _NOVA_CELLS[key] = cells
            if seen is not None:
                _NOVA_CELLS[seen] = cells
        return cells


_NO_RDT = "no RDT state published (no RDT, or resctrl lost)"
_NO_FIT = "no room on the host cells Nova's NUMA fit gives"

# Nova keeps 255 characters of a fault's message, and its NoValidHost
# puts "No valid host was found. " before the reason.
_REASON_MAX = 255 - len("No valid host was found. ")


def _short(text: str) -> str:
    return text if len(text) <= _REASON_MAX else \
        text[:_REASON_MAX - 3].rstrip() + "..."


def _get(obj, name):
    return getattr(obj, name) if name in obj else None


def _topology_key(topo) -> tuple:
    """Everything of a host's NUMA topology Nova's fit reads."""
    out = []
    for c in topo.cells:
        net = _get(c, "network_metadata")
        out.append((
            c.id, _get(c, "socket"), c.memory, c.memory_usage, c.cpu_usage,
            frozenset(c.cpuset), frozenset(c.pcpuset),
            frozenset(c.pinned_cpus), tuple(map(frozenset, c.siblings)),
            tuple((p.size_kb, p.total, p.used, _get(p, "reserved") or 0)
                  for p in c.mempages),
            None if net is None else (frozenset(net.physnets),
                                      net.tunneled)))
    return tuple(out)


def _pci_key(pci_stats) -> tuple | None:
    """PCI devices per host cell: Nova's fit orders cells by them."""
    if not pci_stats:
        return None
    per: dict = {}
    for pool in pci_stats.pools:
        per[pool["numa_node"]] = per.get(pool["numa_node"], 0) \
            + pool["count"]
    return tuple(sorted(per.items(), key=repr))


def _limits_key(limits) -> tuple | None:
    if limits is None:
        return None
    net = _get(limits, "network_metadata")
    return (_get(limits, "cpu_allocation_ratio"),
            _get(limits, "ram_allocation_ratio"),
            None if net is None else (frozenset(net.physnets),
                                      net.tunneled))


_MISS = object()
# (host NUMA usage, PCI devices per cell, (limits, the request's NUMA
# shape)) -> cells, and (host, node, updated, (limits, shape)) -> cells.
_NOVA_CELLS: dict = {}
_MAX_FITS = 100_000


def _numa_key(spec_obj, topo):
    """What Nova's NUMA fit depends on in the request, or None when it
    also depends on what a key cannot hold (PCI devices)."""
    if "pci_requests" in spec_obj and spec_obj.pci_requests \
            and spec_obj.pci_requests.requests:
        return None
    fields = ("cpu_policy", "cpu_thread_policy", "pagesize", "memory")
    cells = tuple(
        (len(c.cpuset), len(c.pcpuset),
         *(getattr(c, f) if f in c else None for f in fields))
        for c in topo.cells)
    emu = topo.emulator_threads_policy \
        if "emulator_threads_policy" in topo else None
    meta = spec_obj.network_metadata if "network_metadata" in spec_obj \
        else None
    net = None if meta is None else (
        tuple(sorted(meta.physnets)) if "physnets" in meta else None,
        meta.tunneled if "tunneled" in meta else None)
    return cells, emu, net


@dataclasses.dataclass
class _Taken:
    """The instances of one request already placed on one host."""

    spec_obj: object
    seen: int                          # the host's num_instances
    fits: list                         # Nova's fit of each, or None
    # (the document they were claimed on, how many, the result)
    after: tuple | None = None


def _fitted(spec_obj) -> claim_mod.Fit:
    """The host cells and pinning Nova's consume_from_request just gave
    the request (it stores the fitted topology back into the
    RequestSpec), in :meth:`_Request.nova_fit`'s form."""
    topo = spec_obj.numa_topology if "numa_topology" in spec_obj else None
    if topo is None or not topo.cells:
        return None
    return _fit_of(topo)


def _fit_of(topo) -> claim_mod.Fit:
    return tuple((c.id, tuple(sorted(c.cpu_pinning.items()))
                  if "cpu_pinning_raw" in c and c.cpu_pinning_raw else None)
                 for c in topo.cells)


class RDTFilter(filters.BaseHostFilter):
    """Hosts with the RDT capabilities, free ways, CLOS, RMIDs and the
    class asked for, on the host cells the instance can use."""

    # On rebuild the instance stays where it is and already holds its ways.
    RUN_ON_REBUILD = False

    def __init__(self):
        super().__init__()
        self._last: _Request | None = None
        # The index of the request's instance being filtered, per thread.
        self._index = threading.local()
        # HostState -> the request it last saw and what that request
        # already took there.  Nova 34 makes HostStates per request, so
        # they go with it.
        self._taken: weakref.WeakKeyDictionary = \
            weakref.WeakKeyDictionary()

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
        candidates = list(filter_obj_list)
        hosts = [h for h in candidates if passes(h, r)]
        if not hosts and candidates and \
                getattr(self._index, "value", None) == 0:
            # Nova's own NoValidHost says only "not enough hosts"; the
            # reason would stay in this log.  Raised here, it reaches the
            # instance's fault.  Only for a request's first instance:
            # Nova filters it before it claims anything, while later
            # instances of a multi-create have claims that only Nova's
            # own NoValidHost path gives back.
            raise exception.NoValidHost(
                reason=self._reason(candidates, r, spec_obj))
        return hosts

    def run_filter_for_index(self, index):
        # Nova asks this right before filter_all, for the same request,
        # in the same thread (a green one under eventlet).
        self._index.value = index
        return super().run_filter_for_index(index)

    def host_passes(self, host_state, spec_obj):
        return self._passes(host_state, self._request(spec_obj))

    @staticmethod
    def _reason(hosts, r: _Request, spec_obj) -> str:
        """Why no host passed, for the instance's fault.

        The fault is the tenant's to read: it says what the request
        cannot get, in the words of the most common refusal, without host
        names, host counts or other tenants' masks (Nova stores at most
        255 characters of it).  The whole breakdown, host by host, goes
        to this log.
        """
        req = r.req
        if isinstance(req, spec.SpecError):
            return _short(f"RDTFilter: the flavor's rdt: extra specs: {req}")
        uuid = spec_obj.instance_uuid if "instance_uuid" in spec_obj \
            else None
        counts: dict[str, int] = {}
        # Hosts alike publish the same document: each answered once.
        seen: dict[tuple, str] = {}
        for h in hosts:
            # filter_all read every host just now: what it read is cached.
            cached = _SUMMARIES.get((h.host, h.nodename))
            read = cached[1] if cached is not None else host_summary(h)
            fit = r.nova_fit(h) if isinstance(read, Published) \
                and r.placement.guest is not None else None
            why = seen.get((id(read), fit))
            if why is None:
                if read is None:
                    why = _NO_RDT
                elif isinstance(read, str):
                    why = read
                else:
                    why = (fit is not None or r.placement.guest is None) \
                        and read.refusal(r, fit) or _NO_FIT
                seen[id(read), fit] = why
            counts[why] = counts.get(why, 0) + 1
            if LOG.isEnabledFor(std_logging.INFO):
                LOG.info("RDTFilter: %s: %s", h, why, instance_uuid=uuid)
        # What this request lacks on a host that can judge it comes
        # first, then a host that cannot (its nova-rdt is not this
        # scheduler's), then a host without RDT (the ONP lab's
        # controller would otherwise hide "no free CLOS left" on a tie).
        top = min(counts.items(), key=lambda kv: (
            kv[0] == _NO_RDT, kv[0] in _FIXES, -kv[1], kv[0]))[0]
        # What follows the first ";" is where the free ways are: another
        # tenant's business.
        return _short("RDTFilter: no host can give this flavor's rdt: "
                      "request: " + top.split(";")[0])

    def _passes(self, host_state, r: _Request) -> bool:
        req = r.req
        if req is None:
            return True
        if isinstance(req, spec.SpecError):
            return False
        pub = host_summary(host_state)
        if pub is None:
            # An empty "rdt" stat is a host whose resctrl went away
            # (rdt_degraded says why): refused like a host without RDT.
            if LOG.isEnabledFor(std_logging.DEBUG):
                why = (host_state.stats or {}).get(DEGRADED_STAT)
                LOG.debug("RDTFilter: %s publishes no RDT state%s",
                          host_state, f" (degraded: {why})" if why else "")
            return False
        if isinstance(pub, str):
            LOG.debug("RDTFilter: %s publishes %s: %s", host_state, pub,
                      _FIXES[pub])
            return False
        return self._claims(host_state, pub, r)

    def _claims(self, host_state, pub: Published, r: _Request) -> bool:
        """The compute's own claim on its published solver input, with
        Nova's fit (the cells and the pinning its claim will be given)
        and the request's earlier instances on this host claimed first."""
        taken = self._taken_here(host_state, r) if r.several else None
        if taken:
            pub = self._after(pub, taken, r)
            if pub is None:
                LOG.debug("RDTFilter: %s is full after %d instances of "
                          "this request", host_state, len(taken.fits))
                return False
        fit = None
        if r.placement.guest is not None:
            if pub.refusal(r, claim_mod.ANYWHERE) is None:
                return True
            fit = r.nova_fit(host_state)
            if fit is None:
                return False            # NUMATopologyFilter refuses too
        why = pub.refusal(r, fit)
        if why is not None:
            LOG.debug("RDTFilter: %s fails: %s", host_state, why)
            return False
        return True

    @staticmethod
    def _after(pub: Published, taken: _Taken, r: _Request
               ) -> Published | None:
        """``pub`` with this request's earlier instances claimed on it,
        each on the fit Nova gave it (None: they do not all fit, so
        neither does another)."""
        n = len(taken.fits)
        if taken.after is not None and taken.after[0] is pub \
                and taken.after[1] == n:
            return taken.after[2]
        state = claim_mod.after_all(pub.state, r.req, r.placement,
                                    taken.fits)
        after = None if state is None else Published(state)
        taken.after = (pub, n, after)
        return after

    def _taken_here(self, host_state, r: _Request) -> _Taken | None:
        """What earlier instances of this request took on this host.

        Nova filters the same HostStates again for each instance of a
        multi-create, and consume_from_request adds one to the chosen
        host's ``num_instances``: a host that grew since its last look
        got the instance just placed.
        """
        n = host_state.num_instances
        rec = self._taken.get(host_state)
        if rec is None or rec.spec_obj is not r.spec_obj or n < rec.seen:
            self._taken[host_state] = _Taken(r.spec_obj, n, [])
            return None
        if n > rec.seen:
            fit = _fitted(r.spec_obj) if r.placement.guest else None
            rec.fits.extend([fit] * (n - rec.seen))
            rec.seen = n
        return rec if rec.fits else None
