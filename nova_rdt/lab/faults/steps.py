"""One run of the faults scenario: set up a small known state, arm the
fault, perform the operation, recover as an operator's host would, and
time the way back to a state where the four kinds of state agree.

The known state: one PMD-sharing RDT VM and one class member, running
on the lab's real libvirtd, and two foreign groups.  Recovery, in the
order a host goes through it: the fault is undone (the disk freed, the
mount back), nova-compute restarts when it died or lost its resctrl,
the operator deletes servers left in ERROR (and the lab's libvirtd runs
exactly Nova's ACTIVE servers, which Nova's driver does on a real host),
``nova-rdt reconcile`` runs, then the resource tracker's periodic task.

A failpoint ``exit`` inside nova-compute (this process) cannot end the
process: it is armed as ``die``, which unwinds the build with an
exception no Nova handler catches (what runs after the point never
runs, as in a real exit), and the
compute is then restarted, losing its memory (claims) as a real one
would.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import uuid as uuid_mod

from nova_rdt import failpoints
from nova_rdt.host import records as records_mod
from nova_rdt.lab.faults import check
from nova_rdt.lab.faults import hostfaults
from nova_rdt.lab.faults import observe
from nova_rdt.lab.faults.plan import Run

#: A pid no process has (above PID_MAX_LIMIT - 2 is never handed out
#: on a default host): the planted dead domain's.
DEAD_PID = records_mod.MAX_PID - 1
DEAD_GROUP = "qemu-900-instance-dead-vcpus_0"
CLI_TIMEOUT = 60.0


@dataclasses.dataclass
class Timing:
    converge_timeout: float = 30.0
    baseline_timeout: float = 30.0
    poll: float = 0.2


def nova_rdt_command() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "nova-rdt")
    return here if os.path.exists(here) else "nova-rdt"


class Harness:
    def __init__(self, lab, servers, state_fs: hostfaults.StateFs, say,
                 timing: Timing | None = None):
        self.lab = lab
        self.servers = servers
        self.cloud = servers.cloud
        self.state_fs = state_fs
        self.say = say
        self.timing = timing or Timing()
        self.hook = hostfaults.HookArming(
            lab.libvirt.hooks_dir,
            os.path.join(lab.log_dir, "hook-stderr.log"))
        self.fs = lab.agent().fs
        self.rules = observe.rules(self.fs)
        observe.make_foreign(lab.resctrl_root)
        self.foreign_before = observe.foreign_files(lab.resctrl_root)
        self._run_log_at = self._hook_log_size()

    # -- helpers ---------------------------------------------------------

    def cli(self, *args: str, armed: str | None = None
            ) -> subprocess.CompletedProcess:
        """``nova-rdt ARGS --settings <the hook's>`` in the lab namespace,
        as the operator runs it on the host."""
        argv = (["env", f"{failpoints.ENV}={armed}"] if armed else [])
        argv += [nova_rdt_command(), *args, "--settings",
                 self.lab.hook_settings_path]
        return subprocess.run(self.lab.ns.command(argv), capture_output=True,
                              text=True, timeout=CLI_TIMEOUT)

    def verdict(self) -> check.Verdict:
        return check.judge(observe.observe(self.lab, self.servers,
                                           self.foreign_before, self.rules))

    def wait_converged(self, timeout: float, t0: float | None = None
                       ) -> tuple[check.Verdict | None, float | None, str]:
        """Poll until converged; (last verdict, seconds since ``t0`` or
        None, why not)."""
        t0 = time.monotonic() if t0 is None else t0
        deadline = time.monotonic() + timeout
        last, why = None, ""
        while True:
            try:
                last = self.verdict()
                why = last.why()
                if last.converged:
                    return last, time.monotonic() - t0, why
            except OSError as e:
                why = f"host not readable: {e}"
            if time.monotonic() > deadline:
                return last, None, why
            time.sleep(self.timing.poll)

    # -- the known state -----------------------------------------------

    def baseline(self) -> str:
        """Exactly one running fwd and one be server; returns what it
        had to do ('' when nothing)."""
        done = self.servers.mirror()
        by_role: dict[str, list[dict]] = {"fwd": [], "be": []}
        for s in self.servers.active().values():
            by_role.setdefault(self.servers.role(s) or "?", []).append(s)
        for role, found in by_role.items():
            extra = found[1:] if role in ("fwd", "be") else found
            for s in extra:
                self.servers.delete(s)
                done.append(f"deleted {s['name']}")
        # The class member first: its class group then takes the lowest
        # free way, below the sharing VMs, which must stay next to each
        # other for the PMD COS to cover them in one run.
        for role in ("be", "fwd"):
            if not by_role.get(role):
                s = self.servers.boot(role)
                if s["status"] != "ACTIVE":
                    raise RuntimeError(f"baseline {role} server went to "
                                       f"{s['status']}: {s.get('fault')}")
                self.servers.realize(s)
                done.append(f"booted {s['name']}")
        self.cloud._run_periodics()
        return "; ".join(done)

    def plant_dead_domain(self) -> str:
        """What a domain that died with libvirtd and nova-compute both
        down leaves: its libvirt group and the hook's record."""
        root = self.lab.resctrl_root
        os.mkdir(os.path.join(root, DEAD_GROUP))
        with open(os.path.join(root, "schemata")) as f:
            l3 = [ln for ln in f.read().splitlines()
                  if ln.strip().startswith("L3")]
        with open(os.path.join(root, DEAD_GROUP, "schemata"), "w") as f:
            f.write("\n".join(l3) + "\n")
        uuid = str(uuid_mod.uuid4())
        records_mod.Records(self.servers.state_path).put(records_mod.Record(
            uuid=uuid, name="instance-dead", pid=DEAD_PID, pid_start=1,
            pmd_share=True, rdt_class=None, group=DEAD_GROUP))
        return uuid

    # -- one run -------------------------------------------------------

    def run(self, run: Run) -> dict:
        result = {"fault": run.fault, "point": run.point,
                  "operation": run.operation, "process": run.process,
                  "baseline": "", "observed": "", "recovery": [],
                  "converged": False, "why": "", "leaked_groups": [],
                  "leaked_claims": [], "leaked_records": [],
                  "foreign_touched": [], "pmd_mask_valid": False,
                  "seconds_to_converge": None}
        phases = result["phase_seconds"] = {}
        mark = [time.monotonic()]

        def phase(name):
            now = time.monotonic()
            phases[name] = round(now - mark[0], 2)
            mark[0] = now

        hook_log_at = self._run_log_at = self._hook_log_size()
        try:
            result["baseline"] = self.baseline()
            verdict, _s, why = self.wait_converged(
                self.timing.baseline_timeout)
            if verdict is None or not verdict.converged:
                result["baseline"] += f" (NOT converged before: {why})"
            phase("baseline")
            ctx = self._setup(run)
            phase("setup")
            try:
                result["observed"] = self._fault_and_operation(run, ctx)
            finally:
                phase("fault")
                t0 = time.monotonic()
                result["recovery"] = self._recover(run)
                phase("recovery")
            verdict, seconds, why = self.wait_converged(
                self.timing.converge_timeout, t0)
            phase("converge")
            if run.process == "hook":
                result["observed"] += self._hook_said(
                    f"failpoint {run.point}", hook_log_at)
            elif run.fault in _HOOK_ERRNO:
                result["observed"] += self._hook_said(
                    _HOOK_ERRNO[run.fault], hook_log_at)
        except Exception as e:            # the run failed; the next goes on
            result["why"] = f"{type(e).__name__}: {e}"
            self._undo()
            return result
        if verdict is not None:
            result.update(
                converged=verdict.converged,
                leaked_groups=verdict.leaked_groups,
                leaked_claims=verdict.leaked_claims,
                leaked_records=verdict.leaked_records,
                foreign_touched=verdict.foreign_touched,
                pmd_mask_valid=verdict.pmd_mask_valid)
        result["why"] = why
        result["seconds_to_converge"] = (round(seconds, 2)
                                         if seconds is not None else None)
        return result

    def _hook_logs(self) -> list[str]:
        """The hook's log, and its stderr while a failpoint is armed
        (where ``exit`` says it fired)."""
        return [self.lab.hook_settings().log_file, self.hook.stderr_log]

    def _hook_log_size(self) -> list[int]:
        sizes = []
        for path in self._hook_logs():
            try:
                sizes.append(os.path.getsize(path))
            except OSError:
                sizes.append(0)
        return sizes

    def _hook_failed(self, uuid: str) -> bool:
        """Whether the hook gave up on ``uuid`` since the run began (an
        error naming it, or a failpoint's exit), so that recovery never
        starts before the fault had its effect."""
        for path, at in zip(self._hook_logs(), self._run_log_at):
            try:
                with open(path, errors="replace") as f:
                    f.seek(at)
                    text = f.read()
            except OSError:
                continue
            if any((uuid in ln and " ERROR " in ln) or "fired: exit" in ln
                   for ln in text.splitlines()):
                return True
        return False

    def _hook_said(self, needle: str, since: list[int]) -> str:
        """What the hook said about ``needle`` since the run began."""
        for path, at in zip(self._hook_logs(), since):
            try:
                with open(path, errors="replace") as f:
                    f.seek(at)
                    text = f.read()
            except OSError:
                continue
            hits = [ln for ln in text.splitlines() if needle in ln]
            if hits:
                at = max(0, hits[0].index(needle) - 60)
                return (f"; {os.path.basename(path)}: "
                        f"{hits[0][at:at + 200]}")
        return f"; the hook said nothing of {needle!r}"

    def _setup(self, run: Run) -> dict:
        ctx: dict = {}
        if run.operation == "delete":
            s = self.servers.boot("fwd")
            if s["status"] != "ACTIVE":
                raise RuntimeError(
                    f"set-up: {s['name']} went to {s['status']}: "
                    f"{s.get('fault', {}).get('message', '')}")
            self.servers.realize(s)
            ctx["victim"] = s
        elif run.operation == "class-update":
            for s in self.servers.active().values():
                if self.servers.role(s) == "be":
                    self.servers.delete(s)
            # The release hook prunes the class group in the background.
            time.sleep(1.0)
        elif run.operation == "reconcile" and run.fault in (
                "failpoint-raise", "failpoint-exit", "compute-restart"):
            # Something for each of reconcile's steps to do: a dead
            # domain's leftovers to remove, a living one's group to
            # restore.
            ctx["dead"] = self.plant_dead_domain()
            ctx["lost"] = self.lose_live_group()
        return ctx

    def lose_live_group(self) -> str | None:
        """Remove the PMD-sharing VM's libvirt group (its tasks fall back
        to the root, as the kernel does), as a stray ``rmdir`` would."""
        recs = observe.records(self.servers.state_path)
        running = set(self.lab.libvirt.domains(running_only=True))
        for _uuid, (name, share, group) in sorted(recs.items()):
            if share and group and name in running:
                os.rmdir(os.path.join(self.lab.resctrl_root, group))
                return group
        return None

    # -- arming ----------------------------------------------------------

    def _arm(self, run: Run) -> str | None:
        """Arms a failpoint fault; returns the value for a CLI's env."""
        action = "exit" if run.fault == "failpoint-exit" else "raise"
        if run.process == "compute":
            # nova-compute runs in this process: it "exits" by dying.
            failpoints.arm({run.point: "die" if action == "exit"
                            else "raise"})
            return None
        if run.process == "hook":
            self.hook.arm(f"{run.point}={action}")
            return None
        return f"{run.point}={action}"

    def _disarm(self) -> None:
        failpoints.disarm()
        self.hook.disarm()

    def _fault_and_operation(self, run: Run, ctx: dict) -> str:
        env = None
        if run.fault in ("failpoint-raise", "failpoint-exit",
                         "compute-restart"):
            env = self._arm(run)
        elif run.fault == "enospc":
            self.state_fs.fill()
        elif run.fault == "readonly":
            self.state_fs.readonly(True)
        elif run.fault == "resctrl-lost":
            # Unmounted (fusermount -u), then back, empty.
            hostfaults.restart_emulator(self.lab)
        elif run.fault == "emulator-killed":
            hostfaults.kill_emulator(self.lab)
        elif run.fault == "libvirtd-restart" and run.point == "vms-running":
            self.lab.restart_libvirt()
            return "libvirtd restarted with the VMs running"
        return self._operation(run, ctx, env)

    def _operation(self, run: Run, ctx: dict, env: str | None) -> str:
        op = run.operation
        try:
            if op in ("spawn", "class-update"):
                died = (lambda: failpoints.counts().get(run.point, 0) > 0
                        ) if (run.fault == "failpoint-exit"
                              and run.process == "compute") else None
                s = self.servers.boot("fwd" if op == "spawn" else "be",
                                      until=died)
                if died and died():
                    return (f"nova-compute died at the failpoint; "
                            f"{s['name']} left in {s['status']}/"
                            f"{s.get('OS-EXT-STS:task_state')}")
                if s["status"] != "ACTIVE":
                    return (f"{s['name']} {s['status']}: "
                            f"{s.get('fault', {}).get('message', '')}"[:300])
                if run.fault == "libvirtd-restart":
                    self.servers.realize(s, wait_record=False)
                    self.lab.restart_libvirt()
                    return f"{s['name']} started; libvirtd restarted at once"
                self.servers.realize(s, hook_gave_up=self._hook_failed)
                return f"{s['name']} ACTIVE and started"
            if op == "delete":
                self.servers.delete(ctx["victim"])
                return f"{ctx['victim']['name']} deleted"
            if op == "pmd-update":
                res = self.cli("pmd", "sync", armed=env)
                return _said(res)
            if op == "reconcile":
                res = self.cli("reconcile", armed=env)
                return _said(res)
        except failpoints.FailpointDied:
            return "nova-compute died at the failpoint"
        except Exception as e:
            return f"{op} failed: {type(e).__name__}: {e}"[:300]
        return f"unknown operation {op}"

    # -- recovery --------------------------------------------------------

    def _undo(self) -> None:
        """Every fault off, whatever a failed run left armed."""
        self._disarm()
        self.state_fs.free()
        self.state_fs.readonly(False)
        if not hostfaults.emulator_alive(self.lab):
            hostfaults.restart_emulator(self.lab)
            self.cloud.restart_rdt_compute()
            observe.make_foreign(self.lab.resctrl_root)
            self.foreign_before = observe.foreign_files(self.lab.resctrl_root)

    def _recover(self, run: Run) -> list[str]:
        steps = []
        self._disarm()
        if run.fault == "enospc":
            self.state_fs.free()
            steps.append("state path freed")
        elif run.fault == "readonly":
            self.state_fs.readonly(False)
            steps.append("state path read-write")
        elif run.fault == "emulator-killed":
            hostfaults.restart_emulator(self.lab)
            steps.append("emulator restarted (empty)")
        restart = (run.fault in ("compute-restart", "resctrl-lost",
                                 "emulator-killed")
                   or (run.fault == "failpoint-exit"
                       and run.process == "compute"))
        if restart:
            self.cloud.restart_rdt_compute()
            steps.append("nova-compute restarted")
        if run.fault in ("resctrl-lost", "emulator-killed"):
            # Their owners make the foreign groups again on the new mount.
            observe.make_foreign(self.lab.resctrl_root)
            self.foreign_before = observe.foreign_files(self.lab.resctrl_root)
        steps += self.servers.mirror()
        res = self.cli("reconcile")
        steps.append(f"nova-rdt reconcile: exit {res.returncode}")
        self.cloud._run_periodics()
        return steps


#: What the hook says when the state path refuses its write.
_HOOK_ERRNO = {"enospc": "No space left on device",
               "readonly": "Read-only file system"}


def _said(res: subprocess.CompletedProcess) -> str:
    """The exit status, and the error's one line when it failed."""
    if res.returncode == 0:
        return "exit 0"
    lines = [ln for ln in res.stderr.splitlines()
             if ln.strip() and "eventlet" not in ln.lower()]
    return f"exit {res.returncode}: {lines[-1] if lines else ''}"[:300]
