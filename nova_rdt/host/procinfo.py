"""Processes identified by pid *and* start time.

A pid alone may have been reused by the time we look again; the start
time (field 22 of ``/proc/<pid>/stat``) tells the same process from a
new one.
"""

from __future__ import annotations


def proc_start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after it.
    return int(stat.rpartition(")")[2].split()[19])


def is_running(pid: int, start_time: int | None) -> bool:
    """True while that very process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    fields = stat.rpartition(")")[2].split()
    if fields[0] == "Z":
        return False
    return start_time is None or int(fields[19]) == start_time
