"""The compiled spec (rabbitproof/compiled.py): it type-checks, it is refused when it is not of the spec
as it is now, and built for real it gives the pure-Python spec's counts and answers."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rabbitproof import compiled


def run(args: list[str], fast: str | None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m rabbitproof ARGS` in a process of its own, RABBITPROOF_FAST set to ``fast`` (or unset)."""
    env = {k: v for k, v in os.environ.items() if k != compiled.ENV}
    if fast is not None:
        env[compiled.ENV] = fast
    return subprocess.run([sys.executable, "-m", "rabbitproof", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def fake_build(tmp_path: Path) -> tuple[Path, Path]:
    """A spec's sources and a build directory recording them, with no compiled module in it (enough for
    the checks made before a build is used)."""
    sources = tmp_path / "src" / "spec"
    shutil.copytree(compiled.SOURCES, sources, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "fast"
    out.mkdir()
    (out / compiled.RECORD).write_text(json.dumps({"python": compiled.python_tag(),
                                                   "sources": compiled.source_hashes(sources)}))
    return sources, out


def test_a_build_of_the_sources_as_they_are_is_usable(tmp_path: Path) -> None:
    sources, out = fake_build(tmp_path)
    assert compiled.why_not_usable(out, sources) is None


def test_a_build_of_other_sources_is_refused_naming_the_files_that_changed(tmp_path: Path) -> None:
    sources, out = fake_build(tmp_path)
    broker = sources / "broker.py"
    broker.write_text(broker.read_text() + "\n# changed\n")
    (sources / "extra.py").write_text("")
    problem = compiled.why_not_usable(out, sources)
    assert problem is not None and "spec/broker.py" in problem and "spec/extra.py" in problem
    assert "spec/machine.py" not in problem


def test_a_build_for_another_python_is_refused(tmp_path: Path) -> None:
    sources, out = fake_build(tmp_path)
    record = json.loads((out / compiled.RECORD).read_text())
    record["python"] = "cpython-39 .cpython-39-x86_64-linux-gnu.so"
    (out / compiled.RECORD).write_text(json.dumps(record))
    problem = compiled.why_not_usable(out, sources)
    assert problem is not None and "cpython-39" in problem


def test_the_command_refuses_a_missing_or_stale_build_before_any_work(tmp_path: Path) -> None:
    done = run(["explore", "ack_basics"], str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert done.stderr.startswith("rabbitproof: RABBITPROOF_FAST is set, but there is no compiled spec in")
    assert "make fast" in done.stderr and "explored" not in done.stdout
    _, out = fake_build(tmp_path)                   # recorded from a copy: the same hashes as spec/ now
    record = json.loads((out / compiled.RECORD).read_text())
    record["sources"]["state.py"] = "0" * 64
    (out / compiled.RECORD).write_text(json.dumps(record))
    done = run(["explore", "ack_basics"], str(out))
    assert done.returncode == 2 and "spec/state.py changed since" in done.stderr


def test_the_modules_to_compile_type_check(tmp_path: Path) -> None:
    """mypy on the compiled modules as the build sees them: an edit that breaks their types fails
    here, not at the next `make fast`."""
    copy = tmp_path / "rabbitproof" / "spec"
    shutil.copytree(compiled.SOURCES, copy, ignore=shutil.ignore_patterns("__pycache__"))
    compiled.type_check(copy)


def test_a_type_error_stops_the_build_with_mypys_report(tmp_path: Path) -> None:
    copy = tmp_path / "rabbitproof" / "spec"
    shutil.copytree(compiled.SOURCES, copy, ignore=shutil.ignore_patterns("__pycache__"))
    network = copy / "network.py"
    network.write_text(network.read_text() + "\n\ndef broken() -> int:\n    return 'not an int'\n")
    with pytest.raises(compiled.CompiledSpecError, match=r"do not type-check(.|\n)*network\.py"):
        compiled.build(tmp_path / "fast", copy)
    assert not (tmp_path / "fast").exists()


# The configurations compared: plain, crash and fsyncs, transactions, two interchangeable consumers under
# both reductions, and a check example that runs the observer, its symmetry and its fused steps.
EXPLORED = (["explore", "crash", "--reduce", "none"], ["explore", "tx_ack", "--reduce", "none"],
            ["explore", "twin_consumers", "--reduce", "por,symmetry"],
            ["explore", "confirm_failures", "--reduce", "none", "--max-states", "60000"])
CHECKED = (["check", "examples/flaky-hosts.toml"], ["check", "examples/requeue-on-failure.toml"])


def established(path: Path) -> dict:
    result = json.loads(path.read_text())
    keep = {k: result[k] for k in ("distinct_states", "depth", "transitions", "deadlocks", "coverage")
            if k in result}
    keep["verdicts"] = {p["name"]: p["verdict"] for p in result.get("properties", ())}
    keep["answers"] = {a["key"]: a["answer"] for a in result.get("answers", ())}
    return keep


def test_the_compiled_spec_gives_the_pure_specs_counts_and_answers(tmp_path: Path) -> None:
    out = compiled.build(tmp_path / "fast")
    assert sorted(p.name.split(".")[0] for p in (out / "rabbitproof" / "spec").glob("*.so")) == sorted(compiled.MODULES)
    root = compiled.ROOT
    for n, args in enumerate(EXPLORED + CHECKED):
        facts = []
        for fast in (None, str(out)):
            target = tmp_path / f"{n}-{'fast' if fast else 'pure'}.json"
            if args[0] == "explore":
                done = run(args + ["--no-progress", "--json-file", str(target)], fast, cwd=root)
            else:
                done = run(args + ["--json"], fast, cwd=root)
                target.write_text(done.stdout)
            assert done.returncode in (0, 1, 3), done.stderr[-2000:]       # 3: a search stopped by its state cap
            facts.append({**established(target), "exit code": done.returncode})
        assert facts[0] == facts[1], args
        assert facts[0]["distinct_states"] > 1000
    done = run(["verify", "--part", "crosshair"], str(out))         # CrossHair reads the Python source
    assert done.returncode == 2 and "unset RABBITPROOF_FAST" in done.stderr
    probe = "import rabbitproof, rabbitproof.compiled as c; print(c.in_use())"
    for fast, expected in ((None, "False"), (str(out), "True")):
        env = {k: v for k, v in os.environ.items() if k != compiled.ENV} | ({compiled.ENV: fast} if fast else {})
        assert subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                              text=True).stdout.strip() == expected
