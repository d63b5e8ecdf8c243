"""Where the installed Nova keeps its api-paste.ini (no Nova import)."""

from __future__ import annotations

import importlib.metadata
import os
import sys


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
