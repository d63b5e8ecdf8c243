"""The one base of nova-rdt's own errors, as Nova's and os-vif's.

A subclass either passes the whole message, or sets ``msg_fmt`` and is
raised with the keywords it names (``NotPrepared(why=...)``), which stay
on the exception as ``kwargs`` for a caller that needs the parts.  Each
keeps the builtin base it had, so callers that catch those still do.
Imports nothing: the hook loads it.

The hierarchy, by the builtin base each keeps::

    NovaRdtError
    +-- and ValueError: bad input or configuration (SpecError,
    |   ClassDefinitionError, SettingsError, RecordError, MetadataError,
    |   HookInputError, CbmError, SchemataSyntaxError, CliError, ...)
    +-- and RuntimeError: what a host or a tool could not do (the
    |   agent's IsolationError, OvsError, the commands' Failure,
    |   FailpointError, the emulator's mount and the labs' errors)
    +-- and PermissionError: privsep's Refused, OSError's base listed
    |   first so that OSError's constructor keeps errno and filename
    +-- alone: ResctrlError (a refused resctrl operation, with the
        kernel's errno and last_cmd_status; one subclass per cause:
        NotMounted, OutOfClosids, WriteRejected, ...), NoPlacement,
        CannotHonour, NotPrepared, the emulator's KernelError, the
        isolation procedure's errors

Not under it, on purpose: ``failpoints.FailpointDied`` (a
BaseException, so that nothing recovers from a simulated death) and
the private signals that never leave their module (the hook's
``_Timeout``, the solver's ``_GaveUp``, RFC 2544's ``_Budget``).  Where
Nova must see its own type (a 400 from the API's validators, a build
the driver refuses), nova-rdt raises Nova's exception from its own.
"""

from __future__ import annotations

from collections.abc import Mapping
import types


class NovaRdtError(Exception):
    """Something nova-rdt cannot do; str() says what and why."""

    msg_fmt = "nova-rdt failed"
    # Empty where a builtin base's constructor runs instead (OSError's).
    kwargs: Mapping[str, object] = types.MappingProxyType({})

    def __init__(self, message: str | None = None, **kwargs: object):
        self.kwargs = kwargs
        if message is None:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError, ValueError):
                # A wrong keyword is a bug here, not the error to report.
                message = f"{self.msg_fmt} {kwargs!r}"
        super().__init__(message)
