"""The guest image: where it lives, and how its initramfs is assembled.

tools/build-guest-image.sh fetches and unpacks the Debian packages and
compiles the stressor; :func:`assemble` turns that into ``vmlinuz``,
``initrd.gz`` and ``manifest.json`` in the image directory.  Nothing is
installed on the host: the kernel package is only unpacked.

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

from nova_rdt.lab.guest import cpio
from nova_rdt.lab.guest import kmod

# What the forwarding role needs: the virtio NIC and its transport, the
# kernel bridge, and uio_pci_generic for the later testpmd forwarder.
# Those built into the kernel are skipped (modules.builtin).
MODULES = ("virtio_pci", "virtio_net", "bridge", "uio_pci_generic")
ROLES = ("forward", "noisy", "probe")
# Forwarders the image can run; testpmd-in-guest is a later step.
FORWARDERS = ("kernel",)
ENV_DIR = "NOVA_RDT_GUEST_DIR"
INIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "init.sh")


class ImageError(RuntimeError):
    """The guest image is missing, incomplete or cannot be built."""


@dataclasses.dataclass(frozen=True)
class GuestImage:
    directory: str
    kernel: str
    initrd: str
    kernel_version: str
    modules: tuple[str, ...]
    forwarders: tuple[str, ...]


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
            forwarders=tuple(m["forwarders"]))
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
                      modules: list[tuple[str, bytes]]) -> list[cpio.Entry]:
    """The initramfs tree.  /dev/console must exist before /init runs:
    the kernel opens it as init's stdin/stdout, and without it the
    guest's lines would never reach the serial console."""
    E = cpio.Entry
    entries = [E.directory(d) for d in
               ("bin", "sbin", "dev", "proc", "sys", "tmp", "lib",
                "lib/modules")]
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
    return entries


def _write_atomic(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def assemble(root: str, stressor: str, out: str,
             kernel_package: str = "", init: str = INIT) -> GuestImage:
    """Builds the image in ``out`` from the packages unpacked in
    ``root`` (linux-image-*-cloud-amd64 and busybox-static) and the
    static stressor binary."""
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
    blob = cpio.archive(initramfs_entries(bb, st, init_sh, modules))
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
        "roles": list(ROLES), "forwarders": list(FORWARDERS),
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
          f"{','.join(img.modules)}, forwarders {','.join(img.forwarders)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
