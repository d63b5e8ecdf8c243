"""``nova-rdt lab --scenario cloud``: the all-in-one cloud, served until
Ctrl-C or SIGTERM, or (``--short``) checked with the user's own tools and
Tempest, then stopped.

Writes ``<out>/cloud/clouds.yaml``, ``<out>/cloud/serve.json`` and the
Tempest workspace ``<out>/cloud/tempest``; with ``--short`` also
``<out>/cloud/exchange.txt`` (the commands as typed and as printed),
``ps.txt``, the domain XML Nova wrote and the one libvirt holds, and
``<out>/summary.json``.  Nova's test framework is not imported: nothing
here needs eventlet.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from nova_rdt.lab.allinone import checks as checks_mod
from nova_rdt.lab.allinone import cloud as cloud_mod
from nova_rdt.lab.allinone import exchange
from nova_rdt.lab.allinone import promview
from nova_rdt.lab.allinone import serve
from nova_rdt.lab.procs import LabError
from nova_rdt.lab.run import LabRun

#: How often a serving cloud looks at its processes.
WATCH_INTERVAL = 2.0
#: Tempest in a two-compute --short: one live and one cold migration
#: whitebox test (the moves stage already made every move, each judged
#: on both computes; each Tempest move costs a boot and a minute here).
#: The isolation scenario is the one-compute run's proof; the served
#: cloud runs all of ``tempest_plugin``.
TWO_COMPUTES_TEMPEST = (
    r"tempest_plugin\.tests\.api\.test_rdt_migration\."
    r"(RdtLiveMigrationTest\.test_live_migration_of_a_pmd_sharer"
    r"|RdtColdMigrationTest\.test_cold_migration_reverted_of_a_class_member)")


def run(scenario_name: str = "cloud", profile: str | None = None,
        out_dir: str = "nova-rdt-lab-report", short: bool = False,
        resctrl: str = "emulated", say=None,
        libvirt_cache_dir: str | None = None, kernel: str | None = None,
        logs=None, computes: int = 1) -> dict:
    """The cloud; returns the summary (also in ``summary.json``)."""
    with LabRun(scenario_name, out_dir, say, logs) as run:
        say = run.say
        run.say_summary = _say_summary
        run.summary["short"] = short
        if resctrl != "emulated":
            raise LabError("the cloud scenario runs on the emulated resctrl "
                           "(--resctrl emulated): it shows libvirt and "
                           "nova-compute a resctrl of the lab's namespace")
        reason = cloud_mod.unavailable_reason()
        if reason:
            raise LabError(f"the cloud cannot run here: {reason}")
        say("nova-rdt lab: cloud, every OpenStack service a real process"
            + (f", {computes} computes" if computes > 1 else "")
            + ((" (short: every move between them, boots that race and "
                "Tempest, then stop)" if computes > 1 else
                " (short: the user's tools and Tempest, then stop)")
               if short else ""))
        cloud = cloud_mod.AllInOne(out_dir, profile=profile, kernel=kernel,
                                   libvirt_cache_dir=libvirt_cache_dir,
                                   say=say, computes=computes)
        run.summary["computes"] = computes
        run.lab = cloud.lab
        def stop() -> list[str]:
            left = cloud.stop()
            run.summary["stop_seconds"] = cloud.stop_timings
            return left
        run.stopper = stop
        # The services' logs outlive the lab directory.
        run.cleanup("keeping the logs", lambda: cloud.lab.keep_logs(
            os.path.join(serve.cloud_dir(out_dir), "logs")))
        run.stop_note = f" (lab directory {cloud.base})"
        run.stage("Services (MariaDB, RabbitMQ, Keystone, Glance, "
                  "Placement, Neutron, Nova)")
        try:
            cloud.start()
        finally:
            run.summary["timings"] = cloud.timings
            run.summary["services"] = cloud.services
            run.summary["cloud"] = _machine(cloud)
        say(f"up in {cloud.timings['start']} s: "
            f"{cloud.machine.virt_type} ({cloud.machine.reason})")
        for note in cloud.machine.forced:
            say(f"NOTE: this machine forces {note}")
        run.stage("Ready")
        cloud.tempest_short = short
        paths = _ready(cloud, out_dir, say)
        run.summary.update(paths)
        if short:
            run.summary["ok"] = _short(run, cloud, paths, out_dir)
            if not run.summary["ok"]:
                # A check that did not hold raised nothing: the services'
                # logs would go with the lab's directory.
                kept = os.path.join(out_dir, "failure-logs")
                for lab in [cloud.lab] + ([cloud.subnode.lab]
                                          if cloud.subnode else []):
                    lab.keep_logs(os.path.join(kept, f"lab-{lab.id}"))
                run.summary["failure_logs"] = kept
                say(f"not everything held: the labs' logs are kept in "
                    f"{kept}")
        else:
            _serve(run, cloud)
    return run.summary


def _machine(cloud) -> dict:
    """Which accelerator and guest the cloud used, why, and everything
    this machine forced."""
    guest = cloud.guest
    return {"virt_type": cloud.machine.virt_type,
            "virt_type_reason": cloud.machine.reason,
            "guest_image": guest.kind if guest else None,
            "guest_image_reason": guest.reason if guest else None,
            "forced_by_this_machine": list(cloud.machine.forced)}


def _ready(cloud, out_dir: str, say) -> dict:
    cdir = serve.cloud_dir(out_dir)
    os.makedirs(cdir, exist_ok=True)
    clouds = serve.clouds_yaml(cloud, os.path.join(cdir, "clouds.yaml"))
    workspace = serve.tempest_workspace(cloud, os.path.join(cdir,
                                                            "tempest"))
    serve_path = serve.serve_json(cloud, os.path.join(cdir, "serve.json"),
                                  workspace)
    # What the devstack plugin's phases wrote, for the record (the lab
    # directory goes with the cloud).
    etc = os.path.join(cdir, "etc-nova")
    os.makedirs(etc, exist_ok=True)
    for name in ("nova.conf", "nova-cpu.conf", "api-paste.ini",
                 os.path.join("rootwrap.d", "nova-rdt.filters")):
        src = os.path.join(cloud.nova_etc, name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(etc, os.path.basename(name)))
    ps_path = os.path.join(cdir, "ps.txt")
    with open(ps_path, "w") as f:
        f.write(ps_table(cloud))
    exporter = cloud.services["nova-rdt-exporter"]["url"]
    prometheus = cloud.services["prometheus"]["url"]
    say("In another shell:")
    for line in serve.exports(clouds):
        say("  " + line)
    say(f"  (a member of project demo: export OS_CLOUD="
        f"{serve.MEMBER_CLOUD})")
    say(f"image:      {cloud_mod.IMAGE}"
        + (f" ({cloud.guest.kind} guest)" if cloud.guest else ""))
    say(f"exporter:   {exporter}/ (way map), {exporter}/metrics, "
        f"{exporter}/api/layout")
    say(f"prometheus: {prometheus}")
    say(f"tempest:    cd {workspace} && tempest run --regex "
        f"tempest_plugin")
    say(f"services:   {serve_path} (pids, URLs, logs); ps in {ps_path}")
    return {"clouds_yaml": clouds, "serve_json": serve_path,
            "tempest_workspace": workspace, "ps": ps_path}


def ps_table(cloud) -> str:
    """``ps`` of every process the cloud started, with their workers."""
    sessions = {str(s["pid"]) for s in cloud.services.values()}
    res = subprocess.run(["ps", "-eo", "pid,sid,rss,args", "--sort",
                          "sid,pid"], capture_output=True, text=True)
    lines = res.stdout.splitlines()
    keep = [lines[0]] + [ln for ln in lines[1:]
                         if ln.split()[1] in sessions]
    return "\n".join(ln[:200] for ln in keep) + "\n"


def _serve(run: LabRun, cloud) -> None:
    say = run.say
    say("serving until Ctrl-C (or SIGTERM)")
    run.summary["ok"] = False
    try:
        while True:
            time.sleep(WATCH_INTERVAL)
            for name, svc in cloud.services.items():
                proc = next((p for p in cloud.procs if p.pid == svc["pid"]),
                            None)
                if proc is not None and not proc.running():
                    raise LabError(f"{name} exited (status "
                                   f"{proc.popen.poll()}); its log: "
                                   f"{proc.log_path}")
    except KeyboardInterrupt:
        # The way a served cloud ends.
        say("stopping")
        run.summary["ok"] = True
        run.summary["stopped_by"] = "signal"


def _short(run: LabRun, cloud, paths: dict, out_dir: str) -> bool:
    """One compute: the user's tools against the cloud.  Two: every move
    between them and the race instead (the one-compute run has the
    user's tools; here they would cost a minute of the eight)."""
    say = run.say
    shell = exchange.Shell(paths["clouds_yaml"], serve.ADMIN_CLOUD,
                           env=cloud.env())
    chk = checks_mod.Checks(cloud, shell, out_dir, say)
    moves_ok = True
    tpath = os.path.join(serve.cloud_dir(out_dir), "exchange.txt")
    try:
        if cloud.subnode:
            moves_ok = _moves(run, cloud, shell, out_dir)
        else:
            run.stage("The user's tools (openstack, as typed in another "
                      "shell)")
            chk.flavors()
            chk.server()
            chk.no_valid_host()
            chk.traits()
    finally:
        with open(tpath, "w") as f:
            f.write(shell.transcript())
        run.summary["exchange"] = tpath
        run.summary["checks"] = [c.__dict__ for c in chk.results]
        run.summary["facts"] = chk.facts
    say(f"exchange: {tpath}")
    regex = TWO_COMPUTES_TEMPEST if cloud.subnode else "tempest_plugin"
    run.stage("Tempest (one live and one cold migration whitebox test)"
              if cloud.subnode else f"Tempest (tempest run --regex {regex})")
    t = checks_mod.tempest_run(paths["tempest_workspace"], cloud.env(),
                               regex=regex)
    run.summary["tempest"] = t
    for line in t["lines"]:
        say("  " + line)
    say(f"{t['passed']} passed, {t['skipped']} skipped, {t['failed']} "
        f"failed in {t['seconds']} s (exit status {t['status']})")
    found = isolation_artifacts(cloud)
    if found:
        run.summary["isolation"] = found
        say(f"isolation scenario: tables {found['tables']}, summary "
            f"{found['summary']}")
    for s in t["skips"]:
        say(f"  skipped {s['test']}: {s['reason']}")
    for f in t["failures"]:
        say(f"  FAILED {f}")
    ok = all(c.ok is not False for c in chk.results) and moves_ok
    return ok and t["failed"] == 0 and t["status"] == 0


def _moves(run: LabRun, cloud, shell, out_dir: str) -> bool:
    """Every move of a sharer and a class member between the computes,
    then the race; the table in ``<out>/cloud/moves.txt``."""
    from nova_rdt.lab.allinone import moves as moves_mod
    say = run.say
    run.stage(f"Moves between {' and '.join(s.host for s in cloud.sides())}"
              f" (openstack server migrate/resize/shelve/evacuate)")
    mv = moves_mod.Moves(cloud, shell, say)
    path = os.path.join(serve.cloud_dir(out_dir), "moves.txt")
    try:
        mv.run()
    finally:
        with open(path, "w") as f:
            f.write(moves_mod.table(mv.results))
        run.summary["moves"] = [r.__dict__ for r in mv.results]
        run.summary["moves_table"] = path
    say(f"moves: {path}")
    hosts = [s.host for s in cloud.sides()]
    seen, missing = promview.wait(cloud.services["prometheus"]["url"],
                                  hosts, targets=2 * len(hosts))
    run.summary["prometheus"] = {
        "targets": seen.targets if seen else {},
        "hosts": list(seen.hosts) if seen else [], "missing": missing}
    say(f"  {'ok  ' if not missing else 'FAIL'} Prometheus: "
        + ("; ".join(missing) if missing else
           f"{len(seen.targets)} targets up, the dashboard's $host offers "
           f"{', '.join(seen.hosts)}"))
    run.stage("Boots that race (two scheduler workers)")
    race = moves_mod.run_race(cloud, shell, say)
    run.summary["race"] = race
    return (all(r.ok is not False for r in mv.results) and race["ok"]
            and not missing)


def isolation_artifacts(cloud) -> dict | None:
    """Where the Tempest isolation scenario left its Tables 3-2/3-3
    analogues and summary.json (under ``[nova_rdt] artifacts_dir``, one
    directory per run; the newest), or None."""
    from nova_rdt.isolation import artifacts
    base = cloud.tempest_env().get("NOVA_RDT_TEMPEST_ARTIFACTS_DIR")
    if not base or not os.path.isdir(base):
        return None
    runs = [os.path.join(base, d) for d in os.listdir(base)
            if os.path.isfile(os.path.join(base, d, artifacts.SUMMARY))]
    if not runs:
        return None
    newest = max(runs, key=os.path.getmtime)
    return {"dir": newest,
            "summary": os.path.join(newest, artifacts.SUMMARY),
            "tables": os.path.join(newest, "tables.txt"),
            "csv": sorted(os.path.join(newest, f) for f in os.listdir(newest)
                          if f.endswith(".csv"))}


def _say_summary(say, summary: dict) -> None:
    checks = summary.get("checks") or []
    held = sum(1 for c in checks if c["ok"])
    skipped = sum(1 for c in checks if c["ok"] is None)
    t = summary.get("tempest") or {}
    verdict = ("OK" if summary.get("ok") else
               "INTERRUPTED" if summary.get("interrupted") else "FAILED")
    parts = [f"{verdict}: cloud"]
    moves = summary.get("moves") or []
    if summary.get("short") and checks:
        parts.append(f"{held}/{len(checks) - skipped} checks hold"
                     + (f" ({skipped} said, not judged)" if skipped
                        else ""))
    if moves:
        judged = [m for m in moves if m["ok"] is not None]
        parts.append(f"{sum(1 for m in judged if m['ok'])}/{len(judged)} "
                     f"moves hold")
    race = summary.get("race")
    if race:
        parts.append(f"race {race['active']}/{race['n']} ACTIVE, "
                     f"{len(race['unisolated'])} unisolated")
        if t:
            parts.append(f"tempest {t.get('passed')} passed, "
                         f"{t.get('skipped')} skipped, {t.get('failed')} "
                         f"failed")
    parts.append(f"in {summary.get('seconds')} s")
    say(", ".join(parts))
    if summary.get("error"):
        say(f"error: {summary['error']}")
    for c in checks:
        if c["ok"] is False:
            say(f"  FAILED {c['name']}: {c['detail']}")
    for m in moves:
        if m["ok"] is False:
            say(f"  FAILED {m['move']} ({m['kind']}): {m['detail']}")
    for line in (summary.get("prometheus") or {}).get("missing", ()):
        say(f"  FAILED Prometheus: {line}")
    if summary.get("moves_table"):
        say(f"moves: {summary['moves_table']}")
    for key in ("exchange", "serve_json", "tempest_workspace"):
        if summary.get(key):
            say(f"{key.replace('_', ' ')}: {summary[key]}")
    if summary.get("isolation"):
        say(f"isolation tables: {summary['isolation']['tables']}")
    say(f"summary: {os.path.join(summary['out_dir'], 'summary.json')}")
    say(f"logs:    {summary['log_file']}")
