"""Who is in a group: ``tasks``, ``cpus`` and ``cpus_list``.

Mirrors rdtgroup_tasks_write()/rdtgroup_move_task()/show_rdt_tasks() and
rdtgroup_cpus_write()/cpus_ctrl_write()/cpus_mon_write()/
rdtgroup_cpus_show() in rdtgroup.c.  PIDs are read and written in the
caller's PID namespace (find_task_by_vpid(), task_pid_vnr()).
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from nova_rdt.emulator import kparse
from nova_rdt.emulator.state import LOCKED
from nova_rdt.emulator.state import LOCKSETUP
from nova_rdt.emulator.state import Group
from nova_rdt.emulator.state import KernelError

if TYPE_CHECKING:
    from nova_rdt.emulator.kernel import ResctrlKernel


# -- tasks -----------------------------------------------------------------

def show_tasks(k: ResctrlKernel, g: Group, caller: int) -> str:
    """show_rdt_tasks(): is_closid_match() for a control group (so its
    monitor groups' tasks, and for the root every task with CLOSID 0),
    is_rmid_match() for a monitor group; numbered in the reader's PID
    namespace, tasks it cannot see left out."""
    members = k.members()
    out = []
    for tid in k.task_order():
        tg = members.get(tid, k.root)
        if (tg is g) if g.is_mon else (tg.ctrl is g):
            vpid = k.tasks.vnr(caller, tid)
            if vpid:
                out.append(f"{vpid}\n")
    return "".join(out)


def write_tasks(k: ResctrlKernel, g: Group, text: str, caller: int) -> None:
    text = text.split("\0", 1)[0]
    if not k.version.task_lists:
        return _write_one_task(k, g, text, caller)
    # rdtgroup_tasks_write(), v6.7 on: a comma list, earlier ids moved.
    k.status.clear()
    _refuse_while_locking(k, g)
    buf: str | None = text
    while buf and buf[0] != "\n":
        tok, sep, rest = buf.partition(",")
        buf = rest if sep else None
        pid_str = kparse.strim(tok)
        pid = kparse.kstrtoint(pid_str, 0)
        if pid is None:
            k.fail(errno.EINVAL, f"Task list parsing error pid {pid_str}\n")
        if pid < 0:
            k.fail(errno.EINVAL, f"Invalid pid {pid}\n")
        try:
            _move_task(k, pid, g, caller)
        except KernelError:
            k.status.puts(f"Error while processing task {pid}\n")
            raise


def _write_one_task(k: ResctrlKernel, g: Group, text: str,
                    caller: int) -> None:
    """rdtgroup_tasks_write() before v6.7: one pid, parsed before the
    status is cleared."""
    pid = kparse.kstrtoint(kparse.strim(text), 0)
    if pid is None or pid < 0:
        raise KernelError(errno.EINVAL)
    k.status.clear()
    _refuse_while_locking(k, g)
    _move_task(k, pid, g, caller)


def _refuse_while_locking(k: ResctrlKernel, g: Group) -> None:
    if g.mode in (LOCKSETUP, LOCKED):
        k.fail(errno.EINVAL, "Pseudo-locking in progress\n")


def _move_task(k: ResctrlKernel, pid: int, g: Group, caller: int) -> None:
    """rdtgroup_move_task() and __rdtgroup_move_task().  Writers are
    taken to be root, so rdtgroup_task_write_permission() passes."""
    if pid:
        tid = k.tasks.resolve(caller, pid)
        if tid is None:
            k.fail(errno.ESRCH, f"No task {pid}\n")
    else:
        tid = caller                            # current
        if tid <= 0:
            k.fail(errno.ESRCH, f"No task {pid}\n")
    current = k.members().get(tid, k.root)
    if current is g:
        return
    if g.is_mon and current.ctrl is not g.parent:
        k.fail(errno.EINVAL, "Can't move task to different control group\n")
    k.assign(tid, g)


# -- cpus ------------------------------------------------------------------

def show_cpus(k: ResctrlKernel, g: Group, caller: int) -> str:
    return kparse.format_cpumask(_shown_cpus(k, g), k.nr_cpu_ids) + "\n"


def show_cpus_list(k: ResctrlKernel, g: Group, caller: int) -> str:
    return kparse.format_cpulist(_shown_cpus(k, g)) + "\n"


def _shown_cpus(k: ResctrlKernel, g: Group) -> set[int]:
    """A pseudo-locked group shows its cache domain's CPUs."""
    if g.mode == LOCKED:
        return set(k.cpus_of(k.schema(g.plr.schema), g.plr.domain))
    return g.cpus


def write_cpus(k: ResctrlKernel, g: Group, text: str, caller: int) -> None:
    _write(k, g, kparse.parse_cpumask(text, k.nr_cpu_ids))


def write_cpus_list(k: ResctrlKernel, g: Group, text: str,
                    caller: int) -> None:
    _write(k, g, kparse.parse_cpulist(text, k.nr_cpu_ids))


def _write(k: ResctrlKernel, g: Group, parsed) -> None:
    """rdtgroup_cpus_write()."""
    if k.version.clears_status_on_cpus_and_mkdir:
        k.status.clear()
    _refuse_while_locking(k, g)
    if isinstance(parsed, int):
        k.fail(parsed, "Bad CPU list/mask\n")
    new = parsed
    if new - k.cpus_online:
        k.fail(errno.EINVAL, "Can only assign online CPUs\n")
    if g.is_mon:
        _cpus_mon_write(k, g, new)
    else:
        _cpus_ctrl_write(k, g, new)


def _cpus_mon_write(k: ResctrlKernel, g: Group, new: set[int]) -> None:
    prgrp = g.parent
    if new - prgrp.cpus:
        k.fail(errno.EINVAL,
               "Can only add CPUs to mongroup that belong to parent\n")
    added = new - g.cpus
    for sib in prgrp.mon.values():
        if sib is not g:
            sib.cpus -= added
    g.cpus = set(new)


def _cpus_ctrl_write(k: ResctrlKernel, g: Group, new: set[int]) -> None:
    dropped = g.cpus - new
    if dropped:
        if g is k.root:
            k.fail(errno.EINVAL, "Can't drop CPUs from default group\n")
        k.root.cpus |= dropped
    added = new - g.cpus
    if added:
        for other in [k.root] + list(k.groups.values()):
            if other is not g and other.cpus & added:
                other.cpus -= added
                for m in other.mon.values():
                    m.cpus &= other.cpus
    g.cpus = set(new)
    for m in g.mon.values():
        m.cpus = set()
