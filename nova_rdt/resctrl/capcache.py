"""Host RDT capabilities, read once per resctrl mount.

:func:`capabilities.discover` reads every file under ``info/``, the root
group's schemata and each ``cpu*/cache/index*`` of sysfs: dozens of
reads on the emulator, thousands on a two-socket host.  nova-compute
used to do that at every walk of resctrl (8-10 per spawn).  None of it
changes while one resctrl filesystem stays mounted: CDP and mba_MBps are
mount options, the ways and CLOSIDs are the hardware's.  What does
change it is a remount (``-o cdp``) or CPU hotplug (a cache id whose
CPUs all go offline leaves the schemata, and sysfs).

So the capabilities are kept per :class:`MountKey`, which changes when
any of those does.  Stat of the root and ``info`` alone is not enough:

* the kernel frees a resctrl superblock's anonymous device number at
  unmount and the next mount takes it again, and since 6.7 it builds a
  new kernfs root at each mount (``rdtgroup_setup_root`` from
  ``rdt_get_tree``), whose node ids start over: ``info`` has the same
  (st_dev, st_ino) after ``umount; mount -o cdp``;
* mount IDs are reused the same way; on the FUSE emulator the mount ID,
  device, inode numbers and options of a remount with another profile
  are all the same as before.

Hence the key: the mountinfo entry of the root (its options say
``cdp``, ``cdpl2``, ``mba_MBps``); the identity of ``info/`` with its
modification time, which a new mount's inode takes at its creation (the
emulator: at its start); and the online CPUs and sysfs tree, for
hotplug.  Computing it reads mountinfo and stats one directory.

A root that is no mount point (a copied tree, a test's directory) has
no mount to name: it is read at every call, as before.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
import dataclasses
import os
import threading

from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import mounts

# Mounts a process sees in its life: one, or the emulator's successive
# ones in a test run.  Old keys are never asked again, so LRU is enough.
DEFAULT_SIZE = 8


@dataclasses.dataclass(frozen=True)
class MountKey:
    mount: mounts.MountEntry
    info: tuple[int, int, int]        # st_dev, st_ino, st_mtime_ns
    sysfs_cpu: str                    # resolved
    online: str | None                # <sysfs_cpu>/online


def mount_key(root: str, sysfs_cpu: str) -> MountKey | None:
    """What names the capabilities at ``root`` now; None: no mount."""
    entry = mounts.entry_at(root)
    if entry is None:
        return None
    try:
        st = os.stat(os.path.join(entry.mount_point, "info"))
    except OSError:
        return None
    try:
        with open(os.path.join(sysfs_cpu, "online")) as f:
            online: str | None = f.read().strip()
    except OSError:
        online = None
    return MountKey(entry, (st.st_dev, st.st_ino, st.st_mtime_ns),
                    os.path.realpath(sysfs_cpu), online)


Discover = Callable[[str, str], caps_mod.Capabilities]
Identify = Callable[[str, str], MountKey | None]


class CapabilityCache:
    """Bounded, thread-safe memo of :func:`capabilities.discover`.

    One lock covers lookups and discovery, so threads (the exporter's)
    or green threads (nova-compute's) asking for a mount not yet read
    wait for one discovery instead of each making their own.  Discovery
    does plain file reads, which never yield to another green thread.
    """

    def __init__(self, size: int = DEFAULT_SIZE,
                 identify: Identify = mount_key,
                 discover: Discover | None = None):
        if size < 1:
            raise ValueError(f"cache size must be at least 1, not {size}")
        self.size = size
        self._identify = identify
        # None: capabilities.discover as it is at the call (a test may
        # count its calls by replacing it).
        self._discover = discover
        self._entries: collections.OrderedDict[
            MountKey, caps_mod.Capabilities] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.discoveries = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, root: str, sysfs_cpu: str,
            fresh: bool = False) -> caps_mod.Capabilities:
        """The capabilities at ``root``; ``fresh``: read them again (and
        keep what was read)."""
        key = self._identify(root, sysfs_cpu)
        with self._lock:
            if key is not None and not fresh:
                caps = self._entries.get(key)
                if caps is not None:
                    self._entries.move_to_end(key)
                    return caps
            discover = self._discover or caps_mod.discover
            caps = discover(root, sysfs_cpu)
            self.discoveries += 1
            # Kept only if the mount read is still the one named: a
            # remount during discovery would file one mount's
            # capabilities under the other's key.
            if key is not None and self._identify(root, sysfs_cpu) == key:
                self._entries[key] = caps
                self._entries.move_to_end(key)
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
            return caps

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


CACHE = CapabilityCache()


def capabilities(root: str = caps_mod.DEFAULT_ROOT,
                 sysfs_cpu: str = caps_mod.DEFAULT_SYSFS_CPU,
                 fresh: bool = False) -> caps_mod.Capabilities:
    """:func:`capabilities.discover`, once per mount (see the module)."""
    return CACHE.get(root, sysfs_cpu, fresh)
