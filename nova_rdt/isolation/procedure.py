"""The ONP app note's isolation experiment, once, for any cloud.

Four conditions, in this order: the nova-rdt flavors off (flavors
without ``rdt:`` keys) with the neighbour idle then busy, then the
nova-rdt flavors on (forwarding VM sharing the PMDs' COS, neighbour on
disjoint ways) with the neighbour idle then busy.  Each setting boots
its own pair of servers on its own flavors, checks they share a host,
and measures RFC 2544 through the forwarding VM once with the neighbour
paused (idle) and once running (busy).  The idle neighbour is the
reference each busy run is compared with; the comparison that matters,
as in the app note, is no-CAT vs CAT with the neighbour busy.

Servers and flavors are always deleted, on failure and Ctrl-C too.
"""

from __future__ import annotations

import dataclasses
import time
import typing

from nova_rdt import exception
from nova_rdt.isolation import cloud as cloud_mod
from nova_rdt.isolation import tables as tables_mod

VERSION = 1

SEED_FRAME_SIZES = (64, 256, 1024, 1512)
NEIGHBOURS = ("idle", "busy")
RDT_SETTINGS = ("off", "on")
NOISY_LOADS = ("memtester", "stress-ng")

EMULATED_NOTE = (
    "RDT is emulated on this host: the nova-rdt flavors are scheduled, "
    "written into the domains and applied to the emulated resctrl by "
    "libvirt, but no hardware enforces the cache partitioning, so the RDT "
    "on/off difference is not a measurement of CAT.  The CPU and L3 "
    "contention between the two VMs is real: the idle/busy difference is "
    "a real measurement.")


class IsolationError(exception.NovaRdtError):
    """The procedure could not be carried out (the message says why)."""


class NotColocated(IsolationError):
    def __init__(self, forwarding_host: str, noisy_host: str, rdt: str):
        self.forwarding_host = forwarding_host
        self.noisy_host = noisy_host
        super().__init__(
            f"rdt {rdt}: the forwarding VM runs on host "
            f"{forwarding_host!r} but the noisy neighbour on "
            f"{noisy_host!r}; the experiment needs them on one host")


class CleanupError(IsolationError):
    """Servers or flavors could not be deleted; the message lists them."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the procedure does; every limit is here, none in the code."""

    frame_sizes: tuple[int, ...] = SEED_FRAME_SIZES
    loss_tolerance: float = 0.001           # 0.1 %, as the app note
    forwarding_vcpus: int = 2
    forwarding_ram_mb: int = 1024
    noisy_vcpus: int = 1
    noisy_ram_mb: int = 512
    forwarding_l3_ways: int = 4
    # The neighbour's own ways (disjoint from the forwarding VM's), or a
    # class from [rdt] classes on the computes; the class wins if set.
    noisy_l3_ways: int | None = 2
    noisy_class: str | None = None
    # Extra specs both settings share (e.g. hw:mem_page_size=large).
    common_specs: typing.Mapping[str, str] = dataclasses.field(
        default_factory=dict)
    # hw:cpu_policy of all four flavors (the app note pins both VMs);
    # None: not set, for computes with no dedicated CPUs.
    cpu_policy: str | None = "dedicated"
    noisy_load: str = "memtester"
    noisy_memory_mb: int = 256              # memtester/stress-ng size
    forwarding_user_data: str | None = None  # script text, overrides ours
    noisy_user_data: str | None = None
    # Seconds the unpaused neighbour runs before measuring, so that it
    # fills the cache first (and the same in --short mode).
    settle_s: float = 10.0
    settle_s_short: float = 2.0
    max_latency_ratio: float = 1.25         # busy / idle average, CAT on
    max_p99_ratio: float = 2.0              # busy / idle p99, CAT on
    # Are the ratio limits a pass/fail check?  None: only on real RDT.
    enforce_ratios: bool | None = None
    # The neighbour's CPU time per wall-clock second (in vCPUs) over a
    # measurement: at least this when busy, at most that when paused.
    busy_min_cpu_share: float = 0.2
    idle_max_cpu_share: float = 0.05
    name_prefix: str = "rdt-iso"

    def __post_init__(self):
        def bad(field, why):
            raise ValueError(f"isolation settings: {field} {why}")
        if not self.frame_sizes:
            bad("frame_sizes", "is empty")
        for s in self.frame_sizes:
            if isinstance(s, bool) or not isinstance(s, int) \
                    or not 64 <= s <= 9216:
                bad("frame_sizes", f"has {s!r}, not 64-9216 bytes")
        if not 0 <= self.loss_tolerance < 1:
            bad("loss_tolerance", f"{self.loss_tolerance!r} is not in [0, 1)")
        for f in ("forwarding_vcpus", "forwarding_ram_mb", "noisy_vcpus",
                  "noisy_ram_mb", "forwarding_l3_ways", "noisy_memory_mb"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                bad(f, f"{v!r} is not a positive integer")
        if self.noisy_class is None and self.noisy_l3_ways is None:
            bad("noisy_l3_ways", "and noisy_class are both unset")
        if self.noisy_class is None and (
                isinstance(self.noisy_l3_ways, bool)
                or not isinstance(self.noisy_l3_ways, int)
                or self.noisy_l3_ways < 1):
            bad("noisy_l3_ways", f"{self.noisy_l3_ways!r} is not a "
                                 f"positive integer")
        if self.noisy_class is not None and not self.noisy_class:
            bad("noisy_class", "is empty")
        if self.noisy_load not in NOISY_LOADS:
            bad("noisy_load", f"{self.noisy_load!r} is not one of "
                              f"{', '.join(NOISY_LOADS)}")
        for f in ("settle_s", "settle_s_short"):
            if getattr(self, f) < 0:
                bad(f, "is negative")
        for f in ("max_latency_ratio", "max_p99_ratio"):
            if not getattr(self, f) >= 1:
                bad(f, f"{getattr(self, f)!r} is below 1")
        if not 0 <= self.idle_max_cpu_share < self.busy_min_cpu_share:
            bad("idle_max_cpu_share", "must be >= 0 and below "
                                      "busy_min_cpu_share")
        if self.cpu_policy not in (None, "dedicated", "shared"):
            bad("cpu_policy", f"{self.cpu_policy!r} is not dedicated, "
                              f"shared or None")
        if "hw:cpu_policy" in self.common_specs:
            bad("common_specs", "has hw:cpu_policy: use cpu_policy")
        for k, v in self.common_specs.items():
            if k.startswith("rdt:"):
                bad("common_specs", f"has {k}: rdt: keys belong to the "
                                    f"rdt flavors only")
            if not isinstance(v, str):
                bad("common_specs", f"{k}={v!r} is not a string")

    def _base_specs(self) -> dict[str, str]:
        specs = dict(self.common_specs)
        if self.cpu_policy:
            specs["hw:cpu_policy"] = self.cpu_policy
        return specs

    def forwarding_specs(self, rdt: bool) -> dict[str, str]:
        specs = self._base_specs()
        if rdt:
            specs.update({"rdt:l3_cache_ways": str(self.forwarding_l3_ways),
                          "rdt:pmd_share": "true"})
        return specs

    def noisy_specs(self, rdt: bool) -> dict[str, str]:
        specs = self._base_specs()
        if rdt:
            if self.noisy_class is not None:
                specs["rdt:class"] = self.noisy_class
            else:
                specs["rdt:l3_cache_ways"] = str(self.noisy_l3_ways)
        return specs

    def settle(self, short: bool) -> float:
        return self.settle_s_short if short else self.settle_s

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["frame_sizes"] = list(self.frame_sizes)
        d["common_specs"] = dict(self.common_specs)
        return d


def _say_nothing(_msg: str) -> None:
    pass


class _Ledger:
    """What this run created and has not deleted yet."""

    def __init__(self, cloud, say):
        self.cloud, self.say = cloud, say
        self.servers: list[str] = []
        self.flavors: list[str] = []

    def clean(self) -> list[str]:
        """Delete everything, newest server first, then the flavors,
        each tried twice (a delete that times out once often goes
        through); returns what could not be deleted, with the reason.
        An object stays listed until deleted or given up on, so that a
        Ctrl-C in the middle leaves it to the next clean()."""
        failed = []
        for kind, ids, delete in (
                ("server", self.servers, self.cloud.delete),
                ("flavor", self.flavors, self.cloud.delete_flavor)):
            for ident in reversed(list(ids)):
                for _attempt in range(2):
                    try:
                        delete(ident)
                        break
                    except Exception as e:  # keep deleting the others
                        error = e
                else:
                    failed.append(f"{kind} {ident}: {error}")
                    self.say(f"could not delete {kind} {ident}: {error}")
                ids.remove(ident)
        return failed


def _frame(d, i: int) -> dict:
    """One measured frame size, checked (the cloud is not trusted to
    have the schema right: a wrong key would surface much later)."""
    if not isinstance(d, dict):
        raise IsolationError(f"measure() result {i} is {type(d).__name__}, "
                             f"not a dict")
    missing = [k for k in cloud_mod.FRAME_KEYS if k not in d]
    if missing:
        raise IsolationError(f"measure() result {i} lacks "
                             f"{', '.join(missing)}")
    for j, b in enumerate(d["bins"] or []):
        if not isinstance(b, dict) or not {"from_us", "to_us",
                                           "count"} <= set(b):
            raise IsolationError(f"measure() result {i} bin {j} is not "
                                 f"{{from_us, to_us, count}}: {b!r}")
    out = dict(d)
    out["bins"] = [dict(b) for b in d["bins"] or []]
    return out


def _delta(before: dict | None, after: dict | None,
           keys: tuple[str, ...]) -> dict | None:
    if before is None or after is None:
        return None
    try:
        return {k: int(after[k]) - int(before[k]) for k in keys}
    except (KeyError, TypeError, ValueError):
        return None


#: Cumulative group counters a cloud's load() may report beside
#: ``cpu_time_ns`` (bytes; their rate is judged), and gauges (recorded).
GROUP_COUNTERS = ("mbm_total_bytes", "mbm_local_bytes")
GROUP_GAUGES = ("llc_occupancy_bytes",)


def group_counters(before: dict | None, after: dict | None,
                   seconds: float) -> dict | None:
    """The neighbour's resctrl group counters over one measurement.

    None when the cloud reports no group counters at all (no
    ``rdt_group`` key: a Tempest cloud); ``rdt_group`` None when the
    neighbour has no group (its flavor has no ``rdt:`` keys).  Each
    counter's delta and rate (``<key>_per_s``, bytes/s) are None when a
    side is missing or the counter went backwards (a reset is no rate).
    """
    if not isinstance(after, dict) or "rdt_group" not in after:
        return None
    out: dict = {"rdt_group": after.get("rdt_group")}
    for key in GROUP_COUNTERS:
        a = before.get(key) if isinstance(before, dict) else None
        b = after.get(key)
        delta = (b - a if isinstance(a, int) and isinstance(b, int)
                 and b >= a else None)
        out[key] = delta
        out[key + "_per_s"] = (round(delta / seconds, 1)
                               if delta is not None and seconds > 0
                               else None)
    for key in GROUP_GAUGES:
        out[key] = after.get(key)
    return out


def judge_load(neighbour: str, before: dict | None, after: dict | None,
               seconds: float, settings: Settings) -> dict:
    """Did the neighbour's CPU time grow when busy, and only then?
    ``ok`` is None when the cloud cannot tell.  Group counters, when the
    cloud reports them, are recorded under ``counters`` (judged across
    conditions by :func:`counter_verdicts`)."""
    grown = _delta(before, after, ("cpu_time_ns",))
    out = {"before": before, "after": after, "seconds": round(seconds, 3),
           "cpu_time_ns": None, "cpu_share": None, "ok": None,
           "counters": group_counters(before, after, seconds)}
    if grown is None or seconds <= 0:
        return out
    share = grown["cpu_time_ns"] / 1e9 / seconds
    out.update(cpu_time_ns=grown["cpu_time_ns"], cpu_share=round(share, 4))
    out["ok"] = (share >= settings.busy_min_cpu_share if neighbour == "busy"
                 else share <= settings.idle_max_cpu_share)
    return out


def judge_path(vm_ports: dict | None, frames: list[dict]) -> tuple:
    """(ok, detail): did frames cross the forwarding VM?  Frames the
    receiver got must have entered and left the guest, so both of its
    counters must be at least that; without a count from the generator,
    both must at least have moved."""
    if vm_ports is None:
        return None, "the cloud reports no port counters for the VM"
    received = [f.get("received") for f in frames]
    got = (sum(received) if received and all(isinstance(r, int)
                                             for r in received) else None)
    rx, tx = vm_ports["rx"], vm_ports["tx"]
    if got is None:
        ok = rx > 0 and tx > 0
        return ok, f"the VM's ports moved rx={rx} tx={tx} frames"
    ok = rx >= got and tx >= got and got > 0
    return ok, (f"the receiver got {got} frames; the VM's ports rx={rx} "
                f"tx={tx}" + ("" if ok else ": they do not account for them"))


def _verdict(check, ok, binding, detail, **where) -> dict:
    return {"check": check, **where, "ok": ok, "binding": binding,
            "detail": detail}


def _measure_condition(cloud, settings, short, say, rdt, neighbour, fwd,
                       noisy, sleep, clock) -> tuple[dict, list[dict]]:
    if neighbour == "idle":
        say(f"rdt {rdt}: pausing the noisy neighbour")
        cloud.pause(noisy)
    else:
        say(f"rdt {rdt}: unpausing the noisy neighbour")
        cloud.unpause(noisy)
        settle = settings.settle(short)
        if settle:
            say(f"rdt {rdt}: letting the neighbour run {settle:g} s first")
            sleep(settle)
    load0, ports0, t0 = cloud.load(noisy), cloud.port_counters(fwd), clock()
    say(f"rdt {rdt}, neighbour {neighbour}: RFC 2544 at "
        f"{settings.loss_tolerance:.1%} loss, frames "
        f"{', '.join(map(str, settings.frame_sizes))} B")
    raw = cloud.measure(fwd, list(settings.frame_sizes), short)
    if not isinstance(raw, list):
        raise IsolationError(f"measure() returned {type(raw).__name__}, "
                             f"not a list")
    frames = [_frame(d, i) for i, d in enumerate(raw)]
    t1 = clock()
    load1, ports1 = cloud.load(noisy), cloud.port_counters(fwd)
    vm_ports = _delta(ports0, ports1, ("rx", "tx"))
    load = judge_load(neighbour, load0, load1, t1 - t0, settings)
    cond = {"neighbour": neighbour, "rdt": rdt, "frames": frames,
            "vm_ports": vm_ports, "neighbour_load": load}
    where = {"rdt": rdt, "neighbour": neighbour}
    ok, detail = judge_path(vm_ports, frames)
    verdicts = [_verdict("path", ok, True, detail, **where)]
    share = load["cpu_share"]
    if share is None:
        detail = "the cloud reports no CPU time for the neighbour"
    else:
        bound = (f"busy: at least {settings.busy_min_cpu_share:g}"
                 if neighbour == "busy" else
                 f"paused: at most {settings.idle_max_cpu_share:g}")
        detail = (f"the neighbour used {share:.2f} vCPU-seconds per second "
                  f"({bound})")
    verdicts.append(_verdict("neighbour_load", load["ok"], True, detail,
                             **where))
    for f in frames:
        measured = f["avg_latency_us"] is not None
        verdicts.append(_verdict(
            "latency_measured", measured, True,
            f"{f['frame_size']} B: " + ("latency measured" if measured else
                                        "no latency result"),
            frame_size=f["frame_size"], **where))
    say(f"rdt {rdt}, neighbour {neighbour}: "
        + "; ".join(f"{f['frame_size']} B "
                    + ("-" if f["avg_latency_us"] is None
                       else f"{f['avg_latency_us']:.1f} µs")
                    for f in frames)
        + ("" if vm_ports is None else
           f" (VM ports rx={vm_ports['rx']} tx={vm_ports['tx']})"))
    return cond, verdicts


def _run_setting(cloud, settings, short, say, ledger, rdt, sleep, clock,
                 state, conditions, verdicts):
    """One setting's pair and its two conditions, appended to
    ``conditions`` and ``verdicts`` as they are measured."""
    on = rdt == "on"
    tag = f"{settings.name_prefix}-{rdt}"
    fwd_flavor = cloud.create_flavor(f"{tag}-forwarding",
                                     settings.forwarding_vcpus,
                                     settings.forwarding_ram_mb,
                                     settings.forwarding_specs(on))
    ledger.flavors.append(fwd_flavor)
    noisy_flavor = cloud.create_flavor(f"{tag}-noisy", settings.noisy_vcpus,
                                       settings.noisy_ram_mb,
                                       settings.noisy_specs(on))
    ledger.flavors.append(noisy_flavor)
    say(f"rdt {rdt}: booting the forwarding VM and the noisy neighbour")
    fwd = cloud.boot(f"{tag}-forwarding", fwd_flavor, cloud_mod.FORWARDING)
    ledger.servers.append(fwd)
    noisy = cloud.boot(f"{tag}-noisy", noisy_flavor, cloud_mod.NOISY)
    ledger.servers.append(noisy)
    cloud.wait_active(fwd)
    cloud.wait_active(noisy)
    fwd_host, noisy_host = cloud.host_of(fwd), cloud.host_of(noisy)
    if fwd_host != noisy_host:
        raise NotColocated(fwd_host, noisy_host, rdt)
    state["hosts"][rdt] = fwd_host
    state["facts"] = cloud_mod.check_facts(cloud.facts())
    say(f"rdt {rdt}: both VMs on host {fwd_host}")
    verdicts.append(_verdict(
        "colocated", True, True,
        f"forwarding VM and neighbour on host {fwd_host}", rdt=rdt))
    for neighbour in NEIGHBOURS:
        cond, v = _measure_condition(cloud, settings, short, say, rdt,
                                     neighbour, fwd, noisy, sleep, clock)
        conditions.append(cond)
        verdicts += v


def ratio_verdicts(conditions: list[dict], settings: Settings,
                   rdt_kind: str) -> list[dict]:
    """Busy vs the idle reference, per frame size.  With the nova-rdt
    flavors the ratios are checked against the limits (binding only on
    real RDT unless the settings say otherwise); without them they are
    recorded, for the no-CAT vs CAT comparison."""
    binding = (rdt_kind == "real" if settings.enforce_ratios is None
               else settings.enforce_ratios)
    by = {(c["rdt"], c["neighbour"]): {f["frame_size"]: f
                                       for f in c["frames"]}
          for c in conditions}
    out = []
    for rdt in RDT_SETTINGS:
        idle, busy = by.get((rdt, "idle")), by.get((rdt, "busy"))
        if idle is None or busy is None:
            continue
        for size in settings.frame_sizes:
            a, b = idle.get(size), busy.get(size)
            for key, limit, what in (
                    ("avg_latency_us", settings.max_latency_ratio, "average"),
                    ("p99_us", settings.max_p99_ratio, "p99")):
                ra = tables_mod.ratio(b and b[key], a and a[key])
                if ra is None:
                    ok = None
                    detail = f"{size} B: no {what} latency to compare"
                else:
                    ok = ra <= limit if rdt == "on" else None
                    detail = (f"{size} B: {what} latency {b[key]:.1f} µs with "
                              f"the neighbour busy vs {a[key]:.1f} µs idle, "
                              f"ratio {ra:.2f}"
                              + (f" (limit {limit:g})" if rdt == "on" else ""))
                out.append(_verdict(f"{'avg' if what == 'average' else 'p99'}"
                                    f"_ratio", ok, binding and rdt == "on",
                                    detail, rdt=rdt, frame_size=size))
    return out


def counter_verdicts(conditions: list[dict]) -> list[dict]:
    """Per rdt setting, non-binding: did the neighbour's group show more
    activity busy than idle?  Memory bandwidth (MBM total, bytes/s over
    the measurement) where the platform counts it, else LLC occupancy at
    the end of the measurement (CMT-only hosts, such as the ONP app
    note's Haswell).  Said, not judged, where the cloud reports no group
    counters or the neighbour has no group."""
    by = {(c["rdt"], c["neighbour"]): (c.get("neighbour_load") or {})
          .get("counters") for c in conditions}
    out = []
    for rdt in RDT_SETTINGS:
        if (rdt, "idle") not in by or (rdt, "busy") not in by:
            continue
        idle, busy = by[(rdt, "idle")], by[(rdt, "busy")]
        if idle is None or busy is None:
            ok, detail = None, ("not reported: the cloud reports no group "
                                "counters for the neighbour")
        elif idle["rdt_group"] is None or busy["rdt_group"] is None:
            ok, detail = None, ("the neighbour has no resctrl group (no "
                                "rdt: keys in its flavor): no counters")
        else:
            ok, detail = _counter_compare(idle, busy)
        out.append(_verdict("neighbour_counters", ok, False, detail,
                            rdt=rdt))
    return out


def _counter_compare(idle: dict, busy: dict) -> tuple:
    group = busy["rdt_group"]
    for key, what, scale, unit in (
            ("mbm_total_bytes_per_s", "MBM total", 1e6, "MB/s"),
            ("llc_occupancy_bytes", "LLC occupancy", 2 ** 20, "MiB")):
        a, b = idle.get(key), busy.get(key)
        if a is None or b is None:
            continue
        ok = b > a
        return ok, (f"group {group}: {what} {b / scale:.2f} {unit} busy vs "
                    f"{a / scale:.2f} {unit} idle"
                    + ("" if ok else ": busy did not show more"))
    return None, (f"group {group}: neither MBM nor LLC occupancy was read "
                  f"in both conditions")


def summarize(facts: dict, conditions: list[dict], verdicts: list[dict],
              settings: Settings, hosts: dict) -> dict:
    """The summary document (the issue's schema, plus tables, verdicts,
    notes, settings and an overall ``ok``)."""
    facts = cloud_mod.check_facts(facts)
    verdicts = (verdicts + ratio_verdicts(conditions, settings, facts["rdt"])
                + counter_verdicts(conditions))
    notes = []
    if facts["rdt"] == "emulated":
        notes.append(EMULATED_NOTE)
    if facts["rdt"] != "real" and settings.enforce_ratios is None:
        notes.append("The latency ratio limits are reported, not enforced: "
                     "RDT is not real here.")
    return {
        "version": VERSION,
        "accel": facts["accel"], "forwarder": facts["forwarder"],
        "rdt": facts["rdt"], "facts": facts, "hosts": hosts,
        "settings": settings.to_dict(),
        "conditions": conditions,
        "tables": tables_mod.build(conditions),
        "verdicts": verdicts,
        "notes": notes,
        "ok": all(v["ok"] is not False for v in verdicts if v["binding"]),
    }


def run(cloud: cloud_mod.IsolationCloud, settings: Settings | None = None,
        short: bool = False,
        progress: typing.Callable[[str], None] | None = None, *,
        sleep: typing.Callable[[float], None] = time.sleep,
        clock: typing.Callable[[], float] = time.monotonic) -> dict:
    """Walk the four conditions on ``cloud``; returns the summary.

    Raises :class:`NotColocated` if a pair lands on two hosts,
    :class:`IsolationError` if the cloud answers outside the interface,
    :class:`CleanupError` if everything else worked but something could
    not be deleted; whatever the cloud raises passes through, after the
    clean-up.  A raised exception carries ``isolation_partial``: the
    facts, hosts, conditions and verdicts gathered before it.
    """
    settings = settings or Settings()
    say = progress or _say_nothing
    ledger = _Ledger(cloud, say)
    state = {"facts": {}, "hosts": {}}
    conditions, verdicts = [], []
    try:
        for rdt in RDT_SETTINGS:
            _run_setting(cloud, settings, short, say, ledger, rdt, sleep,
                         clock, state, conditions, verdicts)
            # Each setting's pair goes before the next one boots: the
            # host has to have room for the second pair.
            left = ledger.clean()
            if left:
                raise CleanupError("could not delete: " + "; ".join(left))
        state["facts"] = cloud_mod.check_facts(cloud.facts())
    except BaseException as e:
        ledger.clean()          # errors already said; the first one wins
        # What was measured before the failure, for the caller's report.
        e.isolation_partial = {"facts": dict(state["facts"]),
                               "hosts": dict(state["hosts"]),
                               "conditions": conditions,
                               "verdicts": verdicts}
        raise
    return summarize(state["facts"], conditions, verdicts, settings,
                     state["hosts"])
