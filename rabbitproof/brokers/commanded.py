"""A broker under test that the conformance suite crashes and restarts with the user's own commands
(`rabbitproof conformance URL --kill-cmd CMD --start-cmd CMD`): any broker, however it is run.

``kill()`` runs the kill command and waits for it; it should end the broker at once, as a crash does
(SIGKILL: what the broker has not written to disk is lost; a graceful stop would exercise less).
``start()`` runs the start command without waiting for it (it may run the broker in the foreground or
start a service and return) and returns once the broker accepts AMQP connections on its port again.
"""
from __future__ import annotations

import subprocess
import time

from rabbitproof.brokers.ports import wait_until_listening


class CommandFailed(RuntimeError):
    """A kill or start command that failed, or a broker that did not come back; the message says which."""


class CommandedBroker:
    """The broker at ``host:port``, killed and started by shell commands."""

    kind = "commanded"

    def __init__(self, host: str, port: int, user: str, password: str, kill_cmd: str, start_cmd: str,
                 ready_timeout: float = 60.0) -> None:
        self.host, self.port, self.user, self.password = host, port, user, password
        self.kill_cmd, self.start_cmd, self.ready_timeout = kill_cmd, start_cmd, ready_timeout
        self._started: list[subprocess.Popen] = []

    def kill(self) -> None:
        """Run the kill command; CommandFailed if it fails or the port still answers 10 s later."""
        done = subprocess.run(self.kill_cmd, shell=True, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise CommandFailed(f"--kill-cmd exited with {done.returncode}: {(done.stderr or done.stdout).strip()[:200]}")
        deadline = time.monotonic() + 10
        while wait_until_listening(self.host, self.port, 0.2):
            if time.monotonic() > deadline:
                raise CommandFailed(f"after --kill-cmd the broker still listens on {self.host}:{self.port}")
            time.sleep(0.1)

    def start(self) -> "CommandedBroker":
        """Run the start command and wait until the port listens; CommandFailed if it does not in time."""
        child = subprocess.Popen(self.start_cmd, shell=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, start_new_session=True)
        self._started.append(child)
        deadline = time.monotonic() + self.ready_timeout
        while not wait_until_listening(self.host, self.port, 0.5):
            code = child.poll()
            if code:                        # it failed: no broker is coming (0 may be a daemon's parent)
                raise CommandFailed(f"after --start-cmd the broker did not listen on {self.host}:{self.port} "
                                    f"(the command exited with {code})")
            if time.monotonic() > deadline:
                why = f"it exited with {code}" if code is not None else "it is still running"
                raise CommandFailed(f"after --start-cmd the broker did not listen on {self.host}:{self.port} within "
                                    f"{self.ready_timeout:g} s ({why})")
        return self

    def close(self) -> None:
        """Forget the start commands' processes (the broker itself is the user's to stop)."""
        for child in self._started:
            if child.poll() is None and child.stderr is not None:
                child.stderr.close()
        self._started.clear()
