"""The "newc" cpio format the kernel unpacks as an initramfs.

Written here rather than by cpio(1) so that building the guest image
needs no package beyond those the host set-up installs.  The layout is
the kernel's (Documentation/driver-api/early-userspace/buffer-format.rst):
a 110-byte ASCII header of thirteen 8-digit hex fields, the name with
its NUL, padding to 4 bytes, the data, padding to 4 bytes; the archive
ends with an entry named ``TRAILER!!!``.
"""

from __future__ import annotations

import dataclasses
import stat

MAGIC = b"070701"
TRAILER = "TRAILER!!!"


@dataclasses.dataclass(frozen=True)
class Entry:
    """One archive member.  ``name`` is relative ("bin/busybox")."""

    name: str
    mode: int
    data: bytes = b""

    @classmethod
    def directory(cls, name: str, perm: int = 0o755) -> Entry:
        return cls(name, stat.S_IFDIR | perm)

    @classmethod
    def file(cls, name: str, data: bytes, perm: int = 0o644) -> Entry:
        return cls(name, stat.S_IFREG | perm, data)

    @classmethod
    def symlink(cls, name: str, target: str) -> Entry:
        return cls(name, stat.S_IFLNK | 0o777, target.encode())

    @classmethod
    def chardev(cls, name: str, major: int, minor: int,
                perm: int = 0o600) -> Entry:
        # The device numbers travel in rdevmajor/rdevminor, not the data.
        return cls(name, stat.S_IFCHR | perm, _rdev(major, minor))


def _rdev(major: int, minor: int) -> bytes:
    return b"\0rdev:%d:%d" % (major, minor)


def _pad4(n: int) -> bytes:
    return b"\0" * (-n % 4)


def _header(ino: int, mode: int, nlink: int, size: int, namesize: int,
            rmajor: int = 0, rminor: int = 0) -> bytes:
    fields = (ino, mode, 0, 0, nlink, 0, size, 0, 0, rmajor, rminor,
              namesize, 0)
    for f in fields:
        if not 0 <= f <= 0xFFFFFFFF:
            raise ValueError(f"cpio header field out of range: {f!r}")
    return MAGIC + b"".join(b"%08X" % f for f in fields)


def archive(entries: list[Entry]) -> bytes:
    """The newc archive of ``entries``, in order, with its trailer."""
    out = bytearray()
    seen: set[str] = set()
    for ino, e in enumerate(entries, start=1):
        name = e.name.lstrip("/")
        if not name or name in seen or name == TRAILER:
            raise ValueError(f"bad or duplicate cpio member name: {e.name!r}")
        seen.add(name)
        data, rmaj, rmin = e.data, 0, 0
        if stat.S_ISCHR(e.mode) or stat.S_ISBLK(e.mode):
            _, rmaj, rmin = e.data[1:].decode().split(":")
            data, rmaj, rmin = b"", int(rmaj), int(rmin)
        nlink = 2 if stat.S_ISDIR(e.mode) else 1
        bname = name.encode() + b"\0"
        out += _header(ino, e.mode, nlink, len(data), len(bname), rmaj, rmin)
        out += bname + _pad4(110 + len(bname))
        out += data + _pad4(len(data))
    bname = TRAILER.encode() + b"\0"
    out += _header(0, 0, 1, 0, len(bname))
    out += bname + _pad4(110 + len(bname))
    return bytes(out)


def parse(blob: bytes) -> list[Entry]:
    """Reads back what :func:`archive` writes (for tests and checks)."""
    entries = []
    pos = 0
    while True:
        if blob[pos:pos + 6] != MAGIC:
            raise ValueError(f"not a newc cpio header at offset {pos}")
        f = [int(blob[pos + 6 + 8 * i:pos + 14 + 8 * i], 16)
             for i in range(13)]
        mode, size, rmaj, rmin, namesize = f[1], f[6], f[9], f[10], f[11]
        pos += 110
        name = blob[pos:pos + namesize - 1].decode()
        pos += namesize
        pos += -pos % 4
        data = blob[pos:pos + size]
        pos += size
        pos += -pos % 4
        if name == TRAILER:
            return entries
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            data = _rdev(rmaj, rmin)
        entries.append(Entry(name, mode, data))
