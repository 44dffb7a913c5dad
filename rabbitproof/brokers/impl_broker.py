"""Our broker (impl/) run as a subprocess, with the same lifecycle as a private RabbitMQ node.

The contract of `impl.server`: `python -m rabbitproof.impl.server --host HOST --port PORT --data-dir DIR
[--user NAME:PASSWORD]`; `--port 0` picks a free port; once ready it prints one line
`rabbitproof broker listening on HOST:PORT` to stdout; SIGTERM shuts it down; SIGKILL must lose no
confirmed message. The default user is guest:guest. A broker keeps its port and data directory across
`kill()` and `restart()`.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

from rabbitproof.brokers.ports import lasting_ports

READY_LINE = re.compile(rb"rabbitproof broker listening on (?P<host>[^\s:]+):(?P<port>\d+)")


class ImplStartFailed(RuntimeError):
    """impl.server exited or stayed silent instead of printing its ready line."""


class ImplBroker:
    """One `python -m rabbitproof.impl.server` process (while running), its data directory and its port."""

    kind = "impl"

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        user: tuple[str, str] | None = None,
        startup_timeout: float = 30.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self._own_dir = data_dir is None
        self.root = Path(tempfile.mkdtemp(prefix="rabbitproof-impl-")) if data_dir is None else Path(data_dir)
        self.data_dir = self.root / "data" if self._own_dir else self.root
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(tempfile.mkdtemp(prefix="rabbitproof-impl-log-"))
        self.host = host
        self.port = port or lasting_ports(1, host)[0]      # kept across restarts (ports.lasting_ports)
        self.user, self.password = user if user is not None else ("guest", "guest")
        self._user_arg = user
        self.startup_timeout = startup_timeout
        self.extra_args = extra_args
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdout_tail: deque[str] = deque(maxlen=200)
        self._drain: threading.Thread | None = None
        self._starts = 0
        atexit.register(self._atexit)

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"ImplBroker({self.host}:{self.port}, data={self.data_dir}, {state})"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "rabbitproof.impl.server", "--host", self.host, "--port", str(self.port),
               "--data-dir", str(self.data_dir)]
        if self._user_arg is not None:
            cmd += ["--user", f"{self._user_arg[0]}:{self._user_arg[1]}"]
        return cmd + list(self.extra_args)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> "ImplBroker":
        """Start the broker and return once it has printed its ready line (port then known)."""
        if self.is_running():
            raise RuntimeError(f"{self!r} is already running")
        self._starts += 1
        stderr_path = self.log_dir / f"stderr-{self._starts}.log"
        self._stdout_tail.clear()
        with open(stderr_path, "wb") as stderr:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        ready: list[tuple[str, int]] = []
        got_ready = threading.Event()
        self._drain = threading.Thread(
            target=self._read_stdout, args=(self._proc, ready, got_ready), daemon=True
        )
        self._drain.start()
        deadline = time.monotonic() + self.startup_timeout
        while not got_ready.wait(0.05):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                why = (f"exited with status {self._proc.returncode}" if self._proc.poll() is not None
                       else f"printed no ready line within {self.startup_timeout:.0f} s")
                self.kill()
                raise ImplStartFailed(f"impl.server {why}: {' '.join(self.command())}\n{self.log_tail()}")
        host, port = ready[0]
        self.port = port
        return self

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the broker and wait for it to exit (SIGKILL after `timeout` seconds)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self._proc.wait(timeout=10)
        self._reap()

    def kill(self) -> None:
        """SIGKILL the broker (a crash) and wait for it to be gone."""
        if self._proc is None:
            return
        self._signal_group(signal.SIGKILL)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._reap()

    def restart(self) -> "ImplBroker":
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the broker and remove the directories the harness created for it."""
        self.stop()
        shutil.rmtree(self.log_dir, ignore_errors=True)
        if self._own_dir:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "ImplBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- inspection ----------------------------------------------------------------------------

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def log_tail(self, lines: int = 60) -> str:
        """The broker's recent stdout and the end of its current stderr."""
        out = "\n".join(self._stdout_tail)
        try:
            err_lines = (self.log_dir / f"stderr-{self._starts}.log").read_text(errors="replace").splitlines()
        except OSError:
            err_lines = []
        return f"--- stdout ---\n{out}\n--- stderr ---\n" + "\n".join(err_lines[-lines:])

    def stderr_text(self) -> str:
        """Everything the broker has written to stderr in its current (or last) run."""
        try:
            return (self.log_dir / f"stderr-{self._starts}.log").read_text(errors="replace")
        except OSError:
            return ""

    # -- internals -------------------------------------------------------------------------------

    def _read_stdout(
        self, proc: subprocess.Popen[bytes], ready: list[tuple[str, int]], got_ready: threading.Event
    ) -> None:
        """Keep reading the broker's stdout (so it never blocks on a full pipe); spot the ready line."""
        assert proc.stdout is not None
        for line in proc.stdout:
            self._stdout_tail.append(line.decode(errors="replace").rstrip())
            if not got_ready.is_set():
                match = READY_LINE.search(line)
                if match:
                    ready.append((match["host"].decode(), int(match["port"])))
                    got_ready.set()

    def _signal_group(self, sig: int) -> None:
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _reap(self) -> None:
        if self._drain is not None:
            self._drain.join(timeout=5)
            self._drain = None

    def _atexit(self) -> None:
        if self.is_running():
            self._signal_group(signal.SIGKILL)
