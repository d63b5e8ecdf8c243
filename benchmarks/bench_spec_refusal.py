"""How fast a hostile extra spec is refused at the API.

    .venv/bin/python -m benchmarks.bench_spec_refusal [--repeat 200]

Drives nova-rdt's paste filter (``rdt_flavor_check``) as the WSGI app it
is, with a real ``nova.objects.Flavor`` in place of the database lookup,
and times ``POST /flavors/1/os-extra_specs`` bodies: the hostile
``rdt:vcpus=0-9999999`` (which used to cost seconds and a gigabyte), its
siblings, and a valid ``rdt:vcpus=0-3`` as the peer.  Prints median, p95
and max per body and the ratio of each median to the peer's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

BODIES = {
    "valid rdt:vcpus=0-3 (peer)": {"rdt:vcpus": "0-3",
                                   "rdt:l3_cache_ways": "2"},
    "rdt:vcpus=0-9999999": {"rdt:vcpus": "0-9999999"},
    "rdt:vcpus=0-99999999": {"rdt:vcpus": "0-99999999"},
    "rdt:vcpus=0-<250 nines>": {"rdt:vcpus": "0-" + "9" * 250},
    "rdt:mb_percent=<5000 digits>": {"rdt:mb_percent": "5" * 5000},
    "hw:numa_nodes=100000000": {"rdt:l3_cache_ways": "2",
                                "hw:numa_nodes": "100000000"},
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=200)
    args = p.parse_args(argv)

    from nova import context
    from nova import objects
    import webob
    import webob.dec

    from nova_rdt.api import flavor_check

    objects.register_all()

    class Filter(flavor_check.FlavorCheck):
        @staticmethod
        def _flavor(req, flavor_id):
            return objects.Flavor(flavorid=flavor_id, vcpus=4,
                                  extra_specs={})

    @webob.dec.wsgify
    def nova_api(req):
        return webob.Response(status=200, body=b"{}")

    app, ctx = Filter(nova_api), context.get_admin_context()
    results = {}
    for label, specs in BODIES.items():
        body = json.dumps({"extra_specs": specs}).encode()
        times, status, message = [], None, ""
        for _ in range(args.repeat):
            req = webob.Request.blank("/v2.1/flavors/1/os-extra_specs",
                                      method="POST", body=body)
            req.environ["nova.context"] = ctx
            t0 = time.perf_counter()
            resp = req.get_response(app)
            times.append(time.perf_counter() - t0)
            status = resp.status_int
        if status == 400:
            message = json.loads(resp.body)["badRequest"]["message"]
        results[label] = (sorted(times), status, message)
    peer = statistics.median(next(iter(results.values()))[0])
    for label, (times, status, message) in results.items():
        med = statistics.median(times)
        p95 = times[int(len(times) * 0.95) - 1]
        print(f"{label:32} {status}  median {med * 1000:6.3f} ms  p95 "
              f"{p95 * 1000:6.3f} ms  max {times[-1] * 1000:6.3f} ms  "
              f"x{med / peer:4.2f} of the peer")
        if message:
            print(f"{'':32}      {message[:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
