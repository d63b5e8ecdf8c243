"""The two-compute cloud's shared instances path: a directory served
through FUSE as a cluster filesystem, as NFS or GlusterFS serves it to a
real cloud's computes.

Why not the directory itself: both computes already see it, and Nova
finds it shared (its test file), but libvirt refuses a live migration
whose disks are on a local filesystem ("Migration without shared storage
is unsafe", ``qemuMigrationSrcIsSafe``), and it tells shared from local
by the filesystem's type alone: a FUSE mount counts as shared when its
type is ``fuse.glusterfs`` (``virFileIsSharedFSType``).  So the lab
mounts this pass-through with that subtype, rather than make Nova ask
libvirt for an unsafe migration (it never does) or fall back to block
migration (cold migration would then need SSH between the computes).

Run as ``python -m nova_rdt.lab.sharedfs BACKING MOUNTPOINT``; it serves
in the foreground until unmounted or killed.
"""

from __future__ import annotations

import errno
import os
import sys

#: libvirt's name for a shared FUSE filesystem (``fuse.<subtype>``).
SUBTYPE = "glusterfs"
FSNAME = "nova-rdt-lab-shared"


def _operations():
    import mfusepy

    def mapped(fn):
        """Paths under the backing directory, OSError as its errno."""
        def op(self, path, *args):
            try:
                return fn(self, self._p(path), *args)
            except OSError as e:
                raise mfusepy.FuseOSError(e.errno or errno.EIO) from None
        op.__name__ = fn.__name__
        return op

    class Passthrough(mfusepy.Operations):
        use_ns = True

        def __init__(self, root: str):
            self.root = os.path.realpath(root)

        def _p(self, path: str) -> str:
            full = os.path.normpath(os.path.join(self.root,
                                                 path.lstrip("/")))
            if full != self.root and not full.startswith(self.root + "/"):
                raise mfusepy.FuseOSError(errno.EACCES)
            return full

        @mapped
        def getattr(self, path, fh=None):
            st = os.lstat(path)
            return {k: getattr(st, k) for k in (
                "st_mode", "st_nlink", "st_uid", "st_gid", "st_size",
                "st_blocks")} | {
                "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns,
                "st_ctime": st.st_ctime_ns}

        @mapped
        def access(self, path, amode):
            if not os.access(path, amode):
                raise mfusepy.FuseOSError(errno.EACCES)

        @mapped
        def readdir(self, path, fh):
            return [".", "..", *os.listdir(path)]

        @mapped
        def readlink(self, path):
            return os.readlink(path)

        @mapped
        def statfs(self, path):
            sv = os.statvfs(path)
            return {k: getattr(sv, k) for k in (
                "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

        @mapped
        def chmod(self, path, mode):
            os.chmod(path, mode)

        @mapped
        def chown(self, path, uid, gid):
            os.lchown(path, uid, gid)

        @mapped
        def mkdir(self, path, mode):
            os.mkdir(path, mode)

        @mapped
        def rmdir(self, path):
            os.rmdir(path)

        @mapped
        def unlink(self, path):
            os.unlink(path)

        @mapped
        def utimens(self, path, times=None):
            os.utime(path, ns=times, follow_symlinks=False)

        @mapped
        def symlink(self, target, source):
            # ``source``: the link's text, kept as given.
            os.symlink(source, target)

        @mapped
        def link(self, target, source):
            os.link(self._p(source), target)

        @mapped
        def rename(self, old, new):
            os.rename(old, self._p(new))

        @mapped
        def open(self, path, flags):
            # O_DIRECT is the kernel's side of this mount (FUSE bypasses
            # its page cache); the backing directory may refuse it (tmpfs
            # does), and Nova, whose probe here finds direct I/O, gives
            # disks cache=none, which QEMU then opens with O_DIRECT.
            return os.open(path, flags & ~os.O_DIRECT)

        @mapped
        def create(self, path, mode, fi=None):
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                           mode)

        def read(self, path, size, offset, fh):
            return os.pread(fh, size, offset)

        def write(self, path, data, offset, fh):
            return os.pwrite(fh, data, offset)

        @mapped
        def truncate(self, path, length, fh=None):
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(path, length)

        def flush(self, path, fh):
            return 0

        def release(self, path, fh):
            os.close(fh)

        def fsync(self, path, datasync, fh):
            (os.fdatasync if datasync else os.fsync)(fh)

    return mfusepy, Passthrough


def serve(backing: str, mountpoint: str) -> None:
    mfusepy, passthrough = _operations()
    mfusepy.FUSE(passthrough(backing), mountpoint, foreground=True,
                 nothreads=False, fsname=FSNAME, subtype=SUBTYPE,
                 default_permissions=True, allow_other=True)


def mounted(mountpoint: str) -> bool:
    """True when ``mountpoint`` is this filesystem's mount."""
    target = os.path.realpath(mountpoint)
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if (len(fields) > 2 and fields[1] == target
                    and fields[2] == f"fuse.{SUBTYPE}"):
                return True
    return False


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
