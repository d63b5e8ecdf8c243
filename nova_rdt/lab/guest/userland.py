"""The guest's dynamically linked programs (testpmd, memtester) and the
shared libraries they need, taken from Debian packages unpacked in a
scratch tree, never installed on the host.

``fetch`` completes the tree: it follows the programs' ``DT_NEEDED``
entries (:mod:`elfdeps`) over what is unpacked, and for each soname
not there yet fetches the package that ships it (``apt-get download``,
``dpkg-deb -x``), until nothing is missing.  ``collect`` then reads the
programs and exactly the libraries they reach, for the initramfs.

Only two of DPDK's drivers are packed: the virtio PMD and the ring
mempool.  testpmd is linked to a dozen hardware PMDs (for their private
commands), so those come with it, but EAL's plugin directory is not
packed and /init names the two plugins with ``-d``.

    python -m nova_rdt.lab.guest.userland fetch --root R --debs D
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys

from nova_rdt import exception
from nova_rdt.lab.guest import elfdeps

# (path in the initramfs, path in the unpacked packages)
PROGRAMS = {
    "testpmd": ("bin/dpdk-testpmd", "usr/bin/dpdk-testpmd"),
    "memtester": ("bin/memtester", "usr/sbin/memtester"),
    # stdbuf's preload library: testpmd's stdout is a file in the guest,
    # so fully buffered, and /init waits for its "forwarding started"
    # lines; busybox has no stdbuf, coreutils' library does the job.
    "stdbuf": ("lib/x86_64-linux-gnu/libstdbuf.so",
               "usr/libexec/coreutils/libstdbuf.so"),
}
# The packages the programs are in (dpdk-testpmd is in dpdk-dev in
# Debian 12, not in dpdk).
PACKAGES = ("dpdk-dev", "memtester", "coreutils")
# EAL plugins /init loads with -d, by soname prefix (the ABI version is
# the package's).
PLUGINS = ("librte_net_virtio.so.", "librte_mempool_ring.so.")
LIBDIRS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64",
           "lib", "usr/lib")
# Where libraries and plugins go in the initramfs; /init puts LIBDIR on
# LD_LIBRARY_PATH (there is no ld.so.cache).
LIBDIR = "lib/x86_64-linux-gnu"
PLUGIN_DIR = "lib/dpdk-pmds"
MAX_ROUNDS = 12


class UserlandError(exception.NovaRdtError, RuntimeError):
    """A program or library is missing and cannot be fetched."""


def resolve_in(root: str, path: str, limit: int = 40) -> str:
    """``path`` (relative to ``root``) with its symlinks followed inside
    ``root``: an absolute link target in a package means the target's
    own file, never the host's."""
    parts = [p for p in path.split("/") if p]
    done: list[str] = []
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        if part == ".":
            continue
        here = os.path.join(root, *done, part)
        if os.path.islink(here):
            limit -= 1
            if limit < 0:
                raise UserlandError(f"too many symlinks under {root}: {path}")
            target = os.readlink(here)
            if target.startswith("/"):
                done = []
            parts = [p for p in target.split("/") if p] + parts
            continue
        done.append(part)
    return os.path.join(root, *done)


def index(root: str) -> dict[str, str]:
    """soname -> real file under ``root``, from the library directories
    (the first directory that has a name wins, as for the loader)."""
    found: dict[str, str] = {}
    for d in LIBDIRS:
        top = os.path.join(root, d)
        if not os.path.isdir(top):
            continue
        for base, _dirs, files in os.walk(top):
            for name in files:
                if ".so." not in name or name in found:
                    continue
                rel = os.path.relpath(os.path.join(base, name), root)
                real = resolve_in(root, rel)
                if os.path.isfile(real):
                    found[name] = real
            if d in ("lib", "usr/lib"):
                break  # only their top level; their subdirs are above
    return found


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def dpdk_abi(testpmd: bytes) -> str:
    """DPDK's ABI version (the ``23`` of ``librte_eal.so.23``) as testpmd
    links it: the plugins must be of the same."""
    for name in elfdeps.dynamic(testpmd)["needed"]:
        if name.startswith("librte_eal.so."):
            return name[len("librte_eal.so."):]
    raise UserlandError("dpdk-testpmd does not link librte_eal.so.N")


def plugin_sonames(abi: str) -> list[str]:
    return [prefix + abi for prefix in PLUGINS]


def _needed_map(root: str, libs: dict[str, str],
                roots: dict[str, str]) -> dict[str, list[str]]:
    """DT_NEEDED of each root program and of every library reachable so
    far (read lazily: most of the unpacked tree is never reached)."""
    needed: dict[str, list[str]] = {}
    todo = list(roots.items())
    while todo:
        name, path = todo.pop()
        if name in needed:
            continue
        try:
            needed[name] = elfdeps.dynamic(_read(path))["needed"]
        except elfdeps.ElfError as e:
            raise UserlandError(f"{path}: {e}") from None
        for dep in needed[name]:
            if dep in libs and dep not in needed:
                todo.append((dep, libs[dep]))
    return needed


def program_paths(root: str) -> dict[str, str]:
    out = {}
    for prog, (_dest, src) in PROGRAMS.items():
        path = resolve_in(root, src)
        if not os.path.isfile(path):
            raise UserlandError(f"{src} not under {root} (package "
                                f"{' or '.join(PACKAGES)} not unpacked?)")
        out[prog] = path
    return out


def missing(root: str) -> list[str]:
    """Sonames the programs and plugins reach that ``root`` lacks."""
    libs = index(root)
    roots = program_paths(root)
    plugins = plugin_sonames(dpdk_abi(_read(roots["testpmd"])))
    absent = [s for s in plugins if s not in libs]
    roots.update((s, libs[s]) for s in plugins if s in libs)
    needed = _needed_map(root, libs, roots)
    return absent + elfdeps.closure(list(roots), needed)[1]


def _run(argv: list[str], cwd: str | None = None) -> None:
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise UserlandError(f"{' '.join(argv)} failed: "
                            f"{(r.stderr or r.stdout).strip()[-400:]}")


def fetch(root: str, debs: str, packages: tuple[str, ...] = ()) -> list[str]:
    """Downloads and unpacks ``packages``, then whatever packages the
    sonames they need are in, until the tree is closed.  Returns the
    packages fetched by this call."""
    fetched: list[str] = []
    tried: dict[str, str] = {}

    def get(pkgs: list[str]) -> None:
        pkgs = [p for p in pkgs if p not in fetched]
        if not pkgs:
            return
        _run(["apt-get", "download", "-qq", *pkgs], cwd=debs)
        for p in pkgs:
            hits = [f for f in os.listdir(debs)
                    if f.startswith(p + "_") and f.endswith(".deb")]
            if not hits:
                raise UserlandError(f"apt-get download {p} left no .deb")
            _run(["dpkg-deb", "-x", os.path.join(debs, sorted(hits)[-1]),
                  root])
            fetched.append(p)

    get(list(packages))
    for _ in range(MAX_ROUNDS):
        lacking = missing(root)
        if not lacking:
            return fetched
        wanted = []
        for soname in lacking:
            pkg = elfdeps.debian_package(soname)
            if soname in tried:
                raise UserlandError(
                    f"{soname} is still missing after unpacking package "
                    f"{tried[soname]} (its Debian package is not named "
                    "after it: add it to elfdeps.PACKAGE_EXCEPTIONS)")
            tried[soname] = pkg
            wanted.append(pkg)
        get(sorted(set(wanted)))
    raise UserlandError(f"library closure not complete after {MAX_ROUNDS} "
                        f"rounds: still missing {', '.join(missing(root))}")


@dataclasses.dataclass(frozen=True)
class Userland:
    files: dict[str, bytes]          # initramfs path -> content
    symlinks: dict[str, str]         # initramfs path -> target
    plugins: tuple[str, ...]         # initramfs paths, for -d
    programs: tuple[str, ...]        # PROGRAMS keys packed


def collect(root: str) -> Userland:
    """The programs, their loader, and exactly the libraries they and
    the plugins reach; UserlandError naming what is missing."""
    libs = index(root)
    progs = program_paths(root)
    plugins = plugin_sonames(dpdk_abi(_read(progs["testpmd"])))
    roots = dict(progs)
    for soname in plugins:
        if soname not in libs:
            raise UserlandError(f"DPDK plugin {soname} not under {root} "
                                "(run python -m nova_rdt.lab.guest.userland "
                                "fetch)")
        roots[soname] = libs[soname]
    needed = _needed_map(root, libs, roots)
    reached, lacking = elfdeps.closure(list(roots), needed)
    if lacking:
        raise UserlandError(
            f"libraries missing under {root}: {', '.join(lacking)} (run "
            "python -m nova_rdt.lab.guest.userland fetch)")
    files: dict[str, bytes] = {}
    symlinks: dict[str, str] = {}
    interps = set()
    for prog, (dest, _src) in PROGRAMS.items():
        blob = _read(progs[prog])
        files[dest] = blob
        interp = elfdeps.interpreter(blob)
        if interp:
            interps.add(interp)
    for soname in reached + plugins:
        files[f"{LIBDIR}/{soname}"] = _read(libs[soname])
    for soname in plugins:
        symlinks[f"{PLUGIN_DIR}/{soname}"] = f"../x86_64-linux-gnu/{soname}"
    for interp in interps:
        base = os.path.basename(interp)
        if f"{LIBDIR}/{base}" not in files:
            raise UserlandError(f"the loader {interp} is not among the "
                                "libraries reached (libc6 not unpacked?)")
        dest = interp.lstrip("/")
        if dest != f"{LIBDIR}/{base}":
            depth = dest.count("/")
            symlinks[dest] = "../" * depth + f"{LIBDIR}/{base}"
    return Userland(files, symlinks,
                    tuple(f"/{PLUGIN_DIR}/{s}" for s in plugins),
                    tuple(PROGRAMS))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nova_rdt.lab.guest.userland")
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download and unpack the programs' "
                       "packages and every library package they need")
    f.add_argument("--root", required=True, help="the unpack tree")
    f.add_argument("--debs", required=True, help="the download directory")
    s = sub.add_parser("show", help="list what collect would pack")
    s.add_argument("--root", required=True)
    args = p.parse_args(argv)
    try:
        if args.cmd == "fetch":
            got = fetch(args.root, args.debs, PACKAGES)
            print(" ".join(got))
        else:
            u = collect(args.root)
            for path in sorted(u.files):
                print(f"{len(u.files[path]):>10} {path}")
            for path, target in sorted(u.symlinks.items()):
                print(f"{'->':>10} {path} -> {target}")
    except (UserlandError, elfdeps.ElfError, OSError) as e:
        print(f"nova-rdt guest userland: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
