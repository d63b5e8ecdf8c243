"""The one base of nova-rdt's own errors, as Nova's and os-vif's.

A subclass either passes the whole message, or sets ``msg_fmt`` and is
raised with the keywords it names (``NotPrepared(why=...)``), which stay
on the exception as ``kwargs`` for a caller that needs the parts.  Each
keeps the builtin base it had (``ValueError`` for bad input) so callers
that catch those still do.  Imports nothing: the hook loads it.
"""

from __future__ import annotations


class NovaRdtError(Exception):
    """Something nova-rdt cannot do; str() says what and why."""

    msg_fmt = "nova-rdt failed"

    def __init__(self, message: str | None = None, **kwargs: object):
        self.kwargs = kwargs
        if message is None:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError, ValueError):
                # A wrong keyword is a bug here, not the error to report.
                message = f"{self.msg_fmt} {kwargs!r}"
        super().__init__(message)
