"""The driver overrides some of LibvirtDriver's private methods.

Nova does not promise their signatures.  When an upgrade changes one,
this test names the method and both signatures, instead of the driver
failing at run time on the path that calls it.
"""

from __future__ import annotations

import inspect

import pytest

libvirt_driver = pytest.importorskip("nova.virt.libvirt.driver")

from nova_rdt.virt import driver as rdt_driver  # noqa: E402
from nova_rdt.virt import migration  # noqa: E402

NOVA = libvirt_driver.LibvirtDriver


def _overrides():
    out = []
    for cls in (rdt_driver.LibvirtRDTDriver, migration.LiveMigrationMixin):
        for name, fn in vars(cls).items():
            if callable(fn) and not name.startswith("__") \
                    and hasattr(NOVA, name):
                out.append((cls.__name__, name))
    return out


OVERRIDES = _overrides()


def test_the_driver_overrides_what_we_think():
    names = {n for _, n in OVERRIDES}
    # The seams nova-rdt depends on; losing one silently drops RDT from a
    # path.
    assert {"_get_guest_config", "init_host", "get_available_resource",
            "update_provider_tree", "cleanup", "_cleanup_resize",
            "post_claim_migrate_data", "_live_migration_operation",
            "confirm_migration",
            "rollback_live_migration_at_destination"} <= names


@pytest.mark.parametrize("owner, name", OVERRIDES,
                         ids=[n for _, n in OVERRIDES])
def test_signature_matches_installed_nova(owner, name):
    ours = inspect.signature(getattr(rdt_driver.LibvirtRDTDriver, name))
    theirs = inspect.signature(getattr(NOVA, name))

    def shape(sig):
        return [(p.name, p.kind, p.default) for p in sig.parameters.values()]

    assert shape(ours) == shape(theirs), (
        f"Nova's LibvirtDriver.{name} is now {theirs}; nova-rdt's "
        f"{owner}.{name} is {ours}. Update the override to the new "
        f"signature (and check what the method now does).")
