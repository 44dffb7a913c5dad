"""Fixtures for the impl broker's own tests: `python -m impl.server` on port 0 with a private data dir."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class ServerProcess:
    """One impl.server process: start, stop (SIGTERM), kill (SIGKILL), start again on the same data."""

    def __init__(self, data_dir: Path, users: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.users = users
        self.process: subprocess.Popen | None = None
        self.host = "127.0.0.1"
        self.port = 0

    def start(self) -> "ServerProcess":
        command = [sys.executable, "-m", "impl.server", "--host", "127.0.0.1", "--port", str(self.port),
                   "--data-dir", str(self.data_dir)]
        for user in self.users:
            command += ["--user", user]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.process.stdout.readline().decode()  # type: ignore[union-attr]
        assert line.startswith("rabbitproof broker listening on "), (line, self.process.stderr.read())  # type: ignore[union-attr]
        self.host, port = line.rsplit(" ", 1)[1].strip().rsplit(":", 1)
        self.port = int(port)
        return self

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=20)
        self.process = None
        return code

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=20)
        self.process = None

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=20)
            self.process = None


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One broker shared by the tests that do not restart it; tests use their own queue names."""
    process = ServerProcess(tmp_path_factory.mktemp("impl-shared"), ("alice:secret",)).start()
    try:
        yield process
    finally:
        process.close()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A broker of this test's own, which the test may stop, kill and start again."""
    process = ServerProcess(tmp_path / "data").start()
    try:
        yield process
    finally:
        process.close()


@pytest.fixture
def qname() -> str:
    """A queue name no other test uses."""
    return "q-" + uuid.uuid4().hex[:12]

