"""Option types oslo.config lacks: a float that must be finite.

oslo's ``FloatOpt(min=0.5)`` lets ``nan`` through (every comparison with
nan is false) and ``inf`` through (no max): a ``hook_timeout = nan``
then crashed the hook at ``setitimer`` on every event, and a
``lock_timeout = nan`` made a flock wait forever.  Every time option of
nova-rdt is a :class:`FiniteFloatOpt`, bounded on both sides.
"""

from __future__ import annotations

import math

from oslo_config import cfg
from oslo_config import types


class FiniteFloat(types.Float):
    """A float in ``[min, max]``; nan and infinities are refused."""

    def __call__(self, value):
        v = super().__call__(value)
        if not math.isfinite(v):
            raise ValueError(f"{value!r} is not a finite number")
        return v


class FiniteFloatOpt(cfg.FloatOpt):
    def __init__(self, name, min, max, **kwargs):
        super().__init__(name, min=min, max=max, **kwargs)
        self.type = FiniteFloat(min=min, max=max)
