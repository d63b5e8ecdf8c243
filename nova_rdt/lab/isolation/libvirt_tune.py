"""The lab stands in for libvirt's resctrl code for TCG domains (I/O).

libvirt refuses ``<cachetune>``/``<memorytune>`` for non-KVM domains
("cachetune is only supported for KVM domains"), and this machine's
guests run under TCG.  So that the rdt-on conditions still run with the
resctrl group a KVM host would have, the lab does what libvirt's
virResctrlAllocCreate and virResctrlAllocAddPID do, through nova-rdt's
resctrl library on the lab's resctrl mount, and undoes it on destroy
(virResctrlAllocRemove).  What to allocate is decided in
:mod:`.libvirt_alloc`; this module only reads the mount, writes it, and
asks QEMU for its vCPU threads.  Production code never uses it.

Order, and why: the domain is started paused; its vCPU threads then
exist (under MTTCG each vCPU has its own) but have not run a guest
instruction.  The lab makes the group and moves the threads in, replays
libvirtd's ``reconnect`` hook (the ``started`` one ran inside ``virsh
start``, before the group existed, so its record has no group and the
PMD COS was derived without the domain's ways) to its end, checks the
hook's record names the group, and only then resumes the vCPUs.  That is the
order libvirt keeps for a KVM domain: group and tasks before the vCPUs
run, the hook's record naming the group.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shlex

from nova_rdt.host import records as records_mod
from nova_rdt.lab.isolation import libvirt_alloc as alloc_mod
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import Group
from nova_rdt.resctrl.groups import Resctrl

#: How long the hook may take (its own limit, hook_timeout, is lower).
HOOK_TIMEOUT = 60.0


class StandInError(RuntimeError):
    """The lab could not apply what libvirt would have; the message
    names the domain and says why."""


@dataclasses.dataclass(frozen=True)
class Applied:
    domain: str
    allocations: tuple[alloc_mod.Allocation, ...]
    #: Groups (control, or "parent/mon_groups/name") made, in order.
    made: tuple[str, ...]

    @property
    def groups(self) -> list[str]:
        return [a.group for a in self.allocations if a.group is not None]

    def message(self) -> str:
        """What the console and ``changes.txt`` say."""
        parts = [f"group {a.group or '(default)'}, {a.describe()}"
                 for a in self.allocations]
        return ("TCG: libvirt takes <cachetune> for KVM domains only; the "
                "lab applied the allocation libvirt would have made ("
                + "; ".join(parts) + ")")


def read_state(fs: Resctrl) -> alloc_mod.FsState:
    """The mount as :func:`.libvirt_alloc.plan` needs it (caller holds
    the lock, so that no other writer moves it underneath)."""
    caps = fs.capabilities()
    cache = {name: alloc_mod.CacheInfo(
        r.cbm_len, r.min_cbm_bits,
        {cid: d.size for cid, d in r.domains.items()})
        for name, r in caps.cache.items()}
    bw = caps.bandwidth.get("MB")
    mb = (alloc_mod.MbInfo(bw.bandwidth_gran, bw.min_bandwidth,
                           bw.domain_ids) if bw is not None else None)
    others = {}
    for g in fs.groups(with_mon=False):
        if g.is_root:
            continue
        try:
            others[g.name] = g.schemata()
        except errors.GroupNotFound:
            continue        # removed while listing: holds nothing
    return alloc_mod.FsState(cache, mb, fs.root_group().schemata(), others)


def vcpu_threads(qmp_reply: str) -> dict[int, int]:
    """QMP ``query-cpus-fast``'s reply -> vCPU index -> host thread id."""
    try:
        doc = json.loads(qmp_reply)
        out = {int(c["cpu-index"]): int(c["thread-id"])
               for c in doc["return"]}
    except (ValueError, KeyError, TypeError) as e:
        raise StandInError(f"query-cpus-fast reply not understood "
                           f"({type(e).__name__}: {e}): "
                           f"{qmp_reply[:200]!r}") from None
    if not out:
        raise StandInError("query-cpus-fast lists no vCPU")
    return out


def query_vcpu_threads(libvirt, domain: str) -> dict[int, int]:
    return vcpu_threads(libvirt.virsh(
        "qemu-monitor-command", domain, '{"execute":"query-cpus-fast"}'))


def _mkdir(fs: Resctrl, g: Group) -> None:
    """mkdir of a libvirt-named group.  The library's create_group makes
    nova-rdt's groups only, by design; here the lab is libvirt."""
    try:
        fs.ops.mkdir(g.path)
    except OSError as e:
        raise errors.ResctrlError(
            f"Cannot create resctrl directory '{g.path}'", errno=e.errno,
            path=g.path, status=fs.last_cmd_status()) from e


def _rmdir(fs: Resctrl, g: Group) -> None:
    try:
        fs.ops.rmdir(g.path)
    except FileNotFoundError:
        pass


def create(fs: Resctrl, domain: str, domain_id: int,
           tunes: list[alloc_mod.Tune],
           tids: dict[int, int]) -> Applied:
    """Make every allocation of ``tunes`` and move each vCPU's thread
    into it, under the resctrl lock; on any failure remove what was made
    and raise :class:`StandInError`."""
    made: list[Group] = []
    try:
        with fs.locked():
            allocs = alloc_mod.plan_all(tunes, read_state(fs), domain_id,
                                        domain)
            for a in allocs:
                missing = sorted(a.vcpus - set(tids))
                if missing:
                    raise alloc_mod.TuneError(
                        f"QEMU reports no thread for vCPU(s) "
                        f"{', '.join(map(str, missing))}")
                if a.group is not None:
                    g = Group(fs, a.group)
                    if os.path.exists(g.path):
                        raise alloc_mod.TuneError(
                            f"Path '{g.path}' for resctrl allocation exists")
                    _mkdir(fs, g)
                    made.append(g)
                    fs.write_schemata(g, a.schemata, allow_libvirt=True)
                    for v in sorted(a.vcpus):
                        fs.write(g.file("tasks"), f"{tids[v]}\n",
                                 what="task")
                for m in a.monitors:
                    if m.name is None:
                        continue    # the allocation's own group
                    mg = Group(fs, m.name, m.parent)
                    _mkdir(fs, mg)
                    made.append(mg)
                    for v in sorted(m.vcpus):
                        fs.write(mg.file("tasks"), f"{tids[v]}\n",
                                 what="task")
    except (alloc_mod.TuneError, errors.ResctrlError) as e:
        undone = _undo(fs, made)
        raise StandInError(
            f"{domain}: the allocation libvirt would have made could not "
            f"be applied: {e}"
            + (f" (removed again: {', '.join(undone)})" if undone else ""))\
            from e
    return Applied(domain, tuple(allocs),
                   tuple(g.display_name for g in made))


def _undo(fs: Resctrl, made: list[Group]) -> list[str]:
    """rmdir newest first; a control group's monitor groups go with it,
    and its tasks back to the default group (the kernel does both)."""
    undone = []
    with fs.locked():
        for g in reversed(made):
            if g.parent and any(p.name == g.parent and p.parent is None
                                for p in made):
                continue
            _rmdir(fs, g)
            undone.append(g.display_name)
    return undone


def remove(fs: Resctrl, applied: Applied) -> list[str]:
    """What libvirt does when the domain stops (virResctrlAllocRemove,
    virResctrlMonitorRemove); returns what was removed."""
    groups = []
    for name in applied.made:
        parent, sep, mon = name.partition("/mon_groups/")
        groups.append(Group(fs, mon, parent) if sep else Group(fs, name))
    try:
        return _undo(fs, groups)
    except OSError as e:
        if e.errno == errno.EBUSY:
            raise StandInError(f"{applied.domain}: resctrl refused to "
                               f"remove its groups: {e}") from e
        raise


def shim_command(shim_text: str, args: list[str]) -> list[str]:
    """The command the installed hook shim runs for ``args``, run in the
    foreground: the shim's own interpreter, settings file and entry point
    (what it execs in strict mode).  Not strict, the shim puts that
    command in the background and returns at once; the lab must know when
    the hook is done (its record, the PMD COS), so it runs it itself."""
    values = {}
    for line in shim_text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("NOVA_RDT_PYTHON", "NOVA_RDT_SETTINGS"):
            try:
                words = shlex.split(value)
            except ValueError:
                words = []
            if len(words) == 1:
                values[key] = words[0]
    missing = {"NOVA_RDT_PYTHON", "NOVA_RDT_SETTINGS"} - set(values)
    if missing:
        raise StandInError(f"the hook shim sets no "
                           f"{', '.join(sorted(missing))}: not nova-rdt's")
    return [values["NOVA_RDT_PYTHON"], "-m", "nova_rdt.hook.main",
            "--settings", values["NOVA_RDT_SETTINGS"], "--", *args]


def replay_reconnect(lab, domain: str, uuid: str, live_xml: str,
                     groups: list[str], timeout: float = HOOK_TIMEOUT
                     ) -> records_mod.Record:
    """Run the installed nova-rdt hook as libvirtd does when it
    reconnects to a running domain (``DOMAIN reconnect begin -``, the
    live XML on stdin), inside the lab's namespace and to its end; then
    its record of ``uuid`` must name the domain's group."""
    shim = os.path.join(lab.libvirt.hooks_dir, "qemu.d", "nova-rdt")
    try:
        with open(shim) as f:
            text = f.read()
    except OSError as e:
        raise StandInError(f"{domain}: no nova-rdt hook installed at "
                           f"{shim}: {e.strerror}") from None
    argv = shim_command(text, [domain, "reconnect", "begin", "-"])
    res = lab.ns.run(argv, input=live_xml, timeout=timeout, check=False)
    if res.returncode != 0:
        raise StandInError(f"{domain}: the nova-rdt hook's reconnect "
                           f"exited {res.returncode}: "
                           f"{(res.stderr or res.stdout).strip()[-300:]}")
    recs, _bad = records_mod.Records(
        lab.hook_settings(host_view=True).state_path).all()
    rec = next((r for r in recs if r.uuid == uuid), None)
    if rec is None or (groups and rec.group not in groups):
        raise StandInError(
            f"{domain}: after the nova-rdt hook's reconnect its record "
            f"names group {rec.group if rec else '(no record)'}, not "
            f"{', '.join(groups)}; see {lab.log_dir}/hook.log")
    return rec
