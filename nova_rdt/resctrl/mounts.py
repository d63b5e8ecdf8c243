"""Which mount a directory is, from ``/proc/self/mountinfo`` (proc(5)).

A line reads (proc(5)'s example, numbered)::

    36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=x
    (1)(2)(3)  (4)   (5)   (6)        (7)     (8)(9)  (10)      (11)

mount ID, parent ID, major:minor, root of the mount in its filesystem,
mount point, per-mount options, optional fields ending at ``-``, then
the filesystem type, the source and the superblock options.  Paths and
the source escape space, tab, newline and backslash as ``\\NNN`` octal.
"""

from __future__ import annotations

import dataclasses
import os
import re

MOUNTINFO = "/proc/self/mountinfo"

_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclasses.dataclass(frozen=True)
class MountEntry:
    mount_id: int
    parent_id: int
    device: str                     # "major:minor"
    root: str
    mount_point: str
    options: tuple[str, ...]        # per-mount (rw, nosuid, ...)
    fstype: str
    source: str
    super_options: tuple[str, ...]  # the filesystem's own (cdp, mba_MBps)

    @property
    def all_options(self) -> frozenset[str]:
        return frozenset(self.options) | frozenset(self.super_options)


def unescape(field: str) -> str:
    """A mountinfo field as the path it names (``\\040`` is a space)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def escape(path: str) -> str:
    """The kernel's show_path()/mangle(): the inverse of :func:`unescape`."""
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in path)


def parse_line(line: str) -> MountEntry | None:
    """One mountinfo line; None when it is not one (a truncated read)."""
    left, sep, right = line.rstrip("\n").partition(" - ")
    fields, tail = left.split(" "), right.split(" ")
    if not sep or len(fields) < 6 or len(tail) < 3:
        return None
    try:
        mount_id, parent_id = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    return MountEntry(
        mount_id=mount_id, parent_id=parent_id, device=fields[2],
        root=unescape(fields[3]), mount_point=unescape(fields[4]),
        options=tuple(fields[5].split(",")), fstype=tail[0],
        source=unescape(tail[1]), super_options=tuple(tail[2].split(",")))


def parse(text: str) -> list[MountEntry]:
    return [e for e in map(parse_line, text.splitlines()) if e is not None]


def entry_for(entries: list[MountEntry], mount_point: str
              ) -> MountEntry | None:
    """The mount at ``mount_point`` (a resolved path), or None when it is
    not a mount point.  Of mounts stacked there the last is the one seen:
    it hides the ones below."""
    found = None
    for e in entries:
        if e.mount_point == mount_point:
            found = e
    return found


def entry_at(path: str, mountinfo: str | None = None) -> MountEntry | None:
    """The mount whose mount point ``path`` is, in this process's mount
    namespace; None when it is no mount point or mountinfo is unreadable."""
    try:
        with open(mountinfo or MOUNTINFO) as f:
            text = f.read()
    except OSError:
        return None
    return entry_for(parse(text), os.path.realpath(path))
