"""Where the compiled send path, ``nova-rdt-pktgen``, is found.

``tools/build-native.sh`` builds it from ``native/pktgen.c`` into the
venv's ``bin`` (``sys.prefix/bin``), since a pip-installed package holds
no compiled file of ours.  Looked up in this order:

1. ``$NOVA_RDT_PKTGEN``: the binary itself (an empty value turns the
   native sender off);
2. ``<sys.prefix>/bin/nova-rdt-pktgen``: the venv that runs nova-rdt;
3. ``nova-rdt-pktgen`` on ``$PATH``.
"""

from __future__ import annotations

import os
import shutil
import sys

NAME = "nova-rdt-pktgen"
ENV = "NOVA_RDT_PKTGEN"
HOW = ("build it with tools/build-native.sh, or name it in "
       "$NOVA_RDT_PKTGEN")


def find() -> tuple[str | None, str]:
    """(path, "") when found, else (None, why not)."""
    if ENV in os.environ:
        path = os.environ[ENV]
        if not path:
            return None, f"${ENV} is empty (native sender turned off)"
        if os.access(path, os.X_OK) and os.path.isfile(path):
            return path, ""
        return None, f"${ENV}={path} is not an executable file"
    path = os.path.join(sys.prefix, "bin", NAME)
    if os.access(path, os.X_OK) and os.path.isfile(path):
        return path, ""
    path = shutil.which(NAME)
    if path:
        return path, ""
    return None, f"{NAME} is not built ({HOW})"
