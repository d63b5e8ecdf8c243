"""Host preparation: write the HOST/MANAGED layout into resctrl.

The layout itself is planned by :mod:`nova_rdt.allocation.hostlayout`.
"""

from __future__ import annotations

from nova_rdt import naming
from nova_rdt.allocation import hostlayout
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import Resctrl

HostPrepError = hostlayout.HostPrepError


def prepare(fs: Resctrl, reserved_ways: int, pmd_ways: int) -> dict:
    """Apply :func:`plan` under the resctrl lock; idempotent.

    Returns a summary for the log.  A kernel refusal propagates as the
    library's ResctrlError, quoting ``last_cmd_status``.
    """
    with fs.locked():
        caps = fs.capabilities()
        layout = hostlayout.plan(caps, reserved_ways, pmd_ways)
        if layout.root.lines:
            fs.write_schemata(fs.root_group(), layout.root, allow_root=True)
        pmd_name = naming.pmd_group(fs.prefix)
        if layout.pmd is not None:
            try:
                g = fs.group(pmd_name)
            except errors.GroupNotFound:
                g = fs.create_group(pmd_name)
            fs.write_schemata(g, layout.pmd)
        return {"root": layout.root.format().strip(),
                "pmd": layout.pmd.format().strip() if layout.pmd else None,
                "managed_ways": layout.managed_ways,
                "pmd_group": pmd_name if layout.pmd else None}
