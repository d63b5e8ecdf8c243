"""The two-compute cloud's judgement of what its Prometheus scrapes
(nova_rdt.lab.allinone.promview)."""

from nova_rdt.lab.allinone import promview as pv

UP = {"http://127.0.0.1:1/metrics": "up", "http://127.0.0.1:2/metrics": "up",
      "http://127.0.0.1:3/metrics": "up", "http://127.0.0.1:4/metrics": "up"}


def test_every_target_up_and_every_host_offered_holds():
    seen = pv.PromSeen(UP, ("vm", "vm-2"))
    assert pv.judge(seen, ["vm", "vm-2"], 4) == []


def test_a_target_down_or_missing_is_told():
    down = dict(UP, **{"http://127.0.0.1:3/metrics": "down"})
    bad = pv.judge(pv.PromSeen(down, ("vm", "vm-2")), ["vm", "vm-2"], 4)
    assert bad == ["http://127.0.0.1:3/metrics is down"]
    three = dict(list(UP.items())[:3])
    assert pv.judge(pv.PromSeen(three, ("vm", "vm-2")), ["vm", "vm-2"],
                    4) == ["3 scrape targets, not 4"]


def test_a_compute_the_dashboard_does_not_offer_is_told():
    bad = pv.judge(pv.PromSeen(UP, ("vm",)), ["vm", "vm-2"], 4)
    assert bad == ["the dashboard's $host lacks vm-2 (it offers vm)"]
    assert "offers none" in pv.judge(pv.PromSeen(UP, ()), ["vm"], 4)[0]
