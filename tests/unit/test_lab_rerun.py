"""A second ``nova-rdt lab`` into the same report directory: what the
first run left there must not be read as this run's."""

from __future__ import annotations

from nova_rdt.lab.demo.stages import exporter


def test_the_exporter_address_is_read_from_this_run_only(tmp_path):
    log = tmp_path / "exporter.log"
    old = ("nova-rdt exporter for lab (/x) on http://127.0.0.1:38233/ "
           "(metrics at /metrics)\n")
    log.write_text(old)
    offset = log.stat().st_size
    assert exporter.listening_url(str(log), offset) is None
    with open(log, "a") as f:
        f.write("starting\nnova-rdt exporter for lab (/y) on "
                "http://127.0.0.1:40001/ (metrics at /metrics)\n")
    assert exporter.listening_url(str(log), offset) == \
        "http://127.0.0.1:40001"
    assert exporter.listening_url(str(log), 0) == "http://127.0.0.1:38233"
