"""Which kernel modules an initramfs needs, read from the modules
themselves.

A kernel package as shipped has no ``modules.dep`` (depmod writes it at
install time, which we skip: nothing is installed on the host).  Each
module names its own dependencies in the ``depends=`` string of its
``.modinfo`` ELF section, which is what depmod reads too.  Modules that
``modules.builtin`` lists are in the kernel image and need no loading.
"""

from __future__ import annotations

import lzma
import os
import struct
import subprocess

from nova_rdt import exception

SUFFIXES = (".ko", ".ko.xz", ".ko.zst")


class ModuleError(exception.NovaRdtError, RuntimeError):
    """A wanted module is neither built in nor present in the tree."""


def module_name(path: str) -> str:
    """``.../net/bridge/bridge.ko.xz`` -> ``bridge`` (the kernel treats
    ``-`` and ``_`` alike in names; we use ``_``)."""
    base = os.path.basename(path)
    for suffix in SUFFIXES:
        if base.endswith(suffix):
            base = base[:-len(suffix)]
            break
    return base.replace("-", "_")


def read_module(path: str) -> bytes:
    """A module's ELF bytes, decompressed if it is .ko.xz or .ko.zst."""
    with open(path, "rb") as f:
        blob = f.read()
    if path.endswith(".xz"):
        return lzma.decompress(blob)
    if path.endswith(".zst"):
        # No zstd in the standard library; zstd(1) is on Debian hosts.
        return subprocess.run(["zstd", "-dcq"], input=blob, check=True,
                              capture_output=True).stdout
    return blob


def modinfo(elf: bytes) -> dict[str, str]:
    """The ``key=value`` strings of a module's ``.modinfo`` section (first
    value of each key)."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not a 64-bit ELF object")
    end = "<" if elf[5] == 1 else ">"
    (shoff,) = struct.unpack_from(end + "Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", elf, 0x3A)

    def section(i: int) -> tuple[int, int, int]:
        name, _type, _flags, _addr, off, size = struct.unpack_from(
            end + "IIQQQQ", elf, shoff + i * shentsize)
        return name, off, size

    _, stroff, _ = section(shstrndx)
    for i in range(shnum):
        name, off, size = section(i)
        nend = elf.index(b"\0", stroff + name)
        if elf[stroff + name:nend] == b".modinfo":
            info: dict[str, str] = {}
            for item in elf[off:off + size].split(b"\0"):
                key, sep, value = item.partition(b"=")
                if sep:
                    info.setdefault(key.decode(), value.decode())
            return info
    return {}


def depends(info: dict[str, str]) -> list[str]:
    return [d.replace("-", "_") for d in info.get("depends", "").split(",")
            if d]


def builtin_names(moddir: str) -> set[str]:
    path = os.path.join(moddir, "modules.builtin")
    try:
        with open(path) as f:
            return {module_name(line.strip()) for line in f if line.strip()}
    except FileNotFoundError:
        return set()


def index(moddir: str) -> dict[str, str]:
    """Module name -> path of its file under ``moddir``."""
    found = {}
    for root, _dirs, files in os.walk(moddir):
        for name in files:
            if name.endswith(SUFFIXES):
                found[module_name(name)] = os.path.join(root, name)
    return found


def load_order(wanted: list[str], deps: dict[str, list[str]],
               builtin: set[str]) -> list[str]:
    """The modules to load for ``wanted``, each after its dependencies,
    built-in ones left out.  ``deps`` maps each loadable module to its
    dependencies.  Pure: the tests drive it with made-up graphs."""
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, chain: tuple[str, ...]) -> None:
        name = name.replace("-", "_")
        if name in builtin or state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise ModuleError("module dependency cycle: "
                              + " -> ".join(chain + (name,)))
        if name not in deps:
            user = f" (needed by {chain[-1]})" if chain else ""
            raise ModuleError(f"module {name!r} is neither built in nor in "
                              f"the module tree{user}")
        state[name] = "visiting"
        for dep in deps[name]:
            visit(dep, chain + (name,))
        state[name] = "done"
        order.append(name)

    for name in wanted:
        visit(name, ())
    return order


def resolve(moddir: str, wanted: list[str]) -> list[tuple[str, bytes]]:
    """``(name, uncompressed .ko bytes)`` for each module to insmod, in
    load order, read from the kernel's module tree ``moddir``."""
    builtin = builtin_names(moddir)
    paths = index(moddir)
    deps: dict[str, list[str]] = {}
    blobs: dict[str, bytes] = {}
    todo = [w.replace("-", "_") for w in wanted]
    while todo:
        name = todo.pop()
        if name in deps or name in builtin or name not in paths:
            continue   # load_order reports the missing ones
        blobs[name] = read_module(paths[name])
        deps[name] = depends(modinfo(blobs[name]))
        todo.extend(deps[name])
    return [(n, blobs[n]) for n in load_order(wanted, deps, builtin)]
