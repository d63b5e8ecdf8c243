"""Boot one flavor through Nova onto a Host lab's resctrl; print Nova's XML.

Run as ``python -m tests.integration.nova_boot CONFIG_JSON OUT_XML`` by
the lab tests: Nova's framework needs eventlet's monkey patching before
anything imports oslo.messaging, which a pytest process that also drives
libvirtd and FUSE cannot promise, so Nova runs in this child process.

CONFIG_JSON holds the :class:`~nova_rdt.lab.cloud.lab_cloud.CloudConfig`
fields plus ``extra_specs`` and ``vcpus``.  The server is booted through
the API with the RDTFilter on, must land on the lab's RDT compute, and
the domain XML nova-rdt's driver handed to libvirt is written to OUT_XML.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    from nova import monkey_patch
    monkey_patch.patch()

    from nova_rdt.lab.cloud import lab_cloud
    from nova_rdt.lab.nova_paste import nova_api_paste_ini

    config_path, out_path = argv
    with open(config_path) as f:
        raw = json.load(f)
    specs = raw.pop("extra_specs")
    vcpus = raw.pop("vcpus", 2)
    config = lab_cloud.CloudConfig(api_paste_config=nova_api_paste_ini(),
                                   **raw)

    def body(cloud):
        cloud.start_lab_computes()
        flavor = cloud._create_flavor(vcpu=vcpus, memory_mb=512,
                                      extra_spec=specs)
        server = cloud._create_server(flavor_id=flavor, networks="none")
        host = server["OS-EXT-SRV-ATTR:host"]
        if host != lab_cloud.RDT_COMPUTE:
            raise AssertionError(f"landed on {host}, not the RDT compute")
        return cloud.domain_xml(server["id"])

    xml = lab_cloud.run_in_cloud(config, body)
    with open(out_path, "w") as f:
        f.write(xml)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
