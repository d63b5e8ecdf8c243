"""FUSE adaptor: serves a :class:`ResctrlKernel` as a real filesystem.

It only maps VFS calls to the model and KernelError to errno.  Files are
served with direct I/O, as kernfs serves them: every open sees the current
state and every write(2) reaches the model as one call, which matters
because the kernel acts on each write separately.  Like kernfs' seq_file,
a file's text is made at the read at offset 0 and later reads of the same
open file continue from that text, so a reader never sees half of two
states.

Names and attributes are cached by the VFS for a second (entry and attr
timeouts): resctrl's tree changes only through mkdir/rmdir/rename on this
mount, which invalidate what they touch, so the cache never serves a stale
group, and each open no longer costs a lookup per path component.

Every request passes the caller's pid (as FUSE reports it, in the server's
PID namespace) to the model, which resolves ``tasks`` pids in the caller's
namespace as the kernel does.
"""

from __future__ import annotations

import errno
import stat
import threading
import time

import mfusepy

from nova_rdt.emulator.kernel import KernelError
from nova_rdt.emulator.kernel import ResctrlKernel


class ResctrlFuse(mfusepy.Operations):
    use_ns = True

    def __init__(self, kernel: ResctrlKernel):
        self.kernel = kernel
        self._lock = threading.Lock()
        self._mounted_ns = int(time.time() * 1e9)
        self._texts: dict[int, bytes] = {}
        self._next_fh = 1

    def _call(self, fn, *args):
        with self._lock:
            try:
                return fn(*args)
            except KernelError as e:
                raise mfusepy.FuseOSError(e.errno) from None

    def getattr(self, path, fh=None):
        kind, mode = self._call(self.kernel.stat, path)
        t = self._mounted_ns
        common = {"st_uid": 0, "st_gid": 0, "st_atime": t, "st_mtime": t,
                  "st_ctime": t}
        if kind == "dir":
            return {"st_mode": stat.S_IFDIR | mode, "st_nlink": 2, **common}
        return {"st_mode": stat.S_IFREG | mode, "st_nlink": 1, "st_size": 0,
                **common}

    def readdir(self, path, fh):
        return [".", ".."] + self._call(self.kernel.listdir, path)

    def open(self, path, flags):
        kind, mode = self._call(self.kernel.stat, path)
        if kind == "dir":
            raise mfusepy.FuseOSError(errno.EISDIR)
        # kernfs_fop_open() with KERNFS_ROOT_EXTRA_OPEN_PERM_CHECK: even
        # root cannot open for writing a file without write bits, or for
        # reading one without read bits.
        acc = flags & 0o3
        if acc in (0o1, 0o2) and not mode & 0o222:
            raise mfusepy.FuseOSError(errno.EACCES)
        if acc in (0o0, 0o2) and not mode & 0o444:
            raise mfusepy.FuseOSError(errno.EACCES)
        with self._lock:
            fh = self._next_fh
            self._next_fh += 1
        return fh

    def read(self, path, size, offset, fh):
        data = self._texts.get(fh) if offset else None
        if data is None:
            caller = mfusepy.fuse_get_context()[2]
            data = self._call(self.kernel.read, path, caller).encode(
                "latin-1")
            self._texts[fh] = data
        return data[offset:offset + size]

    def release(self, path, fh):
        self._texts.pop(fh, None)
        return 0

    def write(self, path, data, offset, fh):
        caller = mfusepy.fuse_get_context()[2]
        return self._call(self.kernel.write, path, bytes(data), caller)

    def truncate(self, path, length, fh=None):
        # open(O_TRUNC) arrives as a truncate; kernfs ignores it, and so do we.
        self._call(self.kernel.stat, path)
        return 0

    def mkdir(self, path, mode):
        self._call(self.kernel.mkdir, path)
        return 0

    def rmdir(self, path):
        self._call(self.kernel.rmdir, path)
        return 0

    def rename(self, old, new):
        self._call(self.kernel.rename, old, new)
        return 0

    def unlink(self, path):
        raise mfusepy.FuseOSError(errno.EPERM)

    def create(self, path, mode, fi=None):
        # kernfs has no creat(); resctrl files exist or do not.
        raise mfusepy.FuseOSError(errno.EACCES)

    def statfs(self, path):
        return {"f_bsize": 4096, "f_frsize": 4096, "f_namemax": 255}


def serve(kernel: ResctrlKernel, mountpoint: str, **options) -> None:
    """Mount and serve until unmounted or signalled (blocks)."""
    mfusepy.FUSE(ResctrlFuse(kernel), mountpoint, foreground=True,
                 nothreads=True, fsname="resctrl", subtype="resctrl",
                 direct_io=True, attr_timeout=1.0, entry_timeout=1.0,
                 negative_timeout=0, default_permissions=True,
                 allow_other=True, **options)
