"""Every name rule nova-rdt relies on, in one place.

Names are how nova-rdt, libvirt and the operator's own tools share one
resctrl mount, and how the driver's domain XML reaches the hook.  A rule
that lived in two modules could drift, and a drift here means touching a
group that is not ours.  This module is a leaf below every layer (the
resctrl library and the pure allocation core included): it imports only
the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
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

# libvirt's virResctrlAllocDeterminePath names a domain's group
# "<machine name>-<alloc id>", the id being "vcpus_<list>" unless the XML
# gives one (nova-rdt's never does).  The machine name of a privileged QEMU
# domain is "qemu-<domid>-<name made hostname-safe>" (see
# libvirt_machine_name); a hostname has no "_", so the first "_" in a
# group's name is its id's, and what precedes "-vcpus_" is the machine name.
LIBVIRT_GROUP_PREFIX_RE = re.compile(r"qemu-\d+-")
LIBVIRT_GROUP_RE = re.compile(
    r"(?P<machine>qemu-(?P<domid>\d+)"
    r"(?:-[A-Za-z0-9]+(?:[.-][A-Za-z0-9]+)*)?)-vcpus_")
# virDomainMachineNameAppendValid stops appending once the whole machine
# name, prefix included, holds this many characters (a hostname's length:
# the machine name is the domain's name at systemd-machined too).
LIBVIRT_MACHINE_NAME_MAX = 64
_HOSTNAME_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")

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


def _append_valid(prefix: str, name: str) -> str:
    # virDomainMachineNameAppendValid as libvirt 9.0 (Debian 12) has it,
    # checked against its libvirtd in tests/integration/
    # test_lab_libvirt.py.  Only a kept character ends a run of "."/"-":
    # a dropped one ("_", "!") between two dashes does not, so "a-_-b"
    # gives "a-b" (older releases ended the run on any character and gave
    # "a--b").  The length is checked before each character, so the cap
    # counts the prefix; the trailing "-"/"." are trimmed after the cut
    # (the prefix's own "-" too when nothing of the name is kept).
    out = [prefix]
    length = len(prefix)
    skip = True
    for ch in name:
        if length >= LIBVIRT_MACHINE_NAME_MAX:
            break
        if ch in ".-":
            if not skip:
                out.append(ch)
                length += 1
                skip = True
            continue
        if ch not in _HOSTNAME_CHARS:
            continue
        out.append(ch)
        length += 1
        skip = False
    return "".join(out).rstrip("-.")


def libvirt_machine_name(domid: int, domain_name: str,
                         privileged: bool = True, user: str = "") -> str:
    """libvirt's machine name of a QEMU domain
    (virDomainDriverGenerateMachineName, no embed root): the stem of its
    resctrl groups' names.  An unprivileged libvirtd puts its user's name
    in it; such a libvirtd cannot write resctrl, so only the privileged
    form names groups."""
    if isinstance(domid, bool) or not isinstance(domid, int) or domid < 0:
        raise ValueError(f"domain id {domid!r} is not a running domain's")
    if not privileged and not user:
        raise ValueError("an unprivileged machine name needs the user name")
    prefix = "qemu-" + ("" if privileged else f"{user}-") + f"{domid}-"
    return _append_valid(prefix, domain_name)


def libvirt_group_machine(group_name: str) -> tuple[int, str] | None:
    """(domain id, machine name) of a libvirt group's name, or None."""
    m = LIBVIRT_GROUP_RE.match(group_name)
    if m is None:
        return None
    return int(m.group("domid")), m.group("machine")


def is_libvirt_group_of(group_name: str, domain_name: str) -> bool:
    """Whether libvirt would name a group of ``domain_name`` so, under
    the domain id the group's name carries."""
    parsed = libvirt_group_machine(group_name)
    return parsed is not None and \
        libvirt_machine_name(parsed[0], domain_name) == parsed[1]


class LibvirtMachines:
    """The machine names in a set of libvirt groups, asked per domain name.

    A group's name carries the domain id, which a caller holding only a
    domain name (a claim made before the domain started, a hook record)
    does not know; the id also moves libvirt's 64-character cut.  So a
    name is matched under each id seen, not through one cut string.
    """

    def __init__(self, group_names: Iterable[str]) -> None:
        self._machines: dict[str, str] = {}
        self._ids: set[int] = set()
        for g in group_names:
            parsed = libvirt_group_machine(g)
            if parsed is not None:
                self._ids.add(parsed[0])
                self._machines.setdefault(parsed[1], g)

    def __bool__(self) -> bool:
        return bool(self._machines)

    def __len__(self) -> int:
        return len(self._machines)

    def __iter__(self) -> Iterator[str]:
        return iter(self._machines)

    def __contains__(self, domain_name: object) -> bool:
        return self.group_of(domain_name) is not None

    def group_of(self, domain_name: object) -> str | None:
        """One of the groups libvirt made for ``domain_name``, or None."""
        if not isinstance(domain_name, str):
            return None
        for domid in sorted(self._ids):
            g = self._machines.get(libvirt_machine_name(domid, domain_name))
            if g is not None:
                return g
        return None


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


#: libvirt's cache types (``<cache type=...>``, the nova-rdt metadata) as
#: the resctrl resources that hold them, and back.
RESOURCE_OF_KIND = {"both": "L3", "code": "L3CODE", "data": "L3DATA"}
KIND_OF_RESOURCE = {v: k for k, v in RESOURCE_OF_KIND.items()}
