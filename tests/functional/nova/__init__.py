"""Nova's in-process functional framework, run under pytest.

Importing this package applies Nova's eventlet monkey patching, as
``nova/tests/functional/__init__.py`` does: it must happen before
oslo.messaging (or anything else that grabs threading/socket primitives)
is imported, and pytest imports a package's ``__init__`` before its
``conftest.py`` and test modules.

When Nova is not installed, nothing is patched; ``conftest.py`` then skips
every test module here with :data:`NOVA_UNAVAILABLE` as the reason.
"""

from __future__ import annotations

try:
    from nova import monkey_patch as _nova_monkey_patch
except ImportError as exc:  # Nova is an optional, test-only dependency.
    NOVA_UNAVAILABLE: str | None = (
        f"nova is not importable ({exc}); install the [nova] extra and "
        "test-requirements.txt to run the Nova functional tests")
else:
    NOVA_UNAVAILABLE = None
    _nova_monkey_patch.patch()


from nova_rdt.lab.nova_paste import nova_api_paste_ini  # noqa: E402,F401
