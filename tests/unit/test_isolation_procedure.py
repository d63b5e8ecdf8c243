"""The shared isolation procedure, on an in-memory cloud.

The procedure is pure logic over the IsolationCloud interface, so a test
double of the interface is the right tool here; the real clouds (the
Host lab's Nova, Tempest against a real cloud) are tested where they
live.
"""

import json

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
import pytest

from nova_rdt.isolation import cloud as cloud_mod
from nova_rdt.isolation import procedure

BINS = ((0, 25), (25, 50), (50, None))


class Boom(Exception):
    pass


class FakeCloud:
    """Servers that keep a status, a noisy neighbour whose CPU time grows
    while it runs, a forwarding VM whose port counters grow with the
    frames measured through it, and a clock measure() advances."""

    def __init__(self, hosts=None, facts=None, busy_share=1.0,
                 paused_share=0.0, ports=True, load=True, forwarded=1.0,
                 fail_at=None, fail_with=Boom, fail_delete=False):
        self.hosts = hosts or {}
        self._facts = facts or {"accel": "tcg", "forwarder": "kernel",
                                "rdt": "emulated"}
        self.busy_share, self.paused_share = busy_share, paused_share
        self.ports, self.has_load, self.forwarded = ports, load, forwarded
        self.fail_at, self.fail_with = fail_at, fail_with
        self.fail_delete = fail_delete
        self.calls = []
        self.flavors = {}
        self.servers = {}
        self.now = 0.0
        self.n = 0

    # -- bookkeeping --
    def _call(self, name, *args):
        self.calls.append((name,) + args)
        self.n += 1
        if self.fail_at is not None and self.n == self.fail_at:
            raise self.fail_with(f"injected at call {self.n} ({name})")

    def clock(self):
        return self.now

    def sleep(self, s):
        self._advance(s)

    def _advance(self, dt):
        for s in self.servers.values():
            if s["role"] == cloud_mod.NOISY:
                share = (self.busy_share if s["status"] == "ACTIVE"
                         else self.paused_share)
                s["cpu"] += int(share * dt * 1e9 * s["vcpus"])
        self.now += dt

    # -- the interface --
    def facts(self):
        self._call("facts")
        return dict(self._facts)

    def create_flavor(self, name, vcpus, ram_mb, specs):
        self._call("create_flavor", name)
        fid = f"flavor-{len(self.flavors)}-{name}"
        self.flavors[fid] = {"vcpus": vcpus, "ram": ram_mb,
                             "specs": dict(specs)}
        return fid

    def boot(self, name, flavor_id, role):
        self._call("boot", name, role)
        sid = f"server-{name}"
        self.servers[sid] = {"role": role, "status": "BUILD", "cpu": 0,
                             "flavor": flavor_id, "rx": 0, "tx": 0,
                             "vcpus": self.flavors[flavor_id]["vcpus"]}
        return sid

    def wait_active(self, sid):
        self._call("wait_active", sid)
        self.servers[sid]["status"] = "ACTIVE"

    def host_of(self, sid):
        self._call("host_of", sid)
        return self.hosts.get(self.servers[sid]["role"], "compute-0")

    def pause(self, sid):
        self._call("pause", sid)
        self.servers[sid]["status"] = "PAUSED"

    def unpause(self, sid):
        self._call("unpause", sid)
        self.servers[sid]["status"] = "ACTIVE"

    def delete(self, sid):
        self._call("delete", sid)
        if self.fail_delete:
            raise Boom(f"cannot delete {sid}")
        del self.servers[sid]

    def delete_flavor(self, fid):
        self._call("delete_flavor", fid)
        del self.flavors[fid]

    def _noisy_busy(self):
        return any(s["role"] == cloud_mod.NOISY and s["status"] == "ACTIVE"
                   for s in self.servers.values())

    def measure(self, fwd, frame_sizes, short):
        self._call("measure", fwd, tuple(frame_sizes), short)
        rdt = "rdt:pmd_share" in self.flavors[
            self.servers[fwd]["flavor"]]["specs"]
        busy = self._noisy_busy()
        base = 10.0 + (30.0 if busy else 0.0) - (20.0 if busy and rdt
                                                 else 0.0)
        out = []
        for size in frame_sizes:
            sent = 1000
            got = int(sent * self.forwarded)
            self.servers[fwd]["rx"] += sent
            self.servers[fwd]["tx"] += got
            out.append({"frame_size": size, "throughput_pps": 1e5,
                        "converged": True, "generator_limited": False,
                        "avg_latency_us": base + size / 1000,
                        "p99_us": 2 * base, "sent": sent, "received": got,
                        "bins": [{"from_us": lo, "to_us": hi,
                                  "count": 10 if busy else 5}
                                 for lo, hi in BINS]})
        self._advance(5.0)
        return out

    def port_counters(self, sid):
        self._call("port_counters", sid)
        s = self.servers[sid]
        return {"rx": s["rx"], "tx": s["tx"]} if self.ports else None

    def load(self, sid):
        self._call("load", sid)
        if not self.has_load:
            return None
        return {"cpu_time_ns": self.servers[sid]["cpu"]}


def run(cloud, settings=None, **kw):
    return procedure.run(cloud, settings or procedure.Settings(),
                         sleep=cloud.sleep, clock=cloud.clock, **kw)


def test_fake_cloud_is_an_isolation_cloud():
    assert isinstance(FakeCloud(), cloud_mod.IsolationCloud)


def test_four_conditions_in_order_and_everything_deleted():
    cloud = FakeCloud()
    said = []
    summary = run(cloud, progress=said.append)
    assert [(c["rdt"], c["neighbour"]) for c in summary["conditions"]] == [
        ("off", "idle"), ("off", "busy"), ("on", "idle"), ("on", "busy")]
    assert not cloud.servers and not cloud.flavors
    names = [c[0] for c in cloud.calls
             if c[0] in ("create_flavor", "boot", "wait_active", "pause",
                         "unpause", "measure", "delete", "delete_flavor")]
    one = ["create_flavor", "create_flavor", "boot", "boot", "wait_active",
           "wait_active", "pause", "measure", "unpause", "measure",
           "delete", "delete", "delete_flavor", "delete_flavor"]
    assert names == one + one
    assert summary["ok"] is True
    assert said and all(isinstance(s, str) for s in said)


def test_the_rdt_setting_is_the_only_difference_between_flavors():
    cloud = FakeCloud()
    created = []
    real = cloud.create_flavor

    def spy(name, vcpus, ram, specs):
        created.append((name, vcpus, ram, dict(specs)))
        return real(name, vcpus, ram, specs)
    cloud.create_flavor = spy
    s = procedure.Settings(common_specs={"hw:mem_page_size": "large"})
    run(cloud, s)
    off_fwd, off_noisy, on_fwd, on_noisy = created
    assert not any(k.startswith("rdt:") for k in {**off_fwd[3],
                                                  **off_noisy[3]})
    assert on_fwd[3] == {**off_fwd[3], "rdt:l3_cache_ways": "4",
                         "rdt:pmd_share": "true"}
    assert on_noisy[3] == {**off_noisy[3], "rdt:l3_cache_ways": "2"}
    assert off_fwd[3]["hw:cpu_policy"] == "dedicated"
    assert off_fwd[3]["hw:mem_page_size"] == "large"
    assert (off_fwd[1], off_fwd[2]) == (on_fwd[1], on_fwd[2])


def test_noisy_class_replaces_its_ways():
    s = procedure.Settings(noisy_class="best_effort")
    assert s.noisy_specs(True) == {"hw:cpu_policy": "dedicated",
                                   "rdt:class": "best_effort"}
    assert s.noisy_specs(False) == {"hw:cpu_policy": "dedicated"}


def test_not_colocated_names_both_hosts_and_cleans_up():
    cloud = FakeCloud(hosts={cloud_mod.FORWARDING: "compute-a",
                             cloud_mod.NOISY: "compute-b"})
    with pytest.raises(procedure.NotColocated) as e:
        run(cloud)
    assert "compute-a" in str(e.value) and "compute-b" in str(e.value)
    assert (e.value.forwarding_host, e.value.noisy_host) == ("compute-a",
                                                             "compute-b")
    assert not cloud.servers and not cloud.flavors
    assert not any(c[0] == "measure" for c in cloud.calls)


def _calls_of_a_clean_run():
    cloud = FakeCloud()
    run(cloud)
    return len(cloud.calls)


TOTAL_CALLS = _calls_of_a_clean_run()


@hsettings(max_examples=60)
@given(at=st.integers(1, TOTAL_CALLS),
       kind=st.sampled_from([Boom, KeyboardInterrupt]))
def test_a_failure_anywhere_leaves_nothing_behind(at, kind):
    cloud = FakeCloud(fail_at=at, fail_with=kind)
    name = None
    try:
        run(cloud)
    except kind as e:
        assert f"call {at} " in str(e)
    else:
        name = cloud.calls[at - 1][0]
    if name is not None:
        # Only a delete can fail without failing the run: it is retried.
        assert kind is Boom and name in ("delete", "delete_flavor")
        assert cloud.calls[at][0] == name
    assert not cloud.servers and not cloud.flavors


def test_every_call_of_a_clean_run_can_fail():
    # The property above samples; this walks every failure point once.
    for kind in (Boom, KeyboardInterrupt):
        for at in range(1, TOTAL_CALLS + 1):
            cloud = FakeCloud(fail_at=at, fail_with=kind)
            try:
                run(cloud)
            except kind:
                pass
            assert not cloud.servers and not cloud.flavors, (kind, at)


def test_a_failed_cleanup_after_success_is_an_error_naming_what_is_left():
    cloud = FakeCloud(fail_delete=True)
    with pytest.raises(procedure.CleanupError) as e:
        run(cloud)
    assert "server-rdt-iso-off-noisy" in str(e.value)
    assert "server-rdt-iso-off-forwarding" in str(e.value)
    assert not cloud.flavors      # flavors still went


def test_a_failed_cleanup_does_not_hide_the_first_error():
    cloud = FakeCloud(fail_delete=True, hosts={cloud_mod.NOISY: "elsewhere"})
    with pytest.raises(procedure.NotColocated):
        run(cloud)


def _verdicts(summary, check):
    return [v for v in summary["verdicts"] if v["check"] == check]


def test_neighbour_load_grows_only_when_busy():
    summary = run(FakeCloud())
    loads = {(c["rdt"], c["neighbour"]): c["neighbour_load"]
             for c in summary["conditions"]}
    for rdt in ("off", "on"):
        assert loads[(rdt, "idle")]["cpu_time_ns"] == 0
        assert loads[(rdt, "busy")]["cpu_share"] == pytest.approx(1.0)
        assert loads[(rdt, "busy")]["ok"] and loads[(rdt, "idle")]["ok"]
    assert all(v["ok"] for v in _verdicts(summary, "neighbour_load"))


@pytest.mark.parametrize("busy,paused,bad", [
    (0.0, 0.0, "busy"),        # the load never started
    (1.0, 0.5, "idle"),        # pausing did not stop it
    (0.1, 0.0, "busy"),        # below busy_min_cpu_share
])
def test_a_neighbour_that_is_not_busy_when_it_should_be_fails(busy, paused,
                                                               bad):
    summary = run(FakeCloud(busy_share=busy, paused_share=paused))
    failed = [v for v in _verdicts(summary, "neighbour_load")
              if v["ok"] is False]
    assert failed and {v["neighbour"] for v in failed} == {bad}
    assert summary["ok"] is False


def test_an_unknown_load_is_said_not_judged():
    summary = run(FakeCloud(load=False))
    v = _verdicts(summary, "neighbour_load")
    assert len(v) == 4 and all(x["ok"] is None for x in v)
    assert all("no CPU time" in x["detail"] for x in v)
    assert summary["ok"] is True


def test_vm_ports_account_for_the_frames():
    summary = run(FakeCloud())
    for c in summary["conditions"]:
        assert c["vm_ports"] == {"rx": 4000, "tx": 4000}
    assert all(v["ok"] for v in _verdicts(summary, "path"))


def test_ports_that_did_not_see_the_frames_fail_the_path():
    cloud = FakeCloud()
    real = cloud.port_counters
    cloud.port_counters = lambda sid: {"rx": 0, "tx": 0} if real(sid) \
        else None
    summary = run(cloud)
    assert all(v["ok"] is False for v in _verdicts(summary, "path"))
    assert "do not account" in _verdicts(summary, "path")[0]["detail"]
    assert summary["ok"] is False


def test_unknown_ports_are_said_not_judged():
    summary = run(FakeCloud(ports=False))
    assert all(c["vm_ports"] is None for c in summary["conditions"])
    assert all(v["ok"] is None for v in _verdicts(summary, "path"))


@pytest.mark.parametrize("result,words", [
    ({}, "lacks frame_size"),
    ({"frame_size": 64, "throughput_pps": 1, "converged": True,
      "generator_limited": False, "avg_latency_us": 1, "p99_us": 1,
      "bins": [{"from_us": 0}]}, "bin 0"),
    ("64", "not a dict"),
])
def test_a_cloud_outside_the_interface_gets_a_clear_error(result, words):
    cloud = FakeCloud()
    cloud.measure = lambda *a: [result]
    with pytest.raises(procedure.IsolationError, match=words):
        run(cloud)
    assert not cloud.servers and not cloud.flavors


def test_summary_schema_and_json():
    summary = run(FakeCloud())
    assert json.loads(json.dumps(summary, allow_nan=False)) == summary
    assert (summary["accel"], summary["forwarder"], summary["rdt"]) == (
        "tcg", "kernel", "emulated")
    assert set(summary) >= {"accel", "forwarder", "rdt", "conditions",
                            "tables", "verdicts", "ok"}
    assert summary["hosts"] == {"off": "compute-0", "on": "compute-0"}
    for c in summary["conditions"]:
        assert set(c) >= {"neighbour", "rdt", "frames", "vm_ports",
                          "neighbour_load"}
        assert [f["frame_size"] for f in c["frames"]] == [64, 256, 1024,
                                                          1512]
        for f in c["frames"]:
            assert set(f) >= set(cloud_mod.FRAME_KEYS)
            assert all(set(b) == {"from_us", "to_us", "count"}
                       for b in f["bins"])
    assert set(summary["tables"]) == {"table_3_2", "table_3_3"}
    assert procedure.EMULATED_NOTE in summary["notes"]
    for v in summary["verdicts"]:
        assert v["ok"] in (True, False, None) and v["detail"]


def test_short_mode_reaches_measure_and_shortens_the_settle():
    cloud = FakeCloud()
    slept = []
    procedure.run(cloud, procedure.Settings(settle_s=30, settle_s_short=1),
                  short=True, sleep=slept.append, clock=cloud.clock)
    assert slept == [1, 1]
    assert all(c[3] is True for c in cloud.calls if c[0] == "measure")


def test_ratio_limits_bind_only_on_real_rdt():
    # The fake: busy adds 30 µs, CAT takes 20 back: 1.x ratio with CAT.
    def ratios(summary):
        return [v for v in summary["verdicts"]
                if v["check"] in ("avg_ratio", "p99_ratio")]
    emulated = run(FakeCloud())
    assert emulated["ok"] is True
    assert not any(v["binding"] for v in ratios(emulated))
    real = run(FakeCloud(facts={"accel": "kvm", "forwarder": "testpmd",
                                "rdt": "real"}))
    on = [v for v in ratios(real) if v["rdt"] == "on"]
    assert on and all(v["binding"] for v in on)
    assert all(v["binding"] is False and v["ok"] is None
               for v in ratios(real) if v["rdt"] == "off")
    # 64 B: (20 + .064) / (10 + .064) ~ 1.99 > 1.25: fails on real RDT.
    assert real["ok"] is False
    assert procedure.EMULATED_NOTE not in real["notes"]
    loose = run(FakeCloud(facts={"rdt": "real"}),
                procedure.Settings(max_latency_ratio=2.5, max_p99_ratio=2.5))
    assert loose["ok"] is True
    forced = run(FakeCloud(), procedure.Settings(enforce_ratios=True))
    assert forced["ok"] is False


def test_facts_outside_the_interface_are_refused():
    with pytest.raises(ValueError, match="accel='xen'"):
        run(FakeCloud(facts={"accel": "xen"}))
    assert cloud_mod.check_facts({}) == {"accel": "unknown",
                                         "forwarder": "unknown",
                                         "rdt": "unknown"}


@pytest.mark.parametrize("field,value", [
    ("frame_sizes", ()), ("frame_sizes", (63,)), ("frame_sizes", (True,)),
    ("loss_tolerance", 1.0), ("loss_tolerance", -0.1),
    ("forwarding_vcpus", 0), ("noisy_ram_mb", "512"),
    ("forwarding_l3_ways", True), ("noisy_l3_ways", 0),
    ("noisy_class", ""), ("noisy_load", "yes"), ("settle_s", -1),
    ("max_latency_ratio", 0.9), ("idle_max_cpu_share", 0.5),
    ("common_specs", {"rdt:class": "x"}), ("common_specs", {"a": 1}),
])
def test_bad_settings_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"isolation settings: {field}"):
        procedure.Settings(**{field: value})


def test_settings_defaults_are_the_seeds():
    s = procedure.Settings()
    assert s.frame_sizes == (64, 256, 1024, 1512)
    assert s.loss_tolerance == 0.001
    assert json.loads(json.dumps(s.to_dict()))["frame_sizes"] == [
        64, 256, 1024, 1512]


@given(rx=st.integers(0, 10**9), tx=st.integers(0, 10**9),
       got=st.lists(st.integers(0, 10**6), min_size=1, max_size=4))
def test_judge_path_is_the_frames_accounted_for(rx, tx, got):
    frames = [{"received": g} for g in got]
    ok, detail = procedure.judge_path({"rx": rx, "tx": tx}, frames)
    total = sum(got)
    assert ok == (rx >= total and tx >= total and total > 0)
    assert str(total) in detail
    # Without the generator's count only movement is judged.
    ok, _ = procedure.judge_path({"rx": rx, "tx": tx}, [{}])
    assert ok == (rx > 0 and tx > 0)


@given(ns=st.integers(0, 10**12), seconds=st.floats(0.001, 1e4),
       neighbour=st.sampled_from(procedure.NEIGHBOURS))
def test_judge_load_thresholds(ns, seconds, neighbour):
    s = procedure.Settings()
    out = procedure.judge_load(neighbour, {"cpu_time_ns": 7},
                               {"cpu_time_ns": 7 + ns}, seconds, s)
    share = ns / 1e9 / seconds
    if neighbour == "busy":
        assert out["ok"] == (share >= s.busy_min_cpu_share)
    else:
        assert out["ok"] == (share <= s.idle_max_cpu_share)
    assert out["cpu_time_ns"] == ns
    assert procedure.judge_load(neighbour, None, {"cpu_time_ns": 1},
                                seconds, s)["ok"] is None
    assert procedure.judge_load(neighbour, {"x": 1}, {"x": 2}, seconds,
                                s)["ok"] is None


def test_a_failure_carries_what_was_measured_before_it():
    clean = FakeCloud()
    run(clean)
    # Fail at the fourth measurement (rdt on, neighbour busy).
    at = [i for i, c in enumerate(clean.calls, 1) if c[0] == "measure"][3]
    cloud = FakeCloud(fail_at=at)
    with pytest.raises(Boom) as e:
        run(cloud)
    partial = e.value.isolation_partial
    assert [(c["rdt"], c["neighbour"]) for c in partial["conditions"]] == [
        ("off", "idle"), ("off", "busy"), ("on", "idle")]
    assert partial["hosts"] == {"off": "compute-0", "on": "compute-0"}
    assert partial["facts"]["accel"] == "tcg"
    assert partial["verdicts"]
