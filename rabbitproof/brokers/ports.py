"""Free TCP ports on the loopback interface, for brokers started by the test harness."""

from __future__ import annotations

import random
import socket
import time
from pathlib import Path


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


# The kernel takes the local port of every outgoing connection from this range (Linux). A broker
# that must get its port back after a kill cannot keep it there: while it is down, any connection
# made on the machine may be given that port, and the restart then fails with "address in use"
# (seen once in CI: RabbitMQ restarted by tests/test_harness_brokers.py while the other test worker
# connected elsewhere).
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000     # below the ports of well-known local services


def ephemeral_low(path: Path = EPHEMERAL_RANGE) -> int | None:
    """The lowest port of the kernel's ephemeral range, or None where it cannot be read."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def lasting_ports(count: int, host: str = "127.0.0.1", path: Path = EPHEMERAL_RANGE) -> list[int]:
    """``count`` distinct ports that nothing holds now, below the kernel's ephemeral range, for a server
    that must get the same port back after it is killed (the comment above). Where the range is not
    known, or leaves too little room below it, the kernel's choice (``free_ports``)."""
    low = ephemeral_low(path)
    if low is None or low - LOWEST < 1000:
        return free_ports(count, host)
    pick = random.SystemRandom()
    probes: list[socket.socket] = []
    try:
        for _ in range(100 * count):
            if len(probes) == count:
                break
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                probe.bind((host, pick.randrange(LOWEST, low)))      # held, so the next pick is another
            except OSError:
                probe.close()
                continue
            probes.append(probe)
        if len(probes) < count:
            return free_ports(count, host)
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
