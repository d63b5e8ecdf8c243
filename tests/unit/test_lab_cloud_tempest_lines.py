"""The lab cloud says Tempest's own lines: one per test and the Totals
block, as ``tempest run`` printed them (stestr's subunit-trace)."""

from nova_rdt.lab.allinone import checks

OUT = """{0} setUpClass (tempest_plugin.tests.x.Y) ... SKIPPED: no exporter
{0} tempest_plugin.tests.api.test_a.A.test_one [1.2s] ... ok
noise in between
{0} tempest_plugin.tests.scenario.test_b.B.test_two [300.1s] ... FAILED

======
Totals
======
Ran: 2 tests in 301.0000 sec.
 - Passed: 1
 - Skipped: 0
 - Expected Fail: 0
 - Unexpected Success: 0
 - Failed: 1
Sum of execute time for each test: 301.3 sec.

==============
Worker Balance
==============
 - Worker 0 (2 tests) => 0:05:01
"""


def test_one_line_per_test_and_the_totals():
    lines = checks.own_lines(OUT)
    assert lines[:3] == [ln for ln in OUT.splitlines()
                         if ln.startswith("{0}")]
    assert lines[3] == "Totals"
    assert lines[4] == "Ran: 2 tests in 301.0000 sec."
    assert " - Failed: 1" in lines
    assert not any("Worker" in ln for ln in lines)


def test_no_totals_no_lines():
    assert checks.own_lines("tempest: error: no such workspace\n") == []
