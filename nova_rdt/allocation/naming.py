"""Every name rule nova-rdt relies on, in one place.

Names are how nova-rdt, libvirt and the operator's own tools share one
resctrl mount, and how the driver's domain XML reaches the hook.  A rule
that lived in two modules could drift, and a drift here means touching a
group that is not ours.  This module is a leaf: it imports nothing of
nova-rdt, so any layer (the resctrl library included) may use it.
"""

from __future__ import annotations

import re

# Groups nova-rdt creates are named <prefix><what>; the prefix is
# ``[rdt] group_prefix``.
DEFAULT_PREFIX = "nova-rdt-"
PMD_SUFFIX = "pmd"
CLASS_INFIX = "class-"

# A name that is safe as one path component and as a shell word: a
# conservative subset of what kernfs accepts, so a name taken from hostile
# input can never be a path.  \Z, not $, so that a trailing newline fails.
GROUP_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}\Z")

# rdt:class values and [rdt] classes names.
CLASS_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}\Z")

# libvirt's virResctrlAllocDeterminePath: "qemu-<domid>-<name>-vcpus_<list>",
# where <name> is the domain name cut to 20 characters.
LIBVIRT_GROUP_PREFIX_RE = re.compile(r"qemu-\d+-")
LIBVIRT_GROUP_RE = re.compile(r"qemu-\d+-(?P<name>.+?)-vcpus_")
LIBVIRT_SHORT_NAME_MAX = 20

# The driver's <metadata> element, read back by the hook.
METADATA_NS = "http://openstack.org/xmlns/libvirt/nova-rdt/1.0"
METADATA_PREFIX = "nova-rdt"


def pmd_group(prefix: str) -> str:
    return prefix + PMD_SUFFIX


def class_group(prefix: str, class_name: str) -> str:
    return f"{prefix}{CLASS_INFIX}{class_name}"


def class_of_group(prefix: str, group_name: str) -> str | None:
    """The class a nova-rdt class group is for, or None."""
    infix = prefix + CLASS_INFIX
    if group_name.startswith(infix):
        return group_name[len(infix):] or None
    return None


def is_libvirt_group(name: str) -> bool:
    return LIBVIRT_GROUP_PREFIX_RE.match(name) is not None


def libvirt_short_name(group_name: str) -> str | None:
    """The (cut) domain name in a libvirt group's name, or None."""
    m = LIBVIRT_GROUP_RE.match(group_name)
    return m.group("name") if m else None


def libvirt_short(domain_name: str) -> str:
    """A domain name as libvirt cuts it into its group names."""
    return domain_name[:LIBVIRT_SHORT_NAME_MAX]


def is_safe_group_name(name: str) -> bool:
    return isinstance(name, str) and GROUP_NAME_RE.match(name) is not None


# Names in a resctrl directory that are not groups (the kernel's own).
NOT_GROUPS = frozenset({"info", "mon_groups", "mon_data"})

# Names other owners' groups start with that no prefix may capture:
# libvirt's allocations (qemu-<id>-...), its monitor groups (vcpus_<list>)
# and the kernel's directories.
_CAPTURED = (re.compile(r"(q(e(m(u(-([0-9]+(-.*)?)?)?)?)?)?)\Z", re.S),
             re.compile(r"(v(c(p(u(s(_.*)?)?)?)?)?)\Z", re.S))
MAX_PREFIX = 64


def check_prefix(prefix: str) -> str:
    """``prefix`` if it can be ``[rdt] group_prefix``, else ValueError.

    A prefix is how nova-rdt tells its groups from everyone else's, so
    one that a libvirt group's name could start with (``q``, ``qemu-``,
    ``qemu-1-``...) would hand libvirt's groups to nova-rdt.
    """
    if not isinstance(prefix, str) or not 1 <= len(prefix) <= MAX_PREFIX \
            or not is_safe_group_name(prefix):
        raise ValueError(
            f"{prefix!r} is not a group prefix: use 1-{MAX_PREFIX} of "
            f"letters, digits and '_.:-', starting with a letter or digit")
    if prefix in NOT_GROUPS:
        raise ValueError(f"{prefix!r} is a resctrl directory, not a group "
                         f"prefix; use a prefix such as {DEFAULT_PREFIX!r}")
    if any(r.match(prefix) for r in _CAPTURED):
        raise ValueError(
            f"{prefix!r} would claim libvirt's groups (qemu-<id>-<name>-"
            f"vcpus_<list>, vcpus_<list>) as nova-rdt's; use a prefix such "
            f"as {DEFAULT_PREFIX!r}")
    return prefix


# libvirt domain names become path components (the hook's pid files,
# log lines): bounded, printable, one component.
MAX_DOMAIN_NAME = 200


def check_domain_name(name: str) -> str:
    """``name`` if it can be used as one path component, else ValueError."""
    if not isinstance(name, str) or not name \
            or len(name) > MAX_DOMAIN_NAME:
        length = len(name) if isinstance(name, str) else "?"
        raise ValueError(f"domain name of length {length} refused")
    if name in (".", "..") or any(c in name for c in "/\0") \
            or not name.isprintable():
        raise ValueError(f"unsafe domain name {name!r} refused")
    return name
