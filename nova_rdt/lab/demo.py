"""``nova-rdt lab``: the whole of nova-rdt on one machine.

Stages: the Host lab (real libvirtd, real OVS-DPDK, emulated or real
resctrl); Nova's real API, scheduler, conductor and compute in-process
(the functional-test harness), with one RDT compute on the lab's resctrl
and one plain compute; the scenario's flavors through the API (with one
bad spec) and boots until no valid host; every domain Nova defines handed
to the real libvirtd with its RDT elements, so libvirt allocates and the
hook acts; the COS table, way map and relations; the exporter and a short
RFC 2544 run; an HTML report; and a teardown that leaves nothing behind.

Nova's harness needs eventlet's monkey-patching before oslo.messaging is
imported, so ``main`` patches first.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import time
import unittest

from lxml import etree

from nova_rdt.allocation import naming
from nova_rdt.lab import scenarios as scen_mod

NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"
RDT_NS = naming.METADATA_NS
EMULATION_NOTE = (
    "This host's RDT is emulated: the masks, groups and tasks are what "
    "libvirt and nova-rdt really wrote, but no hardware enforces them, so "
    "latency here shows the method, not the isolation.")


class Printer:
    def __init__(self, stream=sys.stdout):
        self.stream = stream
        self.t0 = time.monotonic()

    def stage(self, n, title):
        self(f"\n== {n}. {title} " + "=" * max(0, 60 - len(title)))

    def __call__(self, text=""):
        self.stream.write(text + "\n")
        self.stream.flush()


def domain_for_libvirt(xml: str, domain_type: str) -> tuple[str, str, str]:
    """(name, uuid, diskless domain XML) keeping Nova's RDT elements and
    metadata from a domain XML Nova defined."""
    from nova_rdt.lab.libvirtd import diskless_domain_xml

    dom = etree.fromstring(xml.encode())
    name, uuid = dom.findtext("name"), dom.findtext("uuid")
    vcpus = int(dom.findtext("vcpu") or 1)
    tune = "".join(etree.tostring(e).decode() for e in dom.findall(
        "cputune/*") if e.tag in ("cachetune", "memorytune"))
    meta = "".join(etree.tostring(e).decode() for e in dom.findall(
        "metadata/*") if e.tag in (f"{{{RDT_NS}}}instance",
                                   f"{{{NOVA_NS}}}instance"))
    out = diskless_domain_xml(name, vcpus=vcpus, domain_type=domain_type,
                              cputune=tune, metadata=meta)
    return name, uuid, out.replace(
        "<name>", f"<uuid>{uuid}</uuid>\n  <name>", 1)


class _FilterReasons(logging.Handler):
    """Keeps RDTFilter's per-host reasons for the no-valid-host story."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        msg = record.getMessage()
        if "fails:" in msg:
            self.lines.append(msg)


def _nova_stage(lab, scenario, say, out_dir, short):
    """Stages 2-4 inside Nova's functional harness; returns what happened."""
    from nova.tests.fixtures import conf as nova_conf_fixture
    from nova.tests.functional.api import client as api_client
    from nova_rdt.lab import nova_harness
    from nova_rdt.lab.nova_paste import nova_api_paste_ini

    paste = nova_api_paste_ini()
    settings = lab.hook_settings(host_view=True)
    from nova_rdt.emulator import profiles
    profile = profiles.get(scenario.profile)
    result = {"servers": [], "bad_spec": None, "no_valid_host": None,
              "filter_reasons": [], "realized": [], "refused": []}

    class LabCloud(nova_harness.RdtServersTestBase):
        COMPUTE_DRIVER = "rdt.LibvirtRDTDriver"
        ADDITIONAL_FILTERS = ["NUMATopologyFilter", "RDTFilter"]
        RDT_HOST_INFO = dict(cpu_nodes=profile.domains, cpu_sockets=1,
                             cpu_cores=4, cpu_threads=1)

        def setUp(self):
            if paste:
                orig = nova_conf_fixture.ConfFixture.setUp

                def conf_setup(fixture):
                    orig(fixture)
                    fixture.conf.set_default("api_paste_config", paste,
                                             group="wsgi")
                nova_conf_fixture.ConfFixture.setUp = conf_setup
                self.addCleanup(setattr, nova_conf_fixture.ConfFixture,
                                "setUp", orig)
            super().setUp()

        def _setup_scheduler_service(self):
            self.flags(available_filters=[
                "nova.scheduler.filters.all_filters",
                "nova_rdt.scheduler.filter.RDTFilter"],
                group="filter_scheduler")
            return super()._setup_scheduler_service()

        def runTest(self):
            self.flags(group="rdt",
                       reserved_host_ways=scenario.reserved_host_ways,
                       pmd_shared_ways=scenario.pmd_shared_ways,
                       pmd_cos=scenario.pmd_cos,
                       classes=list(scenario.classes),
                       state_path=settings.state_path,
                       ovsdb_connection=settings.ovsdb_connection,
                       ovs_vswitchd_pidfile=settings.ovs_vswitchd_pidfile,
                       ovs_vswitchd_target=settings.ovs_vswitchd_target,
                       libvirt_qemu_run_dir=settings.libvirt_qemu_run_dir)
            say.stage(2, "Control plane: Nova API, scheduler, conductor, "
                         "compute")
            self.start_rdt_compute("rdt-compute", profile=scenario.profile,
                                   resctrl_root=lab.resctrl_root)
            self.flags(resctrl_root=os.path.join(out_dir, "no-resctrl"),
                       require_resctrl=False, group="rdt")
            self.start_compute("plain-compute")
            say("nova-api, nova-conductor, nova-scheduler (RDTFilter) and "
                "placement up; computes: rdt-compute (LibvirtRDTDriver on "
                f"{lab.resctrl_root}), plain-compute (no resctrl)")

            say.stage(3, "Boots: flavors through the API")
            flavors = {}
            for f in scenario.flavors:
                flavors[f.name] = self._create_flavor(
                    name=f.name, vcpu=f.vcpus, memory_mb=512, disk=1,
                    ephemeral=0, extra_spec=f.specs)
                say(f"openstack flavor create {f.name} --vcpus {f.vcpus} "
                    + " ".join(f"--property {k}={v}"
                               for k, v in f.specs.items()))
            key, value = scenario.bad_spec
            try:
                self.admin_api.post_extra_spec(
                    flavors[scenario.flavors[0].name],
                    {"extra_specs": {key: value}})
                result["bad_spec"] = "accepted (unexpected)"
            except api_client.OpenStackApiException as e:
                body = e.response.text if e.response is not None else str(e)
                msg = json.loads(body).get("badRequest", {}).get(
                    "message", body) if body.startswith("{") else body
                result["bad_spec"] = f"HTTP {e.response.status_code}: {msg}"
            say(f"flavor set --property {key}={value}: "
                f"{result['bad_spec']}")

            def boot(flavor, role, n):
                name = f"{role}-{n}"
                server = self.api.post_server({"server": self._build_server(
                    name=name, flavor_id=flavors[flavor], networks="none")})
                server = self.api.get_server(server["id"])
                deadline = time.monotonic() + 60
                while server["status"] not in ("ACTIVE", "ERROR"):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{name} stuck in "
                                           f"{server['status']}")
                    time.sleep(0.1)
                    server = self.api.get_server(server["id"])
                host = server.get("OS-EXT-SRV-ATTR:host")
                if server["status"] != "ACTIVE":
                    return server, None
                xml = self.domain_xml(server["id"])
                dname, uuid, lxml = domain_for_libvirt(
                    xml, lab.libvirt.domain_type)
                try:
                    lab.libvirt.define(lxml)
                    lab.libvirt.start_domain(dname)
                    _wait_record(settings.state_path, uuid)
                    # What an operator's `virsh dumpxml` shows, libvirt's
                    # own additions included.
                    ddir = os.path.join(out_dir, "domains")
                    os.makedirs(ddir, exist_ok=True)
                    with open(os.path.join(ddir, f"{dname}.xml"), "w") as f:
                        f.write(lab.libvirt.dumpxml(dname))
                    result["realized"].append(dname)
                    say(f"  {name} ({flavor}) ACTIVE on {host}; libvirt "
                        f"started {dname}")
                except Exception as e:           # libvirt refused it
                    result["refused"].append((dname, str(e)))
                    say(f"  {name} ({flavor}) ACTIVE on {host}; libvirt "
                        f"refused it: {e}")
                result["servers"].append(
                    {"name": name, "id": server["id"], "flavor": flavor,
                     "role": role, "host": host, "domain": dname})
                # The computes publish their RDT state to the scheduler
                # from the resource tracker's periodic task.
                self._run_periodics()
                return server, dname

            say("booting the scenario's instances (each domain Nova "
                "defines goes to the real libvirtd):")
            roles = {f.name: f.role for f in scenario.flavors}
            for flavor, count in scenario.boots:
                for i in range(count):
                    boot(flavor, roles[flavor], i)
            say(f"booting {scenario.filler} until no host can take one:")
            reasons = _FilterReasons()
            flog = logging.getLogger("nova_rdt.scheduler.filter")
            flog.addHandler(reasons)
            old_level = flog.level
            flog.setLevel(logging.DEBUG)
            try:
                for i in range(5 if short else 12):
                    server, _d = boot(scenario.filler, "filler", i)
                    if server["status"] == "ERROR":
                        fault = server.get("fault", {}).get("message", "?")
                        result["no_valid_host"] = fault
                        result["filter_reasons"] = sorted(set(reasons.lines))
                        say(f"  filler-{i}: ERROR: {fault}")
                        for line in result["filter_reasons"]:
                            say(f"    {line}")
                        break
            finally:
                flog.removeHandler(reasons)
                flog.setLevel(old_level)

    case = LabCloud("runTest")
    res = unittest.TestResult()
    case.run(res)
    problems = res.errors + res.failures
    if problems:
        raise RuntimeError("the Nova stage failed:\n" + "\n".join(
            text for _case, text in problems))
    if res.skipped:
        raise RuntimeError(f"the Nova stage was skipped: {res.skipped}")
    return result


def _wait_record(state_path, uuid, timeout=20.0):
    path = os.path.join(state_path, "domains", f"{uuid}.json")
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the hook wrote no record for {uuid}")
        time.sleep(0.05)


def _cos_table(snap, names) -> list[tuple[str, str, str, str]]:
    rows = []
    for group, g in snap.items():
        l3 = g["schemata"].get("L3", {})
        mb = g["schemata"].get("MB", {})
        mask = ";".join(f"{i}=0x{v:x}" for i, v in sorted(l3.items()))
        cpus = ",".join(map(str, sorted(g["cpus"]))) or "-"
        if len(cpus) > 20:
            cpus = f"{len(g['cpus'])} CPUs"
        who = names.get(group, "")
        rows.append((group, who, mask + (f" MB {','.join(map(str, mb.values()))}"
                                          if mb else ""),
                     f"{cpus} / {g['tasks']} tasks"))
    return rows


def _table(rows, head) -> str:
    widths = [max(len(str(r[i])) for r in rows + [head])
              for i in range(len(head))]
    line = "  ".join(f"{{:{w}}}" for w in widths)
    out = [line.format(*head), line.format(*("-" * w for w in widths))]
    out += [line.format(*r) for r in rows]
    return "\n".join(out)


def _way_map(snap, names, n: int) -> str:
    out = []
    ids = sorted(snap["/"]["schemata"].get("L3", {}))
    letters = {}
    for group in snap:
        letters[group] = "H" if group == "/" else (
            "P" if group.endswith("-pmd") else chr(ord("a") + len(letters)))
    for cid in ids:
        out.append(f"L3 cache id {cid} (way {n - 1} ... 0):")
        for group, g in snap.items():
            m = g["schemata"].get("L3", {}).get(cid, 0)
            cells = "".join(letters[group] if m >> w & 1 else "."
                            for w in reversed(range(n)))
            out.append(f"  {cells}  {group} {names.get(group, '')}".rstrip())
    return "\n".join(out)


def run(scenario_name: str = "onp", profile: str | None = None,
        out_dir: str = "nova-rdt-lab-report", short: bool = False,
        resctrl: str = "emulated", say: Printer | None = None,
        libvirt_cache_dir: str | None = None) -> dict:
    from nova_rdt.lab import Lab
    from nova_rdt.lab.procs import LabError

    say = say or Printer()
    scenario = scen_mod.SCENARIOS[scenario_name]
    if profile:
        import dataclasses
        scenario = dataclasses.replace(scenario, profile=profile)
    os.makedirs(out_dir, exist_ok=True)
    summary = {"scenario": scenario.name, "out_dir": os.path.abspath(out_dir)}
    lab = Lab(profile=scenario.profile, resctrl=resctrl,
              hook={"pmd_cos": scenario.pmd_cos,
                    "reserved_host_ways": scenario.reserved_host_ways,
                    "pmd_shared_ways": scenario.pmd_shared_ways,
                    "classes": list(scenario.classes)},
              failure_log_dir=os.path.join(out_dir, "failure-logs"),
              libvirt_cache_dir=libvirt_cache_dir, log=say)
    exporter = None

    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, interrupted)
    try:
        say(f"nova-rdt lab: {scenario.title}")
        say.stage(1, "Host")
        lab.start(traffic_ports=2)
        lab.ovs.cross_connect("p0", "p1")
        if lab.emulated:
            say(f"resctrl: EMULATED {scenario.profile} (no RDT hardware is "
                f"used; {EMULATION_NOTE.split(':')[0].lower()})")
        else:
            say("resctrl: the machine's REAL resctrl at /sys/fs/resctrl")
        say(f"libvirtd ({lab.libvirt.domain_type}), OVS-DPDK (PMD cores "
            f"{sorted(t.core for t in lab.ovs.pmd_threads())}), 2 traffic "
            f"ports, nova-rdt hook installed")

        nova = _nova_stage(lab, scenario, say, out_dir, short)
        summary.update({k: nova[k] for k in ("bad_spec", "no_valid_host",
                                             "filter_reasons")})
        say.stage(4, "Real libvirt")
        say(f"{len(nova['realized'])} domains started by the real libvirtd "
            f"from Nova's XML: {', '.join(nova['realized'])}")
        for d, why in nova["refused"]:
            say(f"  refused by libvirt: {d}: {why}")
        # The hook works in the background: let it finish, then check the
        # PMD COS against OVS as `nova-rdt pmd sync` would.
        time.sleep(1.0)
        if scenario.pmd_cos:
            say("PMD COS: " + lab.agent().sync_pmd())

        say.stage(5, "Show")
        snap = scen_mod.snapshot(lab.resctrl_root,
                                 copy_to=os.path.join(out_dir, "resctrl"))
        names = {}
        roles: dict[str, list[str]] = {}
        for s in nova["servers"]:
            for g in snap:
                if f"-{s['domain']}-vcpus_" in g:
                    names[g] = f"{s['name']} ({s['flavor']})"
                    roles.setdefault(s["role"], []).append(g)
        names["/"] = "host (OS)"
        for g in snap:
            if g.endswith("-pmd"):
                names[g] = "OVS PMD COS"
            elif "-class-" in g:
                names[g] = f"class {g.split('-class-', 1)[1]}"
        with open(os.path.join(out_dir, "servers.json"), "w") as f:
            json.dump(nova["servers"], f, indent=2)
        rows = _cos_table(snap, names)
        table = _table(rows, ("group", "owner", "L3 mask (per cache id)",
                              "CPUs / threads"))
        seed = _table(list(scenario.seed_table), ("seed COS", "mask"))
        say(table)
        say("\nThe seed's table:\n" + seed)
        info = os.path.join(lab.resctrl_root, "info")
        l3 = "L3" if os.path.isdir(os.path.join(info, "L3")) else "L3CODE"
        with open(os.path.join(info, l3, "cbm_mask")) as f:
            n_ways = bin(int(f.read(), 16)).count("1")
        ways = _way_map(snap, names, n_ways)
        say("\n" + ways)
        pmd_cores = ({t.core for t in lab.ovs.pmd_threads()}
                     if scenario.pmd_cos else None)
        # Fillers are extra load for the NoValidHost story, not part of
        # the seed's relations.
        relations = scen_mod.check(scenario, snap, {
            k: v for k, v in roles.items() if k != "filler"}, pmd_cores)
        say("")
        for text, ok in relations:
            say(f"  [{'ok' if ok else 'FAILED'}] {text}")
        summary["relations"] = relations

        say.stage(6, "Measure")
        exporter = _start_exporter(lab, out_dir)
        metrics = _scrape(exporter["url"])
        say(f"exporter on {exporter['url']} ({len(metrics.splitlines())} "
            f"metric lines)")
        report = _rfc2544(lab, out_dir, short, say)
        html = _html_report(out_dir, scenario, table, seed, ways, relations,
                            metrics, report, summary,
                            exporter["layout"], lab.emulated)
        say(f"HTML report: {html}")
        summary["report"] = html
        summary["ok"] = all(ok for _t, ok in relations)
        with open(os.path.join(out_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2, default=str)
        return summary
    except LabError as e:
        say(f"FAILED: {e}")
        raise
    finally:
        say.stage(7, "Clean up")
        if exporter:
            _stop_exporter(exporter)
        lab.stop()
        leaks = lab.leaks()
        say("everything stopped" + (f"; LEFT BEHIND: {leaks}" if leaks
                                     else "; nothing left behind"))
        signal.signal(signal.SIGTERM, old)


def _start_exporter(lab, out_dir) -> dict:
    import subprocess
    import urllib.request
    s = lab.hook_settings(host_view=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "nova_rdt.cmd.main", "exporter", "--port",
         "0", "--listen", "127.0.0.1", "--resctrl-root", lab.resctrl_root,
         "--sysfs-cpu-root", lab.sysfs_cpu_root, "--state-path",
         s.state_path, "--host", "lab", "--notify-interval", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    m = re.search(r"on (http://[\d.]+:\d+)/", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"the exporter did not start: {line}")
    url = m.group(1)
    with urllib.request.urlopen(url + "/api/layout", timeout=10) as r:
        layout = json.load(r)
    return {"proc": proc, "url": url, "layout": layout}


def _stop_exporter(exp) -> None:
    exp["proc"].terminate()
    try:
        exp["proc"].wait(timeout=10)
    except Exception:
        exp["proc"].kill()
        exp["proc"].wait()


def _scrape(url) -> str:
    import urllib.request
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return "\n".join(line for line in text.splitlines()
                     if line.startswith("nova_rdt_") and "way_owner" not in
                     line)


def _rfc2544(lab, out_dir, short, say) -> dict:
    from nova_rdt.rfc2544 import engine
    from nova_rdt.rfc2544 import report
    from nova_rdt.rfc2544 import search
    from nova_rdt.rfc2544.generators.software import SoftwareGenerator

    gen = SoftwareGenerator(lab.traffic.pairs[0][1], lab.traffic.pairs[1][1],
                            netns=lab.traffic.name, max_rate_pps=1_000_000)
    cfg = engine.RunConfig(
        frame_sizes=(64,) if short else (64, 512, 1518), label="lab",
        search=search.SearchConfig(loss_tolerance=0.001, resolution=0.02,
                                   trial_duration=1.0, probe_duration=0.5,
                                   max_trials=6 if short else 10),
        latency_duration=1.0, latency_load=0.9)

    def progress(ev):
        if ev["event"] == "trial":
            say(f"  [{ev['frame_size']} B] trial {ev['trial']}: "
                f"{ev['offered_pps']:,.0f} pps offered, "
                f"{ev['achieved_pps']:,.0f} sent, loss "
                f"{ev['loss_ratio']:.3%}")
        elif ev["event"] == "result":
            say(f"  [{ev['frame_size']} B] throughput "
                f"{ev['throughput_pps']:,.0f} pps"
                f"{' (generator-limited)' if ev['generator_limited'] else ''}"
                f", avg latency {ev['avg_latency_us'] or 0:.1f} µs")

    say("short RFC 2544 (software generator) across OVS-DPDK:")
    result = engine.run(gen, cfg, progress)
    rdir = os.path.join(out_dir, "rfc2544")
    report.write(result, rdir)
    return report.to_dict(result)


def _html_report(out_dir, scenario, table, seed, ways, relations, metrics,
                 rfc, summary, layout, emulated) -> str:
    import base64
    import html

    def img(name):
        path = os.path.join(out_dir, "rfc2544", name)
        with open(path, "rb") as f:
            return (f'<img alt="{name}" src="data:image/png;base64,'
                    f'{base64.b64encode(f.read()).decode()}">')

    cells = []
    for c in layout.get("caches", []):
        row = "".join(
            f'<td class="{html.escape(cell["owners"][0]["kind"]) if cell["owners"] else "free"}'
            f'{" shared" if len(cell["owners"]) > 1 else ""}" '
            f'title="{html.escape(" + ".join(o["label"] for o in cell["owners"]) or "free")}">'
            f'{cell["way"]}</td>' for cell in reversed(c["cells"]))
        cells.append(f"<tr><th>{html.escape(c['resource'])} id "
                     f"{c['cache_id']}</th>{row}</tr>")
    rel = "".join(f"<li class='{'ok' if ok else 'bad'}'>"
                  f"{'&#10003;' if ok else '&#10007;'} {html.escape(t)}</li>"
                  for t, ok in relations)
    rows = "".join(
        f"<tr><td>{f['frame_size']}</td>"
        f"<td>{f['throughput']['achieved_pps']:,.0f}</td>"
        f"<td>{'yes' if f['throughput']['generator_limited'] else 'no'}</td>"
        f"<td>{(f['latency'] or {}).get('percentiles_us', {}).get('50', '-')}"
        f"</td><td>{(f['latency'] or {}).get('percentiles_us', {}).get('99', '-')}"
        f"</td></tr>" for f in rfc["frames"])
    doc = f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>nova-rdt lab: {html.escape(scenario.name)}</title><style>
body{{font:14px/1.4 system-ui,sans-serif;margin:1.5em;max-width:1100px}}
pre{{background:#f4f4f4;padding:.6em;overflow:auto}}
table.map td{{width:28px;height:26px;text-align:center;font-size:11px;
border:1px solid #999}} .host{{background:#bdbdbd}} .pmd{{background:#f28e2b}}
.instance{{background:#4e79a7;color:#fff}} .class{{background:#b07aa1}}
.foreign{{background:#e15759}} .free{{background:#fff}}
.shared{{background:linear-gradient(135deg,#f28e2b 50%,#4e79a7 50%);color:#fff}}
.note{{border-left:4px solid #e15759;padding:.4em .8em;background:#fff4f4}}
li.ok{{color:#1a7f37}} li.bad{{color:#b00}} img{{max-width:48%}}
table.r td,table.r th{{padding:2px 10px;border-bottom:1px solid #ddd}}
</style></head><body>
<h1>nova-rdt lab: {html.escape(scenario.title)}</h1>
{f'<p class="note" id="emulation-note">{html.escape(EMULATION_NOTE)}</p>' if emulated else ''}
<h2>Way map</h2><table class="map" id="waymap">{''.join(cells)}</table>
<pre>{html.escape(ways)}</pre>
<h2>COS table</h2><pre id="cos">{html.escape(table)}</pre>
<h3>The seed's table</h3><pre>{html.escape(seed)}</pre>
<h2>Relations</h2><ul id="relations">{rel}</ul>
<h2>API and scheduler</h2>
<p>Bad spec: {html.escape(str(summary.get('bad_spec')))}</p>
<p>No valid host: {html.escape(str(summary.get('no_valid_host')))}</p>
<pre>{html.escape(chr(10).join(summary.get('filter_reasons') or []))}</pre>
<h2>RFC 2544 (software generator through OVS-DPDK, short)</h2>
<table class="r"><tr><th>frame</th><th>throughput (pps sent)</th>
<th>generator-limited</th><th>p50 µs</th><th>p99 µs</th></tr>{rows}</table>
<p>{img('latency.png')} {img('histogram.png')}</p>
<h2>Metrics snapshot</h2><pre>{html.escape(metrics)}</pre>
</body></html>"""
    path = os.path.abspath(os.path.join(out_dir, "report.html"))
    with open(path, "w") as f:
        f.write(doc)
    return path


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="nova-rdt lab",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", choices=sorted(scen_mod.SCENARIOS),
                    default="onp")
    ap.add_argument("--profile", help="emulated host profile (default: the "
                                      "scenario's)")
    ap.add_argument("--out", default="nova-rdt-lab-report")
    ap.add_argument("--short", action="store_true",
                    help="fewer boots and a one-frame-size RFC 2544")
    ap.add_argument("--resctrl", choices=["auto", "emulated", "real"],
                    default="emulated",
                    help="emulated (default), or the machine's own resctrl "
                         "(real, or auto: real when mounted); the lab then "
                         "shrinks its root group, as nova-compute would")
    ap.add_argument("--libvirt-cache-dir",
                    help="reuse QEMU's capability probe across runs")
    args = ap.parse_args(argv)
    try:
        summary = run(args.scenario, args.profile, args.out, args.short,
                      args.resctrl, libvirt_cache_dir=args.libvirt_cache_dir)
    except KeyboardInterrupt:
        print("interrupted; everything was stopped", file=sys.stderr)
        return 130
    except Exception as e:
        print(f"nova-rdt lab failed: {e}", file=sys.stderr)
        return 1
    return 0 if summary.get("ok") else 1
