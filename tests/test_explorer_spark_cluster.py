"""A real cluster manager: a Spark standalone master and one worker on 127.0.0.1, started from the
installed pyspark (no download), explore a configuration through ``--master spark://127.0.0.1:PORT``
and get the local engine's counts; both are stopped at the end."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

from rabbitproof.spark_check.engine import LocalEngine

from tests import toy_model as toy

ROOT = Path(__file__).resolve().parent.parent
SPARK_HOME = Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.3)
    return False


def spark_class(*args: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": str(log.parent / "work")}
    return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=env, start_new_session=True,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)


@pytest.fixture
def standalone(tmp_path):
    port, ui, worker_ui = free_port(), free_port(), free_port()
    master = spark_class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                         "--webui-port", str(ui), log=tmp_path / "master.log")
    processes = [master]
    try:
        assert wait_for_port(port, 120), (tmp_path / "master.log").read_text()[-2000:]
        processes.append(spark_class("org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                                     "--host", "127.0.0.1", "--cores", "2", "--memory", "1g",
                                     "--webui-port", str(worker_ui), log=tmp_path / "worker.log"))
        yield f"spark://127.0.0.1:{port}", tmp_path
    finally:
        for p in reversed(processes):
            os.killpg(p.pid, signal.SIGTERM)
        for p in processes:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    assert all(p.poll() is not None for p in processes)


def test_explores_on_a_standalone_master_and_worker(standalone):
    master, tmp_path = standalone
    out = tmp_path / "result.json"
    # Run from another directory: the executors get the project as the zip the engine ships.
    proc = subprocess.run(
        [sys.executable, "-m", "rabbitproof", "explore", "manual", "--model", "tests.toy_model", "--engine", "spark",
         "--master", master, "--json-file", str(out), "--no-progress"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    config = toy.get("manual")
    local = LocalEngine().explore(toy, config, [toy.REGISTRY[n] for n in config.properties], action_types=toy.ACTIONS)
    assert result["engine"] == "spark" and result["complete"]
    assert (result["distinct_states"], result["depth"], result["transitions"]) == (
        local.distinct_states, local.depth, local.transitions) == (157, 14, result["transitions"])
    assert [(p["name"], p["verdict"]) for p in result["properties"]] == [(p.name, p.verdict) for p in local.properties]
    # The application ran on the worker, whose executor fetched the project's code.
    assert list((tmp_path / "work").glob("app-*/*/rabbitproof-code-*.zip"))
