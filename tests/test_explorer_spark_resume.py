"""A long Spark run survives: the driver is killed (SIGKILL) partway through a checkpointed run, and
``--resume`` finishes it with the local engine's counts, verdicts and trace lengths."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rabbitproof.spark_check.engine import LocalEngine

from tests import toy_model as toy

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
RUN = [sys.executable, "-m", "rabbitproof", "explore", "manual", "--bound", "messages=3", "--model", "tests.toy_model",
       "--engine", "spark", "--master", "local[2]", "--no-progress"]


def recorded_level(checkpoint: Path) -> int:
    try:
        return json.loads((checkpoint / "progress.json").read_text())["level"]
    except (OSError, ValueError):
        return -1


def test_a_run_killed_partway_resumes_to_the_same_result(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    driver = subprocess.Popen([*RUN, "--checkpoint", str(checkpoint)], cwd=ROOT, env=ENV, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    try:
        while recorded_level(checkpoint) < 6 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)       # the driver, its JVM and its Python workers
        driver.wait()
    killed_at = recorded_level(checkpoint)
    assert 6 <= killed_at < 19, "the run was not killed partway (depth of the whole run: 20 levels)"

    out = tmp_path / "resumed.json"
    resumed = subprocess.run([*RUN, "--resume", str(checkpoint), "--json-file", str(out)], cwd=ROOT, env=ENV,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(out.read_text())

    config = toy.get("manual").override({"messages": "3"})
    local = LocalEngine().explore(toy, config, [toy.REGISTRY[n] for n in config.properties], action_types=toy.ACTIONS)
    assert (result["distinct_states"], result["depth"], result["transitions"]) == (
        local.distinct_states, local.depth, local.transitions) == (6**3 + 11**3, 20, result["transitions"])
    assert result["coverage"] == local.coverage and result["complete"]
    assert [(p["name"], p["verdict"], len((p["trace"] or {}).get("steps", []))) for p in result["properties"]] == [
        (p.name, p.verdict, len(p.trace.steps) if p.trace else 0) for p in local.properties]
    progress = json.loads((checkpoint / "progress.json").read_text())
    assert (progress["level"], progress["finished"]) == (19, True)

    # Resuming a finished run rebuilds the same result without expanding anything again.
    again = tmp_path / "again.json"
    rerun = subprocess.run([*RUN, "--resume", str(checkpoint), "--json-file", str(again)], cwd=ROOT, env=ENV,
                           capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    repeated = json.loads(again.read_text())
    assert {k: repeated[k] for k in ("distinct_states", "depth", "transitions", "coverage", "properties")} == {
        k: result[k] for k in ("distinct_states", "depth", "transitions", "coverage", "properties")}
