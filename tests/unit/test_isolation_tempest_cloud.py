"""TempestCloud's requests, on recording stand-ins of Tempest's clients.

The scenario itself needs a real cloud (see
tests/functional/test_tempest_isolation.py for the tempest run that
skips without one); this checks what TempestCloud would send: user data
base64 and never a JSON null, one affinity group, the dataplane NICs,
diagnostics at 2.48, and the procedure driving it end to end.
"""

import base64
import types

import pytest

pytest.importorskip("tempest")

from tempest.lib import exceptions as lib_exc  # noqa: E402
from tempest.lib.services.compute import base_compute_client  # noqa: E402

from nova_rdt.isolation import cloud as cloud_mod  # noqa: E402
from nova_rdt.isolation import procedure  # noqa: E402
from nova_rdt.isolation import userdata  # noqa: E402
from tempest_plugin import cloud as tcloud  # noqa: E402
from tempest_plugin import config as tconfig  # noqa: E402

MGMT = "net-mgmt"
DP = ["net-a", "net-b"]


def opts(**kw):
    base = {o.dest: o.default for o in tconfig.RdtGroup}
    base.update(generator="software", generator_config="/dev/null",
                rdt_compute=True, dataplane_networks=list(DP),
                management_network=MGMT, workload_timeout=0)
    base.update(kw)
    return types.SimpleNamespace(**base)


class Servers:
    def __init__(self, log):
        self.log, self.servers, self.n = log, {}, 0

    def create_server(self, **kw):
        self.log.append(("create_server", kw))
        self.n += 1
        sid = f"s{self.n}"
        self.servers[sid] = {"status": "ACTIVE", "cpu": 0}
        return {"server": {"id": sid}}

    def show_server(self, sid):
        if sid not in self.servers:
            raise lib_exc.NotFound()
        return {"server": {"id": sid, "status": self.servers[sid]["status"],
                           "OS-EXT-SRV-ATTR:host": "compute-7"}}

    def pause_server(self, sid):
        self.servers[sid]["status"] = "PAUSED"

    def unpause_server(self, sid):
        self.servers[sid]["status"] = "ACTIVE"

    def delete_server(self, sid):
        self.log.append(("delete_server", sid))
        if sid not in self.servers:
            raise lib_exc.NotFound()
        del self.servers[sid]

    def get_console_output(self, sid):
        return {"output": "[0.0] Hypervisor detected: KVM\n"
                          "nova-rdt-forwarder: testpmd\n"}

    def show_server_diagnostics(self, sid):
        self.log.append(("diagnostics",
                         base_compute_client.COMPUTE_MICROVERSION))
        s = self.servers[sid]
        if s["status"] == "ACTIVE":
            s["cpu"] += 3 * 10**9
        return {"state": s["status"].lower(),
                "cpu_details": [{"id": 0, "time": s["cpu"]},
                                {"id": 1, "time": s["cpu"]}],
                "nic_details": [
                    {"mac_address": "FA:16:3E:00:00:01", "rx_packets": 5,
                     "tx_packets": 5},
                    {"mac_address": "fa:16:3e:00:00:0a",
                     "rx_packets": 1000 + s["cpu"] // 10**6,
                     "tx_packets": 1000 + s["cpu"] // 10**6},
                    {"mac_address": "fa:16:3e:00:00:0b", "rx_packets": 7,
                     "tx_packets": 7}]}


class Flavors:
    def __init__(self, log):
        self.log, self.n = log, 0

    def create_flavor(self, **kw):
        self.n += 1
        self.log.append(("create_flavor", kw))
        return {"flavor": {"id": f"f{self.n}"}}

    def set_flavor_extra_spec(self, fid, **specs):
        self.log.append(("extra_specs", fid, specs))

    def delete_flavor(self, fid):
        self.log.append(("delete_flavor", fid))


class Groups:
    def __init__(self, log):
        self.log = log

    def create_server_group(self, **kw):
        self.log.append(("create_server_group", kw))
        return {"server_group": {"id": "g1"}}

    def delete_server_group(self, gid):
        self.log.append(("delete_server_group", gid))


class Interfaces:
    def list_interfaces(self, sid):
        return {"interfaceAttachments": [
            {"net_id": MGMT, "mac_addr": "fa:16:3e:00:00:01"},
            {"net_id": "net-a", "mac_addr": "fa:16:3e:00:00:0a"},
            {"net_id": "net-b", "mac_addr": "FA:16:3E:00:00:0B"}]}


class FakeTestCase:
    """The bits of a Tempest test case TempestCloud uses."""

    def __init__(self):
        self.log = []
        self.cleanups = []
        servers = Servers(self.log)
        self.os_primary = types.SimpleNamespace(
            servers_client=servers, server_groups_client=Groups(self.log),
            interfaces_client=Interfaces())
        self.os_admin = types.SimpleNamespace(flavors_client=Flavors(self.log),
                                              servers_client=servers)

    def addCleanup(self, fn, *args):
        self.cleanups.append((fn, args))


@pytest.fixture
def waiters(monkeypatch):
    """Tempest's waiters read tempest.conf; these check the same states
    on the stand-in without it."""
    def wait_for_server_status(client, sid, status, **kw):
        assert client.show_server(sid)["server"]["status"] == status

    def wait_for_server_termination(client, sid, **kw):
        with pytest.raises(lib_exc.NotFound):
            client.show_server(sid)
    monkeypatch.setattr(tcloud, "waiters", types.SimpleNamespace(
        wait_for_server_status=wait_for_server_status,
        wait_for_server_termination=wait_for_server_termination))


def make(o=None):
    o = o or opts()
    conf = types.SimpleNamespace(
        nova_rdt=o, compute=types.SimpleNamespace(image_ref="img-default"))
    test = FakeTestCase()
    settings = tcloud.settings_from_conf(o)
    clock = [0.0]

    def sleep(s):
        clock[0] += s
    c = tcloud.TempestCloud(test, settings, conf, "/nonexistent",
                            sleep=sleep, clock=lambda: clock[0])
    return test, c, settings


def test_it_is_an_isolation_cloud():
    assert issubclass(tcloud.TempestCloud, cloud_mod.IsolationCloud)


def test_boot_sends_base64_user_data_one_group_and_the_dataplane_nics(
        waiters):
    test, c, settings = make(opts(forwarding_image_ref="img-fwd"))
    fwd = c.boot("fwd", "f1", cloud_mod.FORWARDING)
    noisy = c.boot("noisy", "f2", cloud_mod.NOISY)
    (_, f), (_, n) = [e for e in test.log if e[0] == "create_server"]
    for kw, role in ((f, cloud_mod.FORWARDING), (n, cloud_mod.NOISY)):
        assert kw["user_data"] is not None
        assert base64.b64decode(kw["user_data"], validate=True).decode() \
            == userdata.script(role, settings)
        assert kw["scheduler_hints"] == {"group": "g1"}
    assert f["networks"] == [{"uuid": MGMT}, {"uuid": "net-a"},
                             {"uuid": "net-b"}]
    assert n["networks"] == [{"uuid": MGMT}]
    assert (f["imageRef"], n["imageRef"]) == ("img-fwd", "img-default")
    groups = [e for e in test.log if e[0] == "create_server_group"]
    assert len(groups) == 1 and groups[0][1]["policies"] == ["affinity"]
    assert c.host_of(fwd) == c.host_of(noisy) == "compute-7"
    assert len(test.cleanups) == 3      # group + two servers, as a net


def test_no_management_network_gives_the_noisy_vm_no_nic(waiters,
                                                        monkeypatch):
    """Nova's default would pick a network itself, and fails with 409
    where the dataplane networks are shared: "none", at 2.37."""
    test, c, _ = make(opts(management_network=None))
    seen = []
    create = test.os_primary.servers_client.create_server

    def create_server(**kw):
        seen.append(base_compute_client.COMPUTE_MICROVERSION)
        return create(**kw)
    monkeypatch.setattr(test.os_primary.servers_client, "create_server",
                        create_server)
    before = base_compute_client.COMPUTE_MICROVERSION
    c.boot("noisy", "f2", cloud_mod.NOISY)
    c.boot("fwd", "f1", cloud_mod.FORWARDING)
    (_, n), (_, f) = [e for e in test.log if e[0] == "create_server"]
    assert n["networks"] == "none"
    assert f["networks"] == [{"uuid": "net-a"}, {"uuid": "net-b"}]
    assert seen == ["2.37", before]
    assert base_compute_client.COMPUTE_MICROVERSION == before


def test_diagnostics_at_2_48_and_only_dataplane_nics_counted(waiters):
    test, c, _ = make()
    sid = c.boot("fwd", "f1", cloud_mod.FORWARDING)
    before = base_compute_client.COMPUTE_MICROVERSION
    ports = c.port_counters(sid)
    assert ports == {"rx": 1000 + 3000 + 7, "tx": 1000 + 3000 + 7}
    assert c.load(sid)["cpu_time_ns"] == 2 * 6 * 10**9
    assert [e[1] for e in test.log if e[0] == "diagnostics"] == ["2.48"] * 2
    assert base_compute_client.COMPUTE_MICROVERSION == before


def test_facts_come_from_the_console(waiters):
    _, c, _ = make()
    assert c.facts() == {"accel": "unknown", "forwarder": "unknown",
                         "rdt": "real"}
    c.wait_active(c.boot("fwd", "f1", cloud_mod.FORWARDING))
    assert c.facts() == {"accel": "kvm", "forwarder": "testpmd",
                         "rdt": "real"}
    _, c, _ = make(opts(accel="tcg"))
    c.wait_active(c.boot("fwd", "f1", cloud_mod.FORWARDING))
    assert c.facts()["accel"] == "tcg"


def test_the_procedure_drives_tempest_cloud_end_to_end(waiters):
    test, c, settings = make(opts(settle_seconds=0))
    measured = []

    def measure(fwd, sizes, short):
        measured.append((fwd, tuple(sizes)))
        return [{"frame_size": s, "throughput_pps": 1.0, "converged": True,
                 "generator_limited": False, "avg_latency_us": 10.0,
                 "p99_us": 20.0, "bins": [], "sent": 10, "received": 10}
                for s in sizes]
    c.measure = measure
    clock = [0.0]

    def tick():
        clock[0] += 1.0
        return clock[0]
    summary = procedure.run(c, settings, sleep=lambda s: None, clock=tick)
    assert [(x["rdt"], x["neighbour"]) for x in summary["conditions"]] == [
        ("off", "idle"), ("off", "busy"), ("on", "idle"), ("on", "busy")]
    assert summary["hosts"] == {"off": "compute-7", "on": "compute-7"}
    assert (summary["accel"], summary["forwarder"]) == ("kvm", "testpmd")
    assert measured[0][1] == (64, 256, 1024, 1512)
    specs = [e[2] for e in test.log if e[0] == "extra_specs"]
    assert not any(k.startswith("rdt:") for s in specs[:2] for k in s)
    assert specs[2]["rdt:pmd_share"] == "true"
    assert specs[3] == {"hw:cpu_policy": "dedicated",
                        "hw:mem_page_size": "large",
                        "rdt:l3_cache_ways": "2"}
    assert not test.os_primary.servers_client.servers    # all deleted
    assert [e[0] for e in test.log].count("delete_flavor") == 4
    loads = {(x["rdt"], x["neighbour"]): x["neighbour_load"]["ok"]
             for x in summary["conditions"]}
    assert all(loads.values()), loads


@pytest.mark.parametrize("kw,reason", [
    ({"generator": "none"}, "generator = none"),
    ({"generator_config": None}, "generator_config is not set"),
    ({"generator_config": "/nonexistent.yaml"}, "does not exist"),
    ({"rdt_compute": False}, "rdt_compute = False"),
    ({"dataplane_networks": ["x"]}, "it has 1"),
])
def test_skip_reasons_in_order(kw, reason):
    assert reason in tcloud.skip_reason(opts(**kw))
    assert tcloud.skip_reason(opts()) is None


def test_settings_from_conf():
    s = tcloud.settings_from_conf(opts(noisy_class="be", mem_page_size=""))
    assert s.noisy_specs(True) == {"hw:cpu_policy": "dedicated",
                                   "rdt:class": "be"}
    assert s.enforce_ratios is True
    with pytest.raises(ValueError, match=r"\[nova_rdt\] frame_sizes"):
        tcloud.settings_from_conf(opts(frame_sizes=["64", "big"]))
    with pytest.raises(ValueError, match=r"^\[nova_rdt\] frame_sizes"):
        tcloud.settings_from_conf(opts(frame_sizes=["32"]))
    with pytest.raises(ValueError, match=r"\[nova_rdt\] max_latency_ratio"):
        tcloud.settings_from_conf(opts(max_latency_ratio=0.5))


def _simulated_generator(tmp_path, search: str):
    """A generator file with the engine's simulated DUT where the chassis
    would be, and ``search``'s keys."""
    gen = tmp_path / "rfc2544.yaml"
    gen.write_text(search + "generator: {type: simulated, "
                   "capacity_pps: 100000, line_rate_pps: 1000000, "
                   "seed: 3}\n")
    return gen


@pytest.mark.parametrize("goal,field", [
    ("loss_ratio=1.5", "loss_ratio"),
    ("loss_ratio=0,duration_sum=1", "duration_sum"),
    ("loss_ratio", "search_goals[0]"),
    ("exceed_ratio=x", "exceed_ratio"),
])
def test_a_bad_search_goal_is_refused_before_any_server(goal, field):
    with pytest.raises(ValueError, match=r"^\[nova_rdt\] search_goals\[0\]"
                       ) as e:
        tcloud.settings_from_conf(opts(search_goals=[goal]))
    assert field in str(e.value)


def test_search_goals_reach_the_engine(tmp_path, waiters):
    gen = _simulated_generator(tmp_path,
                               "resolution: 0.05\nmax_trials: 8\n")
    o = opts(generator="simulated", generator_config=str(gen),
             trial_duration=0.05, latency_duration=0.05,
             initial_trial_duration=0.0,
             search_goals=["loss_ratio=0,name=NDR",
                           "loss_ratio=0.005,name=PDR"])
    tcloud.settings_from_conf(o)
    _, c, _ = make(o)
    c.out_dir = str(tmp_path / "out")
    c.measure("s1", [64], short=False)
    import json
    doc = json.loads((tmp_path / "out" / "rfc2544" / "run-1" /
                      "report.json").read_text())
    names = [g["goal"] for g in doc["frames"][0]["goals"]]
    assert names == ["NDR", "PDR"], doc["frames"][0]["goals"]


def test_measure_runs_the_configured_generator_and_keeps_its_report(
        tmp_path, waiters):
    # The generator path of the scenario, with the engine's simulated DUT
    # standing where the chassis would be.
    gen = _simulated_generator(tmp_path,
                               "resolution: 0.05\nmax_trials: 8\n")
    o = opts(generator="simulated", generator_config=str(gen),
             trial_duration=0.05, latency_duration=0.05)
    _, c, _ = make(o)
    c.out_dir = str(tmp_path / "out")
    frames = c.measure("s1", [64, 1512], short=False)
    assert [f["frame_size"] for f in frames] == [64, 1512]
    for f in frames:
        assert f["throughput_pps"] > 0 and f["avg_latency_us"] is not None
        assert 0 < f["received"] <= f["sent"]
    report = tmp_path / "out" / "rfc2544" / "run-1" / "report.json"
    assert report.exists()
    c.measure("s1", [64], short=True)
    assert (tmp_path / "out" / "rfc2544" / "run-2" / "report.json").exists()


def test_a_bad_generator_file_names_itself(tmp_path, waiters):
    from nova_rdt.rfc2544 import config as rcfg
    bad = tmp_path / "bad.yaml"
    bad.write_text("generator: {type: simulated, capacity_pps: -1, "
                   "line_rate_pps: 1}\nresolution: 7\n")
    _, c, _ = make(opts(generator="simulated", generator_config=str(bad)))
    with pytest.raises(rcfg.ConfigError, match="resolution"):
        c.measure("s1", [64], short=False)


def test_a_silent_console_is_waited_for_once(waiters):
    o = opts(workload_timeout=60)
    test, c, _ = make(o)
    calls = []

    def silent(sid):
        calls.append(sid)
        return {"output": ""}
    test.os_primary.servers_client.get_console_output = silent
    a = c.boot("fwd", "f1", cloud_mod.FORWARDING)
    c.wait_active(a)
    first = len(calls)
    assert first > 1                       # polled until the timeout
    assert c.facts()["forwarder"] == "unknown"
    c.wait_active(c.boot("noisy", "f2", cloud_mod.NOISY))
    assert len(calls) == first + 1         # one look, no more waiting


def test_diagnostics_keep_the_scenario_s_own_microversion(waiters,
                                                          monkeypatch):
    # A scenario class sets its microversion for the whole test; asking
    # for diagnostics must not leave later requests without it.
    monkeypatch.setattr(base_compute_client, "COMPUTE_MICROVERSION", "2.74")
    test, c, _ = make()
    sid = c.boot("fwd", "f1", cloud_mod.FORWARDING)
    c.port_counters(sid)
    c.load(sid)
    assert [e[1] for e in test.log if e[0] == "diagnostics"] == ["2.48"] * 2
    assert base_compute_client.COMPUTE_MICROVERSION == "2.74"


def test_a_cloud_with_no_dedicated_cpus_and_an_emulated_resctrl():
    """The lab cloud's [nova_rdt]: no hw:cpu_policy on any flavor, and
    the latency ratios reported, not enforced (nothing partitions an
    emulated cache); its facts say so."""
    o = opts(cpu_policy="", rdt="emulated", mem_page_size="")
    s = tcloud.settings_from_conf(o)
    assert s.forwarding_specs(True) == {"rdt:l3_cache_ways": "4",
                                        "rdt:pmd_share": "true"}
    assert s.noisy_specs(False) == {}
    assert s.enforce_ratios is None
    _, c, _ = make(o)
    assert c.facts()["rdt"] == "emulated"
    shared = tcloud.settings_from_conf(opts(cpu_policy="shared"))
    assert shared.forwarding_specs(False) == {
        "hw:cpu_policy": "shared", "hw:mem_page_size": "large"}


def test_port_counters_wait_for_ovsdb_after_a_measurement(tmp_path,
                                                          waiters):
    """libvirt's vhost-user counters come from OVSDB, refreshed every
    5 s: read right after a measurement they would miss its end."""
    gen = _simulated_generator(tmp_path, "max_trials: 4\n")
    o = opts(generator="simulated", generator_config=str(gen),
             trial_duration=0.05, latency_duration=0.05)
    _, c, _ = make(o)
    c.out_dir = str(tmp_path / "out")
    test = c.test
    sid = test.os_primary.servers_client.create_server()["server"]["id"]
    t0 = c.clock()
    c.port_counters(sid)
    assert c.clock() == t0              # nothing measured yet: no wait
    c.measure(sid, [64], short=True)
    t1 = c.clock()
    assert c.port_counters(sid) is not None
    assert c.clock() - t1 == pytest.approx(tcloud.OVSDB_STATS_INTERVAL)
    t2 = c.clock()
    c.port_counters(sid)
    assert c.clock() == t2              # already waited


def test_a_frame_size_with_no_latency_is_measured_once_more(waiters):
    """A search that found no passing rate (no latency) is run again
    for that frame size only, once, under its own label."""
    _, c, _ = make()
    calls = []

    def fake(label, sizes, short):
        calls.append((label, list(sizes)))
        again = label.endswith("-again")
        return [{"frame_size": s,
                 "avg_latency_us": 5.0 if again or s == 64 else None}
                for s in sizes]
    c._measure = fake
    frames = c.measure("s1", [64, 1024], short=True)
    assert calls == [("run-1", [64, 1024]), ("run-1-again", [1024])]
    assert frames == [{"frame_size": 64, "avg_latency_us": 5.0},
                      {"frame_size": 1024, "avg_latency_us": 5.0,
                       "measured_twice": True}]
    calls.clear()
    c._measure = lambda label, sizes, short: calls.append(label) or [
        {"frame_size": s, "avg_latency_us": None} for s in sizes]
    assert c.measure("s1", [64], short=True)[0]["avg_latency_us"] is None
    assert calls == ["run-2", "run-2-again"]
