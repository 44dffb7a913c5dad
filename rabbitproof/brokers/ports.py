"""Free TCP ports on the loopback interface, for brokers started by the test harness."""

from __future__ import annotations

import socket
import time


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that nothing listens on right now (the kernel's choice for port 0).

    Another process can take it before the caller binds it; callers that start a server on it
    detect that from the server's failure to start.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Return `count` distinct free ports, all held open together while they are chosen."""
    probes = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for probe in probes:
            probe.bind((host, 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def wait_until_listening(host: str, port: int, timeout: float) -> bool:
    """Return True once a TCP connection to host:port succeeds, False after `timeout` seconds."""

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False
