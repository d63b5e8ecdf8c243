"""Which shared libraries a dynamically linked program needs, read from
the ELF files themselves, and which Debian package ships each one.

The guest's userland (testpmd, its PMDs, memtester) comes from Debian
packages that are only unpacked, never installed, so there is no
``ldd`` to ask (it would run the host's loader over foreign files) and
no ``dpkg -S``.  The dynamic section's ``DT_NEEDED`` entries are what
the loader itself follows; :func:`closure` follows them the same way
over a tree of unpacked packages.  Pure: everything here works on bytes
and dictionaries, so the tests drive it without any package.
"""

from __future__ import annotations

import re
import struct

from nova_rdt import exception

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NULL, DT_NEEDED, DT_STRTAB, DT_SONAME = 0, 1, 5, 14

# Sonames whose package the Debian policy name (below) does not give:
# glibc's libraries are all in libc6, zlib is zlib1g, and the rdma-core
# providers (libmlx5, which the mlx5 PMD that testpmd links wants) are
# in ibverbs-providers.
PACKAGE_EXCEPTIONS = {
    "libc.so.6": "libc6", "libm.so.6": "libc6", "libdl.so.2": "libc6",
    "libpthread.so.0": "libc6", "librt.so.1": "libc6",
    "libresolv.so.2": "libc6", "ld-linux-x86-64.so.2": "libc6",
    "libz.so.1": "zlib1g",
    "libgcc_s.so.1": "libgcc-s1",
    "libstdc++.so.6": "libstdc++6",
    "libcrypto.so.3": "libssl3", "libssl.so.3": "libssl3",
    "libmlx4.so.1": "ibverbs-providers", "libmlx5.so.1": "ibverbs-providers",
    "libefa.so.1": "ibverbs-providers",
}


class ElfError(exception.NovaRdtError, ValueError):
    """Not an ELF file this module can read."""


def _header(elf: bytes) -> tuple[str, int, int, int]:
    if elf[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if elf[4] != 2:
        raise ElfError("not a 64-bit ELF file")
    end = "<" if elf[5] == 1 else ">"
    (phoff,) = struct.unpack_from(end + "Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from(end + "HH", elf, 0x36)
    return end, phoff, phentsize, phnum


def _segments(elf: bytes) -> list[tuple[int, int, int, int]]:
    """``(type, offset, vaddr, filesz)`` of each program header."""
    end, phoff, phentsize, phnum = _header(elf)
    out = []
    for i in range(phnum):
        p_type, _flags, off, vaddr, _paddr, filesz = struct.unpack_from(
            end + "IIQQQQ", elf, phoff + i * phentsize)
        out.append((p_type, off, vaddr, filesz))
    return out


def interpreter(elf: bytes) -> str | None:
    """The ``PT_INTERP`` path (the dynamic loader), None if static."""
    for p_type, off, _vaddr, size in _segments(elf):
        if p_type == PT_INTERP:
            return elf[off:off + size].split(b"\0", 1)[0].decode()
    return None


def dynamic(elf: bytes) -> dict[str, list[str]]:
    """``{"needed": [...], "soname": [...]}`` from the dynamic section
    (empty lists for a static executable)."""
    end = _header(elf)[0]
    segs = _segments(elf)
    dyn = [(off, size) for t, off, _v, size in segs if t == PT_DYNAMIC]
    out: dict[str, list[str]] = {"needed": [], "soname": []}
    if not dyn:
        return out
    off, size = dyn[0]
    entries = []
    strtab_vaddr = None
    for pos in range(off, off + size, 16):
        tag, val = struct.unpack_from(end + "qQ", elf, pos)
        if tag == DT_NULL:
            break
        if tag == DT_STRTAB:
            strtab_vaddr = val
        entries.append((tag, val))
    if strtab_vaddr is None:
        raise ElfError("dynamic section without DT_STRTAB")
    # DT_STRTAB is an address: find the file offset through the loadable
    # segment that maps it, as the loader would.
    for t, s_off, s_vaddr, s_size in segs:
        if t == PT_LOAD and s_vaddr <= strtab_vaddr < s_vaddr + s_size:
            strtab = s_off + strtab_vaddr - s_vaddr
            break
    else:
        raise ElfError("DT_STRTAB is outside every PT_LOAD segment")

    def string(index: int) -> str:
        start = strtab + index
        return elf[start:elf.index(b"\0", start)].decode()

    for tag, val in entries:
        if tag == DT_NEEDED:
            out["needed"].append(string(val))
        elif tag == DT_SONAME:
            out["soname"].append(string(val))
    return out


def debian_package(soname: str) -> str:
    """The Debian package that ships ``soname``, by the policy's naming
    of shared library packages (libfoo.so.1 -> libfoo1, libfoo-3.so.200
    -> libfoo-3-200, underscores as hyphens), or the known exceptions.
    The caller checks that the package really holds the file."""
    if soname in PACKAGE_EXCEPTIONS:
        return PACKAGE_EXCEPTIONS[soname]
    m = re.fullmatch(r"(lib[^/]+?)\.so\.([0-9][0-9.]*)", soname)
    if not m:
        raise ElfError(f"{soname!r} is not a versioned shared library name "
                       "(libNAME.so.VERSION)")
    name, version = m.group(1).replace("_", "-").lower(), m.group(2)
    sep = "-" if name[-1].isdigit() else ""
    return f"{name}{sep}{version}"


def closure(roots: list[str], needed: dict[str, list[str]]) \
        -> tuple[list[str], list[str]]:
    """Follows ``needed`` (file -> its DT_NEEDED sonames) from ``roots``.

    Returns ``(found, missing)``: every soname reached that ``needed``
    knows (in first-reached order, roots excluded), and those it does
    not (yet): the caller fetches the packages for those and asks
    again."""
    seen: set[str] = set(roots)
    found: list[str] = []
    missing: list[str] = []
    todo = list(roots)
    while todo:
        name = todo.pop(0)
        for dep in needed.get(name, []):
            if dep in seen:
                continue
            seen.add(dep)
            if dep in needed:
                found.append(dep)
                todo.append(dep)
            else:
                missing.append(dep)
    return found, missing
