"""``--computes 2 --short``: every move of an RDT instance between the
two computes, with the user's own commands, and boots that race.

Each move is typed as an operator types it (``openstack server migrate
--live-migration --host ...``), and checked underneath on both computes
(:mod:`.hostview`): on the destination the instance's vCPUs run in the
group libvirt made for its domain with exactly its flavor's ways on every
cache (a class member: in its class's group), a sharer's ways inside the
PMD COS, and nova-rdt's record of it; on the source nothing is left (no
domain, group or record) and the PMD COS is what it was before the
instance came.  One sharer and one class member make the journey.  A
live migration aborted while the destination's domain waits paused
checks that domain too: it must hold the instance's ways before it runs.

The race: N concurrent ``openstack server create`` of one flavor against
caches that fit fewer than N, with two scheduler workers.  Every ACTIVE
server must hold its ways, disjoint from its neighbours'; the rest end
in No valid host; reschedules and the time to settle are counted.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import re
import subprocess
import threading
import time

from nova_rdt.lab.allinone import hostview
from nova_rdt.lab.procs import LabError

#: The sharer's ways (and one more for the resize).
SHARER_WAYS = 2
#: The race's flavor.
RACE_WAYS = 3
#: Servers beyond what the caches fit.
RACE_EXTRA = 2
WAIT = 300
#: MiB/s the source sends a migration to be aborted at: a TCG guest's
#: memory otherwise crosses the loopback in a second or two, before an
#: abort can reach it.  At this speed it takes minutes.
ABORT_SPEED = 1
#: Seconds a compute has to come to what a move left it: the hook's
#: 'release' (and, but for an incoming migration, 'started') runs in the
#: background after libvirt's operation returns, so Nova may report a
#: move done a moment before the hook has dropped or written a record.
SETTLE = 30


@dataclasses.dataclass
class Result:
    move: str
    kind: str
    ok: bool | None
    src: str
    dst: str
    seconds: float
    masks: str = ""
    detail: str = ""
    #: How the hosts column reads, when not "src -> dst".
    hosts: str = ""

    def row(self) -> list[str]:
        mark = {True: "ok", False: "FAIL", None: "skip"}[self.ok]
        return [self.move, self.kind, mark,
                self.hosts or f"{self.src} -> {self.dst}",
                self.masks or "-", "yes" if self.ok else
                ("-" if self.ok is None else "see detail"),
                f"{self.seconds:.1f}", self.detail]


@dataclasses.dataclass
class Instance:
    kind: str
    name: str
    flavor: str
    ways: int | None
    rdt_class: str | None = None
    pmd_share: bool = False
    uuid: str = ""
    domain: str = ""


class Moves:
    def __init__(self, cloud, shell, say):
        self.cloud = cloud
        self.sh = shell
        self.say = say
        self.sides = {s.host: s for s in cloud.sides()}
        self.hosts = list(self.sides)
        self.results: list[Result] = []
        self.race: dict = {}
        self._lock = threading.Lock()
        self._conn = None
        #: host -> its PMD COS with no instance of ours on it.
        self.pmd_idle: dict[str, dict[int, int]] = {}

    # -- helpers --------------------------------------------------------

    def other(self, host: str) -> str:
        return next(h for h in self.hosts if h != host)

    def show(self, name: str) -> dict:
        """The server as ``openstack server show -f json`` prints it (the
        fields read here), through the SDK: polling with the CLI would
        cost a Python start-up a second on a two-core machine."""
        with self._lock:
            if self._conn is None:
                self._conn = self.cloud.conn()
            srv = self._conn.compute.find_server(name, ignore_missing=False)
        return {"id": srv.id, "name": srv.name, "status": srv.status,
                "OS-EXT-SRV-ATTR:host": srv.compute_host,
                "OS-EXT-SRV-ATTR:instance_name": srv.instance_name,
                "OS-EXT-STS:task_state": srv.task_state,
                "fault": srv.fault}

    def where(self, inst: Instance) -> str:
        return self.show(inst.name)["OS-EXT-SRV-ATTR:host"]

    def seen(self, host: str, inst: Instance) -> hostview.Seen:
        return hostview.observe(self.sides[host], inst.domain, inst.uuid)

    def _pmd_before(self, host: str, inst: Instance):
        """The PMD COS ``host`` must be back to once ``inst`` left: its
        idle one when ``inst`` was its only sharer (the class member
        travels beside the sharer and never moves the PMD COS: not
        judged for it)."""
        return self.pmd_idle.get(host) if inst.pmd_share else None

    def wait_status(self, name: str, want: set[str],
                    timeout: float = WAIT) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            s = self.show(name)
            if (s["status"] in want and not s["OS-EXT-STS:task_state"]
                    or s["status"] == "ERROR"):
                return s
            if time.monotonic() > deadline:
                return s
            time.sleep(1)

    def check(self, move: str, inst: Instance, src: str, dst: str,
              t0: float, run, settled: set[str] = frozenset({"ACTIVE"}),
              clean_source: bool = True, hosts: str = "",
              notes: list[str] | None = None) -> Result:
        """Run ``run()`` (the commands of one move), then judge both
        computes: ``dst`` holds the instance, ``src`` (when another) has
        nothing of it.  ``notes``, filled by ``run``, are said beside the
        result without failing it."""
        detail = []
        try:
            problem = run()
            if problem:
                detail.append(problem)
        except Exception as e:       # a step's own failure is the result
            detail.append(f"{type(e).__name__}: {e}")
        s = self.wait_status(inst.name, settled)
        # An evacuation's rebuild marks the server ACTIVE before Nova's
        # resource tracker moves it to its new host (finish_evacuation):
        # for a moment it reads ACTIVE on the host it left.
        deadline = time.monotonic() + SETTLE
        while (s["status"] in settled and s["OS-EXT-SRV-ATTR:host"] != dst
               and time.monotonic() < deadline):
            time.sleep(1)
            s = self.show(inst.name)
        seconds = time.monotonic() - t0
        at = s.get("OS-EXT-SRV-ATTR:host")
        if s["status"] not in settled:
            detail.append(f"status {s['status']}"
                          + (f": {s.get('fault')}" if s.get("fault") else ""))
        if at != dst:
            detail.append(f"on {at}, not {dst}")
        held, problems = self._settled(dst, inst, lambda seen: (
            hostview.judge_holds(seen, inst.domain, inst.ways,
                                 inst.rdt_class, inst.pmd_share)))
        detail += problems
        if src != dst and clean_source:
            pmd_before = self._pmd_before(src, inst)
            detail += self._settled(src, inst, lambda seen: (
                hostview.judge_clean(seen, inst.domain, pmd_before)))[1]
        masks = ""
        group = held.group_of_vcpus()
        if group and group in held.groups:
            masks = hostview.masks_text(held.groups[group].l3)
        r = Result(move, inst.kind, not detail, src, dst, seconds, masks,
                   "; ".join(detail + (notes or [])), hosts)
        self.results.append(r)
        self.say(f"  {'ok  ' if r.ok else 'FAIL'} {move} ({inst.kind}) "
                 f"{hosts or f'{src} -> {dst}'} in {seconds:.1f} s"
                 + (f", masks {masks}" if r.ok else "")
                 + (f": {r.detail}" if r.detail else ""))
        return r

    def _cmd(self, command: str, timeout: float = WAIT,
             retry_for: float = 0) -> str | None:
        """A command that must succeed: None, or what it printed.
        ``retry_for``: seconds during which a refusal is typed again,
        every two seconds."""
        deadline = time.monotonic() + retry_for
        while True:
            e = self.sh(command, timeout=timeout)
            if e.status == 0:
                return None
            if time.monotonic() > deadline:
                return f"`{command}`: {e.printed[-400:]}"
            time.sleep(2)

    # -- set-up ---------------------------------------------------------

    def flavors(self) -> None:
        from nova_rdt.lab.allinone import cloud as cloud_mod
        rdt_class = cloud_mod.CLASSES.split(":", 1)[0]
        specs = {
            "mv.sharer": f"rdt:l3_cache_ways={SHARER_WAYS} "
                         f"--property rdt:pmd_share=true",
            "mv.sharer.big": f"rdt:l3_cache_ways={SHARER_WAYS + 1} "
                             f"--property rdt:pmd_share=true",
            "mv.member": f"rdt:class={rdt_class}",
            "mv.plain": None,
            "mv.race": f"rdt:l3_cache_ways={RACE_WAYS}",
        }
        for name, spec in specs.items():
            prop = f" --property {spec}" if spec else ""
            self.sh(f"openstack flavor create {name} --vcpus 1 --ram 128 "
                    f"--disk 1{prop}")
        self.rdt_class = rdt_class

    def boot(self, inst: Instance, host: str) -> str | None:
        from nova_rdt.lab.allinone import cloud as cloud_mod
        problem = self._cmd(
            f"openstack --os-compute-api-version 2.74 server create "
            f"--flavor {inst.flavor} --image {cloud_mod.IMAGE} --nic none "
            f"--host {host} {inst.name}")
        if problem:
            return problem
        s = self.wait_status(inst.name, {"ACTIVE"})
        inst.uuid = s["id"]
        inst.domain = s["OS-EXT-SRV-ATTR:instance_name"]
        return None

    # -- the moves ------------------------------------------------------

    def run(self) -> None:
        a, b = self.hosts
        for host in self.hosts:
            self.pmd_idle[host] = hostview.pmd_mask(hostview.Seen(
                host, False, frozenset(), hostview.read_groups(
                    self.sides[host].resctrl_root), False))
        self.flavors()
        insts = [Instance("sharer", "mv-sharer", "mv.sharer", SHARER_WAYS,
                          pmd_share=True),
                 Instance("class member", "mv-member", "mv.member", None,
                          rdt_class=self.rdt_class)]
        # The two instances travel side by side (their moves touch
        # different groups); a full destination and the evacuation, which
        # change a whole host, come one at a time.
        self._each(insts, lambda i: self.check(
            "boot (--host)", i, a, a, time.monotonic(),
            lambda: self.boot(i, a)))
        unbooted = [r for r in self.results if not r.ok]
        if unbooted:
            # Nothing to move: the moves would only fail after it, and
            # hide the cause behind their own.
            raise LabError("; ".join(
                f"the {r.kind} did not boot on {a}: {r.detail}"
                for r in unbooted))
        self._each(insts, self.journey)
        for inst in insts:
            self.refused(inst)
        self._each(insts, self.aborted)
        self.evacuate(insts)

        def finish(inst):
            self.resize_plain(inst)
            self._cmd(f"openstack server delete --wait {inst.name}")
        self._each(insts, finish)

    @staticmethod
    def _each(insts: list[Instance], fn) -> None:
        with concurrent.futures.ThreadPoolExecutor(len(insts)) as pool:
            for fut in [pool.submit(fn, i) for i in insts]:
                fut.result()

    def journey(self, inst: Instance) -> None:
        name = inst.name
        src = self.where(inst)
        dst = self.other(src)
        self.check("live migration (--host)", inst, src, dst,
                   time.monotonic(), lambda: self._cmd(
                       f"openstack --os-compute-api-version 2.30 server "
                       f"migrate --live-migration --host {dst} "
                       f"{name}"))
        src, dst = dst, src
        self.check("live migration (scheduled)", inst, src, dst,
                   time.monotonic(), lambda: self._cmd(
                       f"openstack server migrate --live-migration "
                       f"{name}"))
        src = self.where(inst)
        dst = self.other(src)

        def cold(action: str):
            return lambda: self._verify_then(
                name, f"openstack --os-compute-api-version 2.56 server "
                      f"migrate --host {dst} {name}", action)
        self.check("cold migration, confirm", inst, src, dst,
                   time.monotonic(), cold("confirm"))
        src, dst = dst, src
        # Reverted: back where it was, nothing on the other.
        self.check("cold migration, revert", inst, dst, src,
                   time.monotonic(), cold("revert"),
                   hosts=f"{src} -> {dst}, reverted")
        if inst.kind == "sharer":
            big = dataclasses.replace(inst, flavor="mv.sharer.big",
                                      ways=SHARER_WAYS + 1)
            src = self.where(inst)
            t0 = time.monotonic()
            resize_problem = self._resize(name, big.flavor)
            dst = self.where(inst)
            self.check("resize to more ways", big, src, dst, t0,
                       lambda: resize_problem)
            inst.flavor, inst.ways = big.flavor, big.ways
        src = self.where(inst)
        dst = self.other(src)

        def unshelve():
            problem = self._cmd(f"openstack server shelve {name}")
            if problem:
                return problem
            s = self.wait_status(name, {"SHELVED_OFFLOADED"})
            if s["status"] != "SHELVED_OFFLOADED":
                return f"status {s['status']} after shelve"
            pmd_before = self._pmd_before(src, inst)
            left = self._settled(src, inst, lambda seen: (
                hostview.judge_clean(seen, inst.domain, pmd_before)))[1]
            if left:
                return "shelved, offloaded: " + "; ".join(left)
            return self._cmd(f"openstack --os-compute-api-version 2.91 "
                             f"server unshelve --host {dst} {name}")
        self.check("shelve, unshelve (--host)", inst, src, dst,
                   time.monotonic(), unshelve)

    def refused(self, inst: Instance) -> None:
        """A destination that refuses: the other compute's cache is
        filled until the instance cannot fit, then a live migration to
        it must fail and leave the instance where it was."""
        src = self.where(inst)
        dst = self.other(src)
        seen = self.seen(dst, inst)
        cbm_bits = self.cloud.profile.l3.cbm_len
        free = hostview.free_ways(seen, cbm_bits)
        if inst.rdt_class:
            from nova_rdt import naming
            if naming.class_group(naming.DEFAULT_PREFIX,
                                  inst.rdt_class) in seen.groups:
                self.results.append(Result(
                    "live migration refused (full destination)", inst.kind,
                    None, src, dst, 0.0, detail="its class's group is on "
                    "the destination: joining costs no ways"))
                return
            need = 1
        else:
            need = inst.ways or 0
        filler_ways = free - need + 1
        t0 = time.monotonic()
        filler = Instance("filler", f"mv-filler-{inst.name}",
                          f"mv.fill{filler_ways}", filler_ways)

        def run():
            if filler_ways > 0:
                self.sh(f"openstack flavor create {filler.flavor} --vcpus 1 "
                        f"--ram 128 --disk 1 --property "
                        f"rdt:l3_cache_ways={filler_ways}")
                problem = self.boot(filler, dst)
                if problem:
                    return f"the filler: {problem}"
            e = self.sh(f"openstack --os-compute-api-version 2.30 server "
                        f"migrate --live-migration --host {dst} "
                        f"{inst.name}")
            if e.status == 0 and self.where(inst) == dst:
                return "the full destination took it"
            return None
        try:
            # Judged: it still holds its ways where it was, and the full
            # destination has nothing of it.
            self.check("live migration refused (full destination)", inst,
                       dst, src, t0, run, hosts=f"{src} -> {dst} refused")
        finally:
            if filler_ways > 0:
                self.sh(f"openstack server delete --wait {filler.name}")
                self.sh(f"openstack flavor delete {filler.flavor}")

    def aborted(self, inst: Instance) -> None:
        """``openstack server migration abort`` of a running live
        migration.  The source's libvirt sends at :data:`ABORT_SPEED`
        (``virsh migrate-setspeed``), so the abort comes while the
        destination's domain waits, paused, for its memory.  That domain
        must already hold the instance's ways there: the hook writes them
        in libvirt's incoming Prepare phase, which ends before the source
        sends any memory.  After the abort the instance holds its ways
        where it was, and the destination keeps nothing of it."""
        src = self.where(inst)
        dst = self.other(src)
        virsh = ["virsh", "-q", "-c", self.sides[src].libvirt_uri]
        speed = subprocess.run(virsh + ["migrate-getspeed", inst.domain],
                               capture_output=True, text=True,
                               timeout=60).stdout.strip()
        notes: list[str] = []
        t0 = time.monotonic()

        def run():
            subprocess.run(virsh + ["migrate-setspeed", inst.domain,
                                    str(ABORT_SPEED)], check=True,
                           capture_output=True, timeout=60)
            problem = self._cmd(
                f"openstack --os-compute-api-version 2.30 server migrate "
                f"--live-migration --host {dst} {inst.name}")
            if problem:
                return problem
            problem = self._sending(virsh, inst)
            if problem:
                return f"the migration to {dst} {problem}: nothing to abort"
            arriving = self.seen(dst, inst)
            problems = hostview.judge_holds(
                arriving, inst.domain, inst.ways, inst.rdt_class,
                inst.pmd_share, arriving=True)
            if problems:
                return f"arriving, paused on {dst}: " + "; ".join(problems)
            group = arriving.group_of_vcpus()
            notes.append(f"paused on {dst}, vCPUs in {group} at "
                         f"{hostview.masks_text(arriving.groups[group].l3)}"
                         f" before the abort")
            mid = self.sh(
                f"openstack --os-compute-api-version 2.59 server migration "
                f"list --server {inst.name} --status running -f value "
                f"-c Id").printed.strip().splitlines()
            if len(mid) != 1:
                return f"not one running migration of {inst.name}: {mid}"
            problem = self._cmd(
                f"openstack --os-compute-api-version 2.24 server migration "
                f"abort {inst.name} {mid[0]}")
            if problem:
                return problem
            return self._after_abort(inst, mid[0], notes)
        try:
            self.check("live migration aborted", inst, dst, src, t0, run,
                       hosts=f"{src} -> {dst} aborted", notes=notes)
        finally:
            if speed:
                subprocess.run(virsh + ["migrate-setspeed", inst.domain,
                                        speed], capture_output=True,
                               timeout=60)

    def _sending(self, virsh: list[str], inst: Instance,
                 timeout: float = 120) -> str | None:
        """None once the source's migration job of ``inst`` sends memory
        (libvirt's Perform phase: the destination's Prepare, and the
        hook's 'started' with it, are over); else why it never did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = subprocess.run(virsh + ["domjobinfo", inst.domain],
                                  capture_output=True, text=True,
                                  timeout=60).stdout
            m = re.search(r"^Data processed:\s+([\d.]+)", info, re.M)
            if m and float(m.group(1)) > 0:
                return None
            s = self.show(inst.name)
            if s["OS-EXT-STS:task_state"] != "migrating":
                return (f"ended before it sent memory (status "
                        f"{s['status']}"
                        + (f": {s['fault'].get('message')}" if isinstance(
                            s.get("fault"), dict) else "") + ")")
            time.sleep(0.5)
        return f"sent no memory in {timeout:g} s"

    def _after_abort(self, inst: Instance, mid: str,
                     notes: list[str]) -> str | None:
        """Wait until Nova has finished with migration ``mid``.  Its
        rollback marks the migration cancelled and the server ACTIVE;
        then Nova 34's ``_live_migration`` re-raises the cancelled job's
        error, which marks both ERROR, seconds later (the RPC's own
        instance event ends at once: the migration runs in a pool).  The
        guest runs on the source all along; the server is set active
        again as an operator would, and the table says so.  A Nova that
        stops at cancelled is waited for :data:`SETTLE` seconds."""
        server = self.show(inst.name)["id"]
        deadline = time.monotonic() + WAIT
        cancelled_at = None
        while True:
            with self._lock:
                status = next((m.status for m in self._conn.compute.migrations(
                    instance_uuid=server) if str(m.id) == mid), None)
            now = time.monotonic()
            if status == "error":
                break
            if status == "cancelled":
                cancelled_at = cancelled_at or now
                if now - cancelled_at > SETTLE:
                    break
            if now > deadline:
                return f"migration {mid} still {status} after the abort"
            time.sleep(1)
        if status == "error":
            # Nova saves the migration, then the server.
            s = self.wait_status(inst.name, {"ERROR"}, timeout=SETTLE)
            if s["status"] == "ERROR":
                notes.append(f"Nova set the server ERROR after the abort "
                             f"(migration {mid}: error); set active again")
                return self._cmd(f"openstack server set --auto-approve "
                                 f"--state active {inst.name}")
        return None

    def evacuate(self, insts: list[Instance]) -> None:
        """The host both instances are on goes down (its nova-compute
        stops, its domains die), is forced down, and both are evacuated;
        then it comes back, cleans up, and is set up again."""
        src = self.where(insts[0])
        for inst in insts[1:]:
            if self.where(inst) != src:
                self._cmd(f"openstack --os-compute-api-version 2.30 server "
                          f"migrate --live-migration --host {src} "
                          f"{inst.name}")
                self.wait_status(inst.name, {"ACTIVE"})
        dst = self.other(src)
        t0 = time.monotonic()
        self.cloud.stop_compute(src)
        side = self.sides[src]
        for inst in insts:
            # The host died: so did its guests.
            subprocess.run(["virsh", "-q", "-c", side.libvirt_uri,
                            "destroy", inst.domain], capture_output=True)
        self._cmd(f"openstack --os-compute-api-version 2.11 compute service "
                  f"set --down {src} nova-compute")
        for inst in insts:
            self.check(
                "evacuate (source forced down)", inst, src, dst, t0,
                lambda i=inst: self._cmd(
                    f"openstack --os-compute-api-version 2.29 server "
                    f"evacuate --host {dst} {i.name}"),
                # The source is judged once it is back (below).
                clean_source=False)
        t1 = time.monotonic()
        # Nova refuses to unset the flag while "done" evacuations remain
        # on the host ("Unable to force up host ...", in nova-api's log;
        # the CLI says only that it failed); the compute, restarted,
        # destroys the evacuated guests and completes them, and only then
        # may it be set up.
        self.cloud.start_compute(src, wait=False)
        problem = self._cmd(f"openstack --os-compute-api-version 2.11 "
                            f"compute service set --up {src} nova-compute",
                            retry_for=180)
        if problem:
            raise RuntimeError(f"{src} could not be set up again after the "
                               f"evacuation: {problem}")
        self.cloud.wait_compute_up(src)
        for inst in insts:
            self.check("evacuated: source back up, cleaned", inst, src,
                       dst, t1, lambda i=inst: self._wait_clean(src, i))

    def _settled(self, host: str, inst: Instance, judge,
                 timeout: float = SETTLE
                 ) -> tuple[hostview.Seen, list[str]]:
        """``host`` as ``judge`` finds it once it finds nothing wrong, or
        when ``timeout`` has passed: what it found then."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.seen(host, inst)
            problems = judge(seen)
            if not problems or time.monotonic() > deadline:
                return seen, problems
            time.sleep(1)

    def _wait_clean(self, host: str, inst: Instance) -> str | None:
        """A compute that was down: it cleans up once it is back."""
        left = self._settled(host, inst, lambda seen: hostview.judge_clean(
            seen, inst.domain, None), timeout=120)[1]
        return "; ".join(left) or None

    def _verify_then(self, name: str, command: str,
                     action: str) -> str | None:
        """``command`` (a resize or a cold migration), then, once the
        server waits in VERIFY_RESIZE, ``openstack server resize
        <action>`` (confirm or revert)."""
        problem = self._cmd(command)
        if problem:
            return problem
        s = self.wait_status(name, {"VERIFY_RESIZE"})
        if s["status"] != "VERIFY_RESIZE":
            return f"status {s['status']} after `{command}`"
        return self._cmd(f"openstack server resize {action} {name}")

    def _resize(self, name: str, flavor: str) -> str | None:
        return self._verify_then(
            name, f"openstack server resize --flavor {flavor} {name}",
            "confirm")

    def resize_plain(self, inst: Instance) -> None:
        src = self.where(inst)
        plain = dataclasses.replace(inst, flavor="mv.plain", ways=None,
                                    rdt_class=None, pmd_share=False)
        t0 = time.monotonic()
        problem = self._resize(inst.name, "mv.plain")
        dst = self.where(inst)
        r = self.check("resize to a flavor with no rdt: keys", plain, src,
                       dst, t0, lambda: problem)
        # No group anywhere: the old host's, if it stayed, is judged too.
        if src == dst:
            left = [g for g in self.seen(src, inst).groups
                    if re.search(rf"-{re.escape(inst.domain)}-", g)]
            if left:
                r.ok = False
                r.detail = f"group(s) {left} left after the resize"


def run_race(cloud, shell, say) -> dict:
    """N concurrent creates of one flavor against caches that fit fewer
    than N (two scheduler workers): counts, reschedules, time to settle,
    and whether every ACTIVE server holds its own ways."""
    from nova_rdt.lab.allinone import cloud as cloud_mod
    sides = cloud.sides()
    cbm_bits = cloud.profile.l3.cbm_len
    fit = 0
    for side in sides:
        seen = hostview.Seen(side.host, False, frozenset(),
                             hostview.read_groups(side.resctrl_root), False)
        fit += hostview.free_ways(seen, cbm_bits) // RACE_WAYS
    n = fit + RACE_EXTRA
    logs = [cloud.services[name]["log"] for name in cloud.services
            if name.startswith("nova-compute")]
    marks = {path: _size(path) for path in logs}
    names = [f"race-{i}" for i in range(n)]
    say(f"  {n} concurrent creates of a {RACE_WAYS}-way flavor; the "
        f"caches fit {fit}")
    t0 = time.monotonic()

    def create(name):
        return shell(f"openstack server create --flavor mv.race --image "
                     f"{cloud_mod.IMAGE} --nic none {name}", timeout=WAIT)
    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        list(pool.map(create, names))
    # Settled: every server ACTIVE or ERROR, with no task running.
    poll = Moves(cloud, shell, say)
    servers = {name: poll.wait_status(name, {"ACTIVE"}) for name in names}
    settle = time.monotonic() - t0
    active = [s for s in servers.values() if s["status"] == "ACTIVE"]
    # Refused by the scheduler, or by every compute's claim in turn
    # (Nova's MaxRetriesExceeded, a NoValidHost: the schedulers' views
    # of the hosts were stale while the boots raced).
    novalid = [s for s in servers.values() if s["status"] == "ERROR"
               and "No valid host" in str(s.get("fault"))]
    retries = [s for s in servers.values() if s["status"] == "ERROR"
               and "Exceeded maximum number of retries" in str(
                   s.get("fault"))]
    other = [s for s in servers.values()
             if s not in active and s not in novalid and s not in retries]
    reschedules = sum(_count_since(path, marks[path],
                                   "was re-scheduled") for path in logs)
    by_side = {side.host: side for side in sides}
    unisolated, overlaps = [], []
    held: dict[str, list[tuple[str, dict[int, int]]]] = {}
    for s in active:
        host = s["OS-EXT-SRV-ATTR:host"]
        seen = hostview.observe(by_side[host], s[
            "OS-EXT-SRV-ATTR:instance_name"], s["id"])
        bad = hostview.judge_holds(seen, s["OS-EXT-SRV-ATTR:instance_name"],
                                   RACE_WAYS)
        if bad:
            unisolated.append(f"{s['name']}: {'; '.join(bad)}")
            continue
        group = seen.group_of_vcpus()
        held.setdefault(host, []).append((s["name"],
                                          seen.groups[group].l3))
    # A refused boot leaves nothing on any compute.
    for s in novalid + retries:
        for side in sides:
            left = hostview.judge_clean(hostview.observe(side, s[
                "OS-EXT-SRV-ATTR:instance_name"], s["id"]),
                s["OS-EXT-SRV-ATTR:instance_name"], None)
            unisolated += [f"{s['name']} (refused): {x}" for x in left]
    for host, groups in held.items():
        for i, (a, ma) in enumerate(groups):
            for b, mb in groups[i + 1:]:
                if any(ma[c] & mb.get(c, 0) for c in ma):
                    overlaps.append(f"{a} and {b} share ways on {host}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda name: shell(
            f"openstack server delete {name}"), names))
    result = {
        "n": n, "fit": fit, "ways": RACE_WAYS,
        "scheduler_workers": 2,
        "active": len(active), "no_valid_host": len(novalid),
        "max_retries_exceeded": len(retries),
        "other": [f"{s['name']}: {s['status']} {s.get('fault')}"
                  for s in other],
        "reschedules": reschedules, "settle_seconds": round(settle, 1),
        "unisolated": unisolated, "overlapping": overlaps,
        "per_host": {h: len(g) for h, g in held.items()},
    }
    result["ok"] = (not unisolated and not overlaps and not other
                    and len(active) <= fit
                    and len(active) + len(novalid) + len(retries) == n)
    say(f"  {'ok  ' if result['ok'] else 'FAIL'} race: N={n}, ACTIVE "
        f"{len(active)} ({result['per_host']}), No valid host "
        f"{len(novalid)} from the scheduler and {len(retries)} after every "
        f"compute refused (MaxRetriesExceeded), reschedules {reschedules}, "
        f"unisolated or half-made "
        f"{len(unisolated)}, overlapping {len(overlaps)}, settled in "
        f"{settle:.1f} s")
    for line in unisolated + overlaps + result["other"]:
        say(f"    {line}")
    return result


def _size(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return f.seek(0, 2)
    except OSError:
        return 0


def _count_since(path: str, offset: int, needle: str) -> int:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace").count(needle)
    except OSError:
        return 0


def table(results: list[Result]) -> str:
    """move x instance kind x result, as text."""
    head = ["move", "instance", "result", "hosts", "destination masks",
            "source clean", "seconds", "detail"]
    rows = [head] + [r.row() for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
    out = []
    for row in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths))
                   + ("  " + row[-1] if row[-1] else ""))
    return "\n".join(out) + "\n"
