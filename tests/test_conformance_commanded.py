"""`rabbitproof conformance URL --kill-cmd CMD --start-cmd CMD`: the suite crashes and restarts a broker
it did not start, with the user's own commands, so the crash families (DU, PC-10) run on any broker."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys

from rabbitproof.brokers.ports import free_port, wait_until_listening
from tests.fixtures.patience import REPLY_PATIENCE


def test_crash_programs_run_with_the_users_kill_and_start_commands(tmp_path):
    port = free_port()
    data, pid = tmp_path / "data", tmp_path / "broker.pid"
    start = (f"{shlex.quote(sys.executable)} -m rabbitproof.impl.server --port {port} --data-dir {shlex.quote(str(data))} "
             f"> /dev/null 2>&1 & echo $! > {shlex.quote(str(pid))}")
    kill = f"kill -9 $(cat {shlex.quote(str(pid))})"
    subprocess.run(start, shell=True, check=True)
    try:
        assert wait_until_listening("127.0.0.1", port, 30)
        done = subprocess.run([sys.executable, "-m", "rabbitproof", "conformance", f"amqp://127.0.0.1:{port}/",
                               "--programs", "3", "--kill-cmd", kill, "--start-cmd", start, "--json",
                               "--no-probes", "--reply-timeout", str(REPLY_PATIENCE)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
        result = json.loads(done.stdout)
        assert result["totals"]["accepted"] == result["totals"]["programs"] == 3
        assert result["totals"]["crashes"] >= 3 and result["families"]["DU"]["programs"] == 3   # each crashed
    finally:
        subprocess.run(f"kill -9 $(cat {shlex.quote(str(pid))})", shell=True)


def test_a_start_command_that_fails_is_one_clear_error(tmp_path):
    port = free_port()
    data, pid = tmp_path / "data", tmp_path / "broker.pid"
    start = (f"{shlex.quote(sys.executable)} -m rabbitproof.impl.server --port {port} --data-dir {shlex.quote(str(data))} "
             f"> /dev/null 2>&1 & echo $! > {shlex.quote(str(pid))}")
    subprocess.run(start, shell=True, check=True)
    try:
        assert wait_until_listening("127.0.0.1", port, 30)
        done = subprocess.run([sys.executable, "-m", "rabbitproof", "conformance", f"amqp://127.0.0.1:{port}/",
                               "--programs", "2", "--kill-cmd", f"kill -9 $(cat {shlex.quote(str(pid))})",
                               "--start-cmd", "exit 3"], capture_output=True, text=True, timeout=600)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert done.stderr.startswith("rabbitproof conformance: error: after --start-cmd the broker did not listen on ")
        assert "(the command exited with 3)" in done.stderr
    finally:
        subprocess.run(f"kill -9 $(cat {shlex.quote(str(pid))}) 2>/dev/null", shell=True)


def test_kill_without_start_is_refused_before_any_work():
    done = subprocess.run([sys.executable, "-m", "rabbitproof", "conformance", "amqp://127.0.0.1:1/",
                           "--kill-cmd", "true"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--kill-cmd and --start-cmd go together" in done.stderr
