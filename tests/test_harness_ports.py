"""rabbitproof.brokers.ports: the ports a broker keeps across a kill are chosen below the kernel's
ephemeral range, where no outgoing connection is given one of them while the broker is down."""
from __future__ import annotations

import socket

from rabbitproof.brokers import ports
from rabbitproof.brokers.impl_broker import ImplBroker


def bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_lasting_ports_are_free_distinct_and_below_the_ephemeral_range(tmp_path):
    low = ports.ephemeral_low()
    assert low is not None and low > ports.LOWEST + 1000       # Linux, as CI runs
    chosen = ports.lasting_ports(3)
    assert len(set(chosen)) == 3
    assert all(ports.LOWEST <= p < low for p in chosen)
    assert all(bindable(p) for p in chosen)


def test_the_range_is_read_from_the_kernels_file_and_its_absence_falls_back(tmp_path):
    given = tmp_path / "ip_local_port_range"
    given.write_text("40000\t60999\n")
    assert ports.ephemeral_low(given) == 40000
    assert all(ports.LOWEST <= p < 40000 for p in ports.lasting_ports(2, path=given))
    missing = tmp_path / "missing"
    assert ports.ephemeral_low(missing) is None
    fallback = ports.lasting_ports(2, path=missing)            # the kernel's choice: in its own range
    assert len(set(fallback)) == 2 and all(p >= ports.ephemeral_low() for p in fallback)
    cramped = tmp_path / "cramped"
    cramped.write_text(f"{ports.LOWEST + 10} 60999\n")       # no room below: the kernel's choice too
    assert all(p >= ports.ephemeral_low() for p in ports.lasting_ports(1, path=cramped))


def test_our_brokers_harness_takes_a_lasting_port_unless_given_one(tmp_path):
    chosen = ImplBroker(tmp_path / "a")
    assert ports.LOWEST <= chosen.port < ports.ephemeral_low()
    assert ImplBroker(tmp_path / "b", port=45678).port == 45678
