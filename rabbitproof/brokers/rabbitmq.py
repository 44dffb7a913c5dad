"""A private RabbitMQ 3.10.8 node for tests: started, stopped, killed and restarted on demand.

Everything the node writes (Mnesia database, message store, logs, Erlang cookie, pid file) lives under
one temporary directory; it listens for AMQP on 127.0.0.1 only, on a free port, and uses a second
free port for Erlang distribution, so several nodes (and other people's nodes) can run side by side.
The node is reached with `guest`/`guest`, which RabbitMQ accepts from loopback. A node keeps its
ports and data across `kill()` and `restart()`, which is how the crash rules (DU, PC-10, TX-8) are
observed on the real broker.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from rabbitproof.brokers.ports import lasting_ports, wait_until_listening

RABBITMQ_BIN = Path(os.environ.get("RABBITPROOF_RABBITMQ_BIN", "/usr/lib/rabbitmq/bin"))
RABBITMQ_VERSION = "3.10.8"


class RabbitMQNotInstalled(RuntimeError):
    """The rabbitmq-server package is missing: `make rabbitmq` installs it."""


class RabbitMQStartFailed(RuntimeError):
    """The node did not come up; the message carries the end of its log."""


def rabbitmq_installed(bin_dir: Path = RABBITMQ_BIN) -> bool:
    """True when the Debian package's server and CLI scripts are present."""
    return (bin_dir / "rabbitmq-server").exists() and (bin_dir / "rabbitmqctl").exists()


def require_rabbitmq(bin_dir: Path = RABBITMQ_BIN) -> None:
    """Raise RabbitMQNotInstalled with the way to install it when the package is missing."""
    if not rabbitmq_installed(bin_dir):
        raise RabbitMQNotInstalled(
            f"RabbitMQ {RABBITMQ_VERSION} is not installed (no {bin_dir}/rabbitmq-server): "
            "run `make rabbitmq` (apt-get install -y rabbitmq-server), or set "
            "RABBITPROOF_RABBITMQ_BIN to the directory holding rabbitmq-server and rabbitmqctl."
        )


class RabbitMQNode:
    """One private RabbitMQ node: its directory, its ports and, while running, its processes."""

    kind = "rabbitmq"

    def __init__(
        self,
        root: Path | None = None,
        *,
        host: str = "127.0.0.1",
        config_lines: tuple[str, ...] = (),
        startup_timeout: float = 90.0,
        bin_dir: Path = RABBITMQ_BIN,
    ) -> None:
        require_rabbitmq(bin_dir)
        self.bin_dir = Path(bin_dir)
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="rabbitproof-rmq-")) if root is None else Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port, self.dist_port = lasting_ports(2, host)
        self.nodename = f"rabbitproof-{os.getpid()}-{secrets.token_hex(3)}@localhost"
        self.startup_timeout = startup_timeout
        self.user, self.password = "guest", "guest"
        self._server: subprocess.Popen[bytes] | None = None
        self._server_log = None
        self._starts = 0
        self._write_config(config_lines)
        atexit.register(self._atexit)

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"RabbitMQNode({self.nodename}, {self.host}:{self.port}, {state})"

    def _write_config(self, config_lines: tuple[str, ...]) -> None:
        (self.root / "rabbitmq.conf").write_text(
            "\n".join(("loopback_users.guest = true", "log.file.level = info", *config_lines)) + "\n"
        )
        (self.root / "advanced.config").write_text("[].\n")
        (self.root / "enabled_plugins").write_text("[].\n")
        (self.root / "rabbitmq-env.conf").write_text("")

    @property
    def env(self) -> dict[str, str]:
        """The environment under which both the server and rabbitmqctl see this node and only it."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RABBITMQ_")}
        r = self.root
        env.update(
            HOME=str(r),
            RABBITMQ_NODENAME=self.nodename,
            RABBITMQ_NODE_IP_ADDRESS=self.host,
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_MNESIA_BASE=str(r / "mnesia"),
            RABBITMQ_LOG_BASE=str(r / "log"),
            RABBITMQ_CONFIG_FILE=str(r / "rabbitmq.conf"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(r / "enabled_plugins"),
            RABBITMQ_CONF_ENV_FILE=str(r / "rabbitmq-env.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(r / "advanced.config"),
            RABBITMQ_PID_FILE=str(r / "rabbitmq.pid"),
            RABBITMQ_PLUGINS_EXPAND_DIR=str(r / "plugins"),
        )
        return env

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> "RabbitMQNode":
        """Start the node and return once `rabbitmqctl await_startup` says it is up."""
        if self.is_running():
            raise RuntimeError(f"{self!r} is already running")
        pid_file = self.root / "rabbitmq.pid"
        pid_file.unlink(missing_ok=True)
        self._starts += 1
        self._server_log = open(self.root / f"server-{self._starts}.out", "wb")
        self._server = subprocess.Popen(
            [str(self.bin_dir / "rabbitmq-server")],
            env=self.env,
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=self._server_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._server.poll() is not None:
                self._fail(f"rabbitmq-server exited with status {self._server.returncode}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                self._fail(f"not up after {self.startup_timeout:.0f} s")
            # await_startup fails at once while the node is not yet registered with epmd.
            ctl = self.ctl("await_startup", "--timeout", str(max(1, int(remaining))), check=False)
            if ctl.returncode == 0:
                break
            time.sleep(0.3)
        if not wait_until_listening(self.host, self.port, 10.0):
            self._fail(f"booted but nothing listens on {self.host}:{self.port}")
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the node cleanly (`rabbitmqctl stop`) and wait for its processes to exit."""
        if not self.is_running():
            self._reap()
            return
        self.ctl("stop", check=False, timeout=timeout)
        try:
            assert self._server is not None
            self._server.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill_group(signal.SIGKILL)
        self._reap()

    def kill(self) -> None:
        """SIGKILL the beam process (a crash: no flush, no clean shutdown) and wait for it to die."""
        pid = self.beam_pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._server is not None:
            try:
                self._server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._kill_group(signal.SIGKILL)
        # erl_child_setup and friends leave once beam is gone; make sure nothing of it lingers.
        self._kill_group(signal.SIGKILL)
        self._reap()

    def restart(self) -> "RabbitMQNode":
        """Stop cleanly (if running) and start again on the same ports with the same data."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the node and remove its directory if the node created it."""
        self.stop()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "RabbitMQNode":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- inspection ----------------------------------------------------------------------------

    def is_running(self) -> bool:
        return self._server is not None and self._server.poll() is None

    def beam_pid(self) -> int | None:
        """The pid of the Erlang VM running the node, from its pid file, or None."""
        try:
            return int((self.root / "rabbitmq.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    @property
    def pid(self) -> int | None:
        return self.beam_pid()

    def ctl(
        self, *args: str, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run `rabbitmqctl -n NODE ARGS` against this node; raise on failure when `check`."""
        result = subprocess.run(
            [str(self.bin_dir / "rabbitmqctl"), "-n", self.nodename, *args],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"rabbitmqctl {' '.join(args)} failed ({result.returncode}): "
                f"{result.stdout.strip()} {result.stderr.strip()}"
            )
        return result

    def sync_metadata(self) -> None:
        """Flush Mnesia's transaction log (queue and exchange declarations) to disk.

        Mnesia logs committed transactions asynchronously: once (in about 40 runs, on a loaded
        machine) a durable queue declared a few milliseconds before a SIGKILL, with its confirmed
        message, was gone after the restart. Tests whose subject is message durability, not the
        durability of a fresh declaration, call this between declaring and killing.
        """
        self.ctl("eval", "mnesia:sync_log().")

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's console output and of its log file."""
        chunks = []
        for path in [self.root / f"server-{self._starts}.out", self.root / "log" / f"{self.nodename}.log"]:
            try:
                text = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            chunks.append(f"--- {path} ---\n" + "\n".join(text[-lines:]))
        return "\n".join(chunks)

    # -- internals -------------------------------------------------------------------------------

    def _fail(self, why: str) -> None:
        tail = self.log_tail()
        self._kill_group(signal.SIGKILL)
        self._reap()
        raise RabbitMQStartFailed(f"RabbitMQ node {self.nodename} on port {self.port}: {why}\n{tail}")

    def _kill_group(self, sig: int) -> None:
        if self._server is None:
            return
        try:
            os.killpg(self._server.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _reap(self) -> None:
        if self._server is not None:
            try:
                self._server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._server = None
        if self._server_log is not None:
            self._server_log.close()
            self._server_log = None

    def _atexit(self) -> None:
        if self.is_running():
            self._kill_group(signal.SIGKILL)
            self._reap()
