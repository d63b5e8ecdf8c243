"""``nova-rdt lab --scenario faults``: failpoints and host faults on the
Host lab, each followed by recovery and a convergence check."""
