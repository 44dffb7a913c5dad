"""The network between one client connection and the broker, made to fail on demand.

Every connection a replay makes goes through a ``Link``: a local port that forwards bytes both ways to the
broker in a thread of its own, until the replay makes one of the execution's network faults:

- ``drop_from_client``: what the client writes from now on never reaches the broker (a frame lost on the
  way, before a lost connection or a crash);
- ``cut``: both sockets closed, as a broken connection (``NetworkLoss``);
- ``freeze``: nothing is forwarded either way and nothing is closed (``ClientVanish``): the client has
  vanished for the broker, which notices only when its heartbeat timeout runs out and it closes the
  connection (``broker_closed`` then holds; ``BrokerDetect``).
"""
from __future__ import annotations

import select
import socket
import threading

_CHUNK = 1 << 16


class Link:
    """One client connection's path to the broker: listen on ``port`` (127.0.0.1), forward to ``upstream``."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream_address = (host, port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]
        self.dropping = False
        self.frozen = False
        self.broker_closed = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"replay link {self.port}", daemon=True)
        self._thread.start()

    def drop_from_client(self) -> None:
        self.dropping = True

    def freeze(self) -> None:
        self.frozen = True

    def cut(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    close = cut

    def _run(self) -> None:
        self.listener.settimeout(10.0)
        try:
            client, _ = self.listener.accept()
        except OSError:
            self.listener.close()
            return
        finally:
            self.listener.close()
        try:
            broker = socket.create_connection(self.upstream_address, timeout=10.0)
        except OSError:
            client.close()
            self.broker_closed.set()
            return
        for s in (client, broker):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        open_ = {client, broker}
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select(list(open_), [], [], 0.05)
                for s in readable:
                    try:
                        data = s.recv(_CHUNK)
                    except OSError:
                        data = b""
                    if not data:
                        open_.discard(s)
                        if s is broker:
                            self.broker_closed.set()
                        if not self.frozen:             # a vanished client is told nothing
                            return
                    elif s is broker:
                        if not self.frozen and client in open_:
                            _send(client, data)
                    elif not (self.frozen or self.dropping) and broker in open_:
                        _send(broker, data)
                if not open_:
                    self._stop.wait(0.05)
        finally:
            for s in (client, broker):
                try:
                    s.close()
                except OSError:
                    pass


def _send(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass
