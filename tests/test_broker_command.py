"""`rabbitproof broker` reports as the other subcommands do: where it listens once ready, and a verdict
line when SIGTERM stops it; `--json` gives each as one JSON object on a line of stdout. A port it cannot
listen on is one line on stderr and exit 2, with nothing on stdout."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "rabbitproof", "broker", "--port", "0", "--data-dir",
                             str(tmp_path / "data"), *extra], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def greet(port: int) -> bytes:
    """Open a connection and read the broker's connection.start, so that the broker has surely accepted it."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        return s.recv(7)


def stop(broker: subprocess.Popen[str]) -> tuple[str, str]:
    broker.send_signal(signal.SIGTERM)
    return broker.communicate(timeout=120)


def test_json_says_where_it_listens_then_how_it_stopped(tmp_path):
    broker = start(tmp_path, "--json")
    listening = json.loads(broker.stdout.readline())
    assert (listening["schema"], listening["event"], listening["host"]) == ("rabbitproof.broker/1", "listening",
                                                                            "127.0.0.1")
    assert listening["url"] == f"amqp://127.0.0.1:{listening['port']}/" and listening["pid"] == broker.pid
    assert greet(listening["port"])[:1] == b"\x01"          # a method frame: connection.start
    out, err = stop(broker)
    stopped = json.loads(out)
    assert broker.returncode == 0 and err == ""
    assert {k: stopped[k] for k in ("schema", "event", "exit_code", "verdict", "stopped_by", "connections")} == {
        "schema": "rabbitproof.broker/1", "event": "stopped", "exit_code": 0, "verdict": "nothing found",
        "stopped_by": "SIGTERM", "connections": 1}


def test_the_text_report_ends_with_the_verdict_line(tmp_path):
    broker = start(tmp_path)
    ready = broker.stdout.readline()
    assert ready.startswith("rabbitproof broker listening on 127.0.0.1:")
    greet(int(ready.rsplit(":", 1)[1]))
    out, _ = stop(broker)
    [line] = out.splitlines()
    assert broker.returncode == 0
    assert line.startswith("broker: stopped: by SIGTERM after ") and line.endswith(" s, 1 client connection (exit 0)")


def test_a_port_in_use_is_bad_input(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "rabbitproof", "broker", "--port", str(port), "--json",
                               "--data-dir", str(tmp_path / "data")], cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"rabbitproof broker: error: cannot listen on 127.0.0.1:{port}: ")
    assert len(done.stderr.splitlines()) == 1
