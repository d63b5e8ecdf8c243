"""QEMU for kvm-typed domains on a host whose KVM cannot boot Linux.

This machine kind's ``/dev/kvm`` is a PVM flavour: SeaBIOS and real-mode
code run under it, but a stock kernel hangs once it leaves real mode.
TCG boots that kernel, yet libvirt refuses ``<cachetune>`` and
``<memorytune>`` for any domain whose type is not ``kvm``
(``qemuValidateDomainDef``).  libvirt never checks which accelerator the
QEMU it starts really uses, so a kvm-typed domain whose QEMU turns
``-accel kvm`` into TCG keeps every part of libvirt's resctrl path
(allocate, make the group, move the vCPU threads, remove the group) and
boots Linux.  Nova's XML goes to libvirt unchanged: the lab puts a
wrapper named ``qemu-system-x86_64`` first on its own libvirtd's
``PATH`` (:meth:`nova_rdt.lab.libvirtd.Libvirt.use_tcg_for_kvm`), so it
is the default emulator of libvirt's capabilities, and the wrapper
execs the real binary where it is installed (QEMU finds its modules and
firmware relative to its own path).

Only a guest's command line is changed (it carries ``-name``); libvirt's
capability probe (``-machine none,accel=kvm:tcg``, no ``-name``) goes
through as it is, so libvirt still sees KVM and offers kvm domains.
What changes, and why:

* ``-accel kvm`` (or ``accel=kvm`` in ``-machine``) -> ``-accel
  tcg,thread=multi``: one host thread per vCPU, as under KVM, so the
  vCPU thread ids libvirt puts in the group's ``tasks`` are the threads
  that run the guest.
* no ``-cpu``, or QEMU's default ``qemu64`` (Nova gave no model) ->
  ``-cpu max``: testpmd's DPDK build needs SSE4.2, which qemu64 lacks.
  ``host`` (host-passthrough, which TCG refuses) -> ``max`` too.  A
  named model Nova chose is kept.
* ``kvm-pit`` globals are dropped: TCG's PIT is the ``isa-pit`` device.
* ``vectors=0`` on virtio-net devices whose backend is vhost-user:
  QEMU 7.2's TCG segfaults in ``vhost_net_start`` with MSI-X on
  (``msix_set_vector_notifiers``).

Each change is written to stderr first, which libvirt keeps in the
domain's ``/var/log/libvirt/qemu/<name>.log``.

Standard library only: the wrapper runs this file with ``python -I``
for every QEMU that libvirtd starts.
"""

from __future__ import annotations

import json
import os
import shlex
import sys

#: What the guest's command line says TCG should be.
TCG_ACCEL = "tcg,thread=multi"
#: QEMU's default x86 model (what libvirt runs with no ``<cpu>``), and
#: the host's own, which only KVM can give.
DEFAULT_MODELS = ("qemu64", "host")
TCG_CPU = "max"
LOG_PREFIX = "nova-rdt lab QEMU (TCG under a kvm domain):"
#: The options whose value :func:`rewrite` reads.
_WITH_VALUE = frozenset({"-accel", "-machine", "-cpu", "-global",
                         "-device", "-netdev"})


def is_guest(argv: list[str]) -> bool:
    """A guest's command line, not a capability probe."""
    return "-name" in argv[1:]


def _split_opts(value: str) -> list[str]:
    return value.split(",") if value else []


def _vhostuser_netdevs(args: list[str]) -> set[str]:
    ids = set()
    for i, arg in enumerate(args[:-1]):
        if arg != "-netdev":
            continue
        value = args[i + 1]
        if value.startswith("{"):
            try:
                doc = json.loads(value)
            except ValueError:
                continue
            if doc.get("type") == "vhost-user" and "id" in doc:
                ids.add(str(doc["id"]))
        else:
            opts = _split_opts(value)
            if opts and opts[0] in ("vhost-user", "type=vhost-user"):
                for o in opts[1:]:
                    if o.startswith("id="):
                        ids.add(o[3:])
    return ids


def _no_msix(value: str, vhost: set[str]) -> str | None:
    """The ``-device`` value with ``vectors=0`` when it is a virtio-net
    on a vhost-user netdev, else None."""
    if value.startswith("{"):
        try:
            doc = json.loads(value)
        except ValueError:
            return None
        if (str(doc.get("driver", "")).startswith("virtio-net")
                and doc.get("netdev") in vhost and doc.get("vectors") != 0):
            doc["vectors"] = 0
            return json.dumps(doc, separators=(",", ":"))
        return None
    opts = _split_opts(value)
    if not opts or not opts[0].startswith("virtio-net"):
        return None
    netdev = next((o[7:] for o in opts if o.startswith("netdev=")), None)
    if netdev not in vhost or "vectors=0" in opts:
        return None
    return ",".join([o for o in opts if not o.startswith("vectors=")]
                    + ["vectors=0"])


def rewrite(argv: list[str]) -> tuple[list[str], list[str]]:
    """``(argv for TCG, what changed)``; a probe's argv comes back as it
    is, with no changes."""
    if not is_guest(argv):
        return list(argv), []
    args = list(argv[1:])
    out: list[str] = []
    changes: list[str] = []
    vhost = _vhostuser_netdevs(args)
    has_accel = has_cpu = False
    i = 0
    while i < len(args):
        arg = args[i]
        # Only the options below are read with their value; everything
        # else is copied a word at a time, so that flags with no value
        # (-S, -no-hpet, ...) never shift what is taken for a value.
        if arg == "-enable-kvm":
            changes.append("-enable-kvm -> -accel " + TCG_ACCEL)
            i += 1
            continue
        if arg not in _WITH_VALUE or i + 1 >= len(args):
            out.append(arg)
            i += 1
            continue
        value = args[i + 1]
        i += 2
        if arg == "-accel":
            if not has_accel:
                # The first names the accelerator; TCG it is.
                if value != TCG_ACCEL:
                    changes.append(f"-accel {value} -> -accel {TCG_ACCEL}")
                out += ["-accel", TCG_ACCEL]
                has_accel = True
            else:
                changes.append(f"-accel {value} dropped (one accelerator)")
            continue
        elif arg == "-machine":
            # Any accelerator named here goes: the one -accel below says
            # TCG (QEMU refuses both forms at once).
            value, dropped = _machine_without_accel(value)
            if dropped:
                changes.append(f"-machine {dropped} -> -accel {TCG_ACCEL}")
        elif arg == "-cpu":
            has_cpu = True
            model = _split_opts(value)[0] if value else ""
            if model in DEFAULT_MODELS:
                changes.append(f"-cpu {value} -> -cpu {TCG_CPU}")
                value = TCG_CPU
        elif arg == "-global" and value.startswith("kvm-pit."):
            changes.append(f"-global {value} dropped (no kvm-pit under "
                           f"TCG)")
            continue
        elif arg == "-device":
            fixed = _no_msix(value, vhost)
            if fixed is not None:
                changes.append(f"vectors=0 on a vhost-user virtio-net "
                               f"({value[:60]})")
                value = fixed
        out += [arg, value]
    if not has_cpu:
        changes.append(f"no -cpu -> -cpu {TCG_CPU}")
        out += ["-cpu", TCG_CPU]
    if not has_accel:
        # QEMU's own default is TCG when nothing names an accelerator;
        # named here so that the log says what ran.
        out += ["-accel", TCG_ACCEL]
    return [argv[0], *out], changes


def _machine_without_accel(value: str) -> tuple[str, str]:
    """``-machine``'s value without an ``accel`` property, and what was
    taken out ("" if nothing)."""
    if value.startswith("{"):
        try:
            doc = json.loads(value)
        except ValueError:
            return value, ""
        if "accel" not in doc:
            return value, ""
        dropped = f"accel={doc.pop('accel')}"
        return json.dumps(doc, separators=(",", ":")), dropped
    opts = _split_opts(value)
    kept = [o for o in opts if not o.startswith("accel=")]
    dropped = ",".join(o for o in opts if o.startswith("accel="))
    return ",".join(kept), dropped


def wrapper_script(python: str, real_qemu: str) -> str:
    """The executable the lab binds over ``qemu-system-x86_64``."""
    here = os.path.abspath(__file__)
    words = " ".join(shlex.quote(w) for w in (python, "-I", here, real_qemu))
    return ("#!/bin/sh\n"
            "# nova-rdt lab: kvm domains run TCG here; see "
            "nova_rdt/lab/tcg_qemu.py.\n"
            f"exec {words} \"$@\"\n")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: tcg_qemu.py REAL_QEMU [QEMU ARGS...]\n")
        return 2
    real = argv[1]
    args, changes = rewrite([real, *argv[2:]])
    for change in changes:
        sys.stderr.write(f"{LOG_PREFIX} {change}\n")
    sys.stderr.flush()
    os.execv(real, args)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
