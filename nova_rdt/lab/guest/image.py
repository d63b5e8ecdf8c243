"""The guest image: where it lives, and how its initramfs is assembled.

tools/build-guest-image.sh fetches and unpacks the Debian packages
(the kernel, busybox-static, and through :mod:`userland` testpmd,
memtester and their libraries) and compiles the stressor;
:func:`assemble` turns that into ``vmlinuz``, ``initrd.gz`` and
``manifest.json`` in the image directory.  Nothing is installed on the
host: the packages are only unpacked.

    python -m nova_rdt.lab.guest.image assemble --root R --stressor S OUT
    python -m nova_rdt.lab.guest.image show [DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import gzip
import json
import os
import sys

from nova_rdt import exception
from nova_rdt.lab.guest import cpio
from nova_rdt.lab.guest import elfdeps
from nova_rdt.lab.guest import kmod
from nova_rdt.lab.guest import userland

# What the forwarding role needs: the virtio NIC and its transport, the
# kernel bridge, and uio_pci_generic, which hands the NICs to testpmd.
# Those built into the kernel are skipped (modules.builtin).
MODULES = ("virtio_pci", "virtio_net", "bridge", "uio_pci_generic")
ROLES = ("forward", "noisy", "probe")
# The forwarders and noise makers the image can run, preferred first
# (nova_rdt.forwarder= and nova_rdt.noisy= on the kernel command line).
FORWARDERS = ("testpmd", "kernel")
NOISY = ("memtester", "stressor")
ENV_DIR = "NOVA_RDT_GUEST_DIR"
INIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "init.sh")


class ImageError(exception.NovaRdtError, RuntimeError):
    """The guest image is missing, incomplete or cannot be built."""


@dataclasses.dataclass(frozen=True)
class GuestImage:
    directory: str
    kernel: str
    initrd: str
    kernel_version: str
    modules: tuple[str, ...]
    forwarders: tuple[str, ...]
    noisy: tuple[str, ...] = ("stressor",)


def default_dir() -> str:
    """``$NOVA_RDT_GUEST_DIR``, else ``<venv>/share/nova-rdt/guest``,
    where tools/build-guest-image.sh puts it by default."""
    return os.environ.get(ENV_DIR) or os.path.join(
        sys.prefix, "share", "nova-rdt", "guest")


def load(directory: str | None = None) -> GuestImage:
    directory = directory or default_dir()
    manifest = os.path.join(directory, "manifest.json")
    try:
        with open(manifest) as f:
            m = json.load(f)
    except FileNotFoundError:
        raise ImageError(
            f"no guest image in {directory} (manifest.json missing): run "
            f"tools/build-guest-image.sh {directory}") from None
    except ValueError as e:
        raise ImageError(
            f"guest image manifest {manifest} is not JSON: {e}") from None
    try:
        img = GuestImage(
            directory=directory,
            kernel=os.path.join(directory, m["kernel"]),
            initrd=os.path.join(directory, m["initrd"]),
            kernel_version=m["kernel_version"],
            modules=tuple(m["modules"]),
            forwarders=tuple(m["forwarders"]),
            noisy=tuple(m.get("noisy", ["stressor"])))
    except (KeyError, TypeError) as e:
        raise ImageError(f"guest image manifest {manifest} lacks key {e}: "
                         "rebuild it with tools/build-guest-image.sh") \
            from None
    for path in (img.kernel, img.initrd):
        if not os.path.isfile(path):
            raise ImageError(f"guest image file {path} is missing: rebuild it "
                             "with tools/build-guest-image.sh")
    return img


def kernel_tree(root: str) -> tuple[str, str, str]:
    """``(version, vmlinuz, module dir)`` of the one kernel unpacked
    under ``root``."""
    kernels = sorted(glob.glob(os.path.join(root, "boot", "vmlinuz-*")))
    if len(kernels) != 1:
        raise ImageError(f"expected one boot/vmlinuz-* under {root}, "
                         f"found {len(kernels)}")
    version = os.path.basename(kernels[0])[len("vmlinuz-"):]
    for base in ("lib", "usr/lib"):
        moddir = os.path.join(root, base, "modules", version)
        if os.path.isdir(moddir):
            return version, kernels[0], moddir
    raise ImageError(f"no lib/modules/{version} under {root}")


def initramfs_entries(busybox: bytes, stressor: bytes, init: bytes,
                      modules: list[tuple[str, bytes]],
                      user: userland.Userland | None = None) \
        -> list[cpio.Entry]:
    """The initramfs tree.  /dev/console must exist before /init runs:
    the kernel opens it as init's stdin/stdout, and without it the
    guest's lines would never reach the serial console.  Directories
    come before what they hold: the kernel does not create parents."""
    E = cpio.Entry
    dirs = ["bin", "sbin", "dev", "proc", "sys", "tmp", "lib",
            "lib/modules", "etc", "var", "var/run", "mnt", "mnt/huge"]
    extra: list[cpio.Entry] = []
    if user is not None:
        for path in sorted(user.files) + sorted(user.symlinks):
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.append(d)
        extra += [E.file(p, user.files[p], 0o755) for p in sorted(user.files)]
        extra += [E.symlink(p, t) for p, t in sorted(user.symlinks.items())]
        # /init passes these to testpmd as -d (EAL's own plugin
        # directory is not packed).
        extra.append(E.file("etc/dpdk-plugins", "".join(
            p + "\n" for p in user.plugins).encode()))
    entries = [E.directory(d) for d in dirs]
    entries += [
        E.chardev("dev/console", 5, 1),
        E.chardev("dev/null", 1, 3, 0o666),
        E.file("bin/busybox", busybox, 0o755),
        E.symlink("bin/sh", "busybox"),
        E.file("bin/nova-rdt-stress", stressor, 0o755),
        E.file("init", init, 0o755),
        E.file("lib/modules/load-order",
               "".join(n + "\n" for n, _ in modules).encode()),
    ]
    entries += [E.file(f"lib/modules/{n}.ko", blob) for n, blob in modules]
    return entries + extra


def _write_atomic(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def assemble(root: str, stressor: str, out: str,
             kernel_package: str = "", init: str = INIT) -> GuestImage:
    """Builds the image in ``out`` from the packages unpacked in
    ``root`` (linux-image-*-cloud-amd64 and busybox-static) and the
    static stressor binary, and, when ``root`` holds dpdk-dev and
    memtester (tools/build-guest-image.sh unpacks them), testpmd and
    memtester with their libraries.  Without them the image has only
    the kernel forwarder and the stressor."""
    version, vmlinuz, moddir = kernel_tree(root)
    busybox = os.path.join(root, "bin", "busybox")
    if not os.path.isfile(busybox):
        raise ImageError(f"no bin/busybox under {root} (busybox-static not "
                         "unpacked?)")
    try:
        modules = kmod.resolve(moddir, list(MODULES))
    except kmod.ModuleError as e:
        raise ImageError(f"kernel {version}: {e}") from None
    with open(busybox, "rb") as f:
        bb = f.read()
    with open(stressor, "rb") as f:
        st = f.read()
    with open(init, "rb") as f:
        init_sh = f.read()
    user = None
    if os.path.exists(os.path.join(root, userland.PROGRAMS["testpmd"][1])):
        try:
            user = userland.collect(root)
        except (userland.UserlandError, elfdeps.ElfError) as e:
            raise ImageError(str(e)) from None
    forwarders = FORWARDERS if user else ("kernel",)
    noisy = NOISY if user else ("stressor",)
    blob = cpio.archive(initramfs_entries(bb, st, init_sh, modules, user))
    os.makedirs(out, exist_ok=True)
    # mtime=0: the same inputs give the same bytes.
    _write_atomic(os.path.join(out, "initrd.gz"),
                  gzip.compress(blob, compresslevel=6, mtime=0))
    with open(vmlinuz, "rb") as f:
        _write_atomic(os.path.join(out, "vmlinuz"), f.read())
    manifest = {
        "kernel": "vmlinuz", "initrd": "initrd.gz",
        "kernel_version": version, "kernel_package": kernel_package,
        "modules": [n for n, _ in modules],
        "roles": list(ROLES), "forwarders": list(forwarders),
        "noisy": list(noisy),
        "dpdk_plugins": list(user.plugins) if user else [],
    }
    # The manifest goes last: its presence means the image is complete.
    _write_atomic(os.path.join(out, "manifest.json"),
                  json.dumps(manifest, indent=1).encode() + b"\n")
    return load(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nova_rdt.lab.guest.image")
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("assemble", help="build the image from unpacked "
                       "packages (tools/build-guest-image.sh runs this)")
    a.add_argument("--root", required=True)
    a.add_argument("--stressor", required=True)
    a.add_argument("--kernel-package", default="")
    a.add_argument("--init", default=INIT,
                   help="the /init script (default: the package's init.sh)")
    a.add_argument("out")
    s = sub.add_parser("show", help="print the image's manifest")
    s.add_argument("dir", nargs="?")
    args = p.parse_args(argv)
    try:
        if args.cmd == "assemble":
            img = assemble(args.root, args.stressor, args.out,
                           args.kernel_package, args.init)
        else:
            img = load(args.dir)
    except (ImageError, OSError) as e:
        print(f"nova-rdt guest image: {e}", file=sys.stderr)
        return 1
    print(f"{img.directory}: kernel {img.kernel_version}, modules "
          f"{','.join(img.modules)}, forwarders {','.join(img.forwarders)}, "
          f"noisy {','.join(img.noisy)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
