"""Option types for files and programs named on a command line.

A leaf (standard library only), so that every layer's command-line
parser -- ``nova-rdt``'s, the RFC 2544 engine's -- can share them.
"""

from __future__ import annotations

import argparse
import os
import shutil


def path(text: str) -> str:
    """A file or directory named on the command line, made absolute here,
    once: what a command derives from it ([rdt] paths, a hook's
    settings, a report's links) must not depend on the directory a later
    step runs in, and Nova refuses relative [rdt] paths."""
    if not text or "\0" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a path")
    return os.path.abspath(os.path.expanduser(text))


def program(text: str) -> str:
    """An interpreter or other program: a bare name is looked up on PATH,
    anything with a slash is a path, made absolute (it ends up in a
    hook's shebang, which a relative path would break)."""
    if not text or "\0" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a program")
    if "/" not in text:
        found = shutil.which(text)
        if found is None:
            raise argparse.ArgumentTypeError(f"{text!r}: not found on PATH")
        return found
    return path(text)
