"""SLO signals: where a protected instance's current latency comes from.

A source answers :meth:`read` with a number or None.  None (a missing,
stale or unreadable value, a Prometheus that is down) is never turned
into a guess: the slack policy then decides nothing for that period.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.parse
import urllib.request

from nova_rdt.controller import slo_spec

LOG = logging.getLogger(__name__)
MAX_BYTES = 64 * 1024


class FileSource:
    """A file holding the current value (first token), written by the
    application or by a probe (``nova-rdt rfc2544`` can write its p99)."""

    def __init__(self, path: str, max_age: float,
                 clock=time.time):
        self.path = path
        self.max_age = max_age
        self.clock = clock

    def read(self) -> float | None:
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                data = f.read(MAX_BYTES)
        except OSError as e:
            LOG.warning("SLO file %s unreadable: %s", self.path, e)
            return None
        if self.max_age and self.clock() - st.st_mtime > self.max_age:
            LOG.warning("SLO file %s is stale (%.0fs old)", self.path,
                        self.clock() - st.st_mtime)
            return None
        value = slo_spec.parse_value(data.decode(errors="replace"))
        if value is None:
            LOG.warning("SLO file %s holds no number", self.path)
        return value


class PrometheusSource:
    """An instant query; the answer must be one sample (a vector of one
    or a scalar)."""

    def __init__(self, url: str, query: str, timeout: float):
        self.url = url.rstrip("/") + "/api/v1/query?" + \
            urllib.parse.urlencode({"query": query})
        self.query = query
        self.timeout = timeout

    def read(self) -> float | None:
        try:
            with urllib.request.urlopen(self.url,
                                        timeout=self.timeout) as resp:
                doc = json.loads(resp.read(MAX_BYTES * 16))
        except (OSError, ValueError, urllib.error.URLError) as e:
            LOG.warning("SLO query %r failed: %s", self.query, e)
            return None
        return parse_answer(doc, self.query)


def parse_answer(doc, query: str = "") -> float | None:
    """The value of a Prometheus /api/v1/query answer with one sample."""
    try:
        if doc.get("status") != "success":
            raise ValueError(doc.get("error", "not success"))
        data = doc["data"]
        if data["resultType"] == "scalar":
            value = data["result"][1]
        else:
            result = data["result"]
            if len(result) != 1:
                raise ValueError(f"{len(result)} samples, expected one")
            value = result[0]["value"][1]
        return slo_spec.parse_value(str(value))
    except (AttributeError, KeyError, IndexError, TypeError,
            ValueError) as e:
        LOG.warning("SLO query %r: unusable answer: %s", query, e)
        return None


def make(spec: slo_spec.SloSpec, prometheus_url: str, timeout: float,
         max_age: float):
    if spec.kind == "file":
        return FileSource(spec.where, max_age)
    return PrometheusSource(prometheus_url, spec.where, timeout)
