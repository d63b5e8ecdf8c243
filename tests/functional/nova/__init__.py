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

import importlib.metadata
import os
import sys

try:
    from nova import monkey_patch as _nova_monkey_patch
except ImportError as exc:  # Nova is an optional, test-only dependency.
    NOVA_UNAVAILABLE: str | None = (
        f"nova is not importable ({exc}); install the [nova] extra and "
        "test-requirements.txt to run the Nova functional tests")
else:
    NOVA_UNAVAILABLE = None
    _nova_monkey_patch.patch()


def nova_api_paste_ini() -> str | None:
    """Path of the api-paste.ini that the installed Nova ships, or None.

    The wheel installs it as data (``<prefix>/etc/nova/api-paste.ini``),
    not inside the package, so Nova's own default (``$state_path/etc/...``,
    i.e. under site-packages) never finds it.
    """
    candidates = []
    try:
        dist = importlib.metadata.distribution("nova")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for f in dist.files or ():
            if str(f).replace(os.sep, "/").endswith("etc/nova/api-paste.ini"):
                candidates.append(os.path.normpath(str(dist.locate_file(f))))
    candidates += [
        os.path.join(sys.prefix, "etc", "nova", "api-paste.ini"),
        "/usr/local/etc/nova/api-paste.ini",
        "/etc/nova/api-paste.ini",
    ]
    for path in candidates:
        if os.path.isfile(path):
            return path
    return None
