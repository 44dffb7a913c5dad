"""The compiled spec (rabbitproof/compiled.py): it type-checks, it is refused when it is not of the spec
and of check's compiled modules as they are now, and built for real it gives the pure-Python code's
counts and answers."""
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


def fake_build(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Copies of the spec and of rabbitproof/check, and a build directory recording them, with no compiled
    module in it (enough for the checks made before a build is used)."""
    sources = tmp_path / "src" / "spec"
    shutil.copytree(compiled.SOURCES, sources, ignore=shutil.ignore_patterns("__pycache__"))
    check = tmp_path / "src" / "check"
    shutil.copytree(compiled.CHECK_SOURCES, check, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "fast"
    out.mkdir()
    (out / compiled.RECORD).write_text(json.dumps({"python": compiled.python_tag(),
                                                   "sources": compiled.source_hashes(sources, check)}))
    return sources, check, out


def test_a_build_of_the_sources_as_they_are_is_usable(tmp_path: Path) -> None:
    sources, check, out = fake_build(tmp_path)
    assert compiled.why_not_usable(out, sources, check) is None


def test_a_build_of_other_sources_is_refused_naming_the_files_that_changed(tmp_path: Path) -> None:
    sources, check, out = fake_build(tmp_path)
    broker = sources / "broker.py"
    broker.write_text(broker.read_text() + "\n# changed\n")
    (sources / "extra.py").write_text("")
    problem = compiled.why_not_usable(out, sources, check)
    assert problem is not None and "spec/broker.py" in problem and "spec/extra.py" in problem
    assert "spec/machine.py" not in problem and "rabbitproof/check" not in problem


def test_a_build_of_other_check_modules_is_refused_but_not_for_a_module_it_does_not_compile(tmp_path: Path) -> None:
    sources, check, out = fake_build(tmp_path)
    assert "report" not in compiled.CHECK_MODULES
    report = check / "report.py"                    # interpreted: found in the checkout, never in the build
    report.write_text(report.read_text() + "\n# changed\n")
    assert compiled.why_not_usable(out, sources, check) is None
    observer = check / "observer.py"
    observer.write_text(observer.read_text() + "\n# changed\n")
    problem = compiled.why_not_usable(out, sources, check)
    assert problem is not None and problem.endswith("rabbitproof/check/observer.py changed since")
    observer.unlink()
    problem = compiled.why_not_usable(out, sources, check)
    assert problem is not None and "rabbitproof/check/observer.py changed since" in problem


def test_a_build_for_another_python_is_refused(tmp_path: Path) -> None:
    sources, check, out = fake_build(tmp_path)
    record = json.loads((out / compiled.RECORD).read_text())
    record["python"] = "cpython-39 .cpython-39-x86_64-linux-gnu.so"
    (out / compiled.RECORD).write_text(json.dumps(record))
    problem = compiled.why_not_usable(out, sources, check)
    assert problem is not None and "cpython-39" in problem


def test_the_command_refuses_a_missing_or_stale_build_before_any_work(tmp_path: Path) -> None:
    done = run(["explore", "ack_basics"], str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert done.stderr.startswith("rabbitproof: RABBITPROOF_FAST is set, but there is no compiled spec in")
    assert "make fast" in done.stderr and "explored" not in done.stdout
    _, _, out = fake_build(tmp_path)                # recorded from copies: the same hashes as the checkout's now
    record = json.loads((out / compiled.RECORD).read_text())
    record["sources"]["spec/state.py"] = "0" * 64
    (out / compiled.RECORD).write_text(json.dumps(record))
    done = run(["explore", "ack_basics"], str(out))
    assert done.returncode == 2 and "spec/state.py changed since" in done.stderr
    record["sources"]["spec/state.py"] = compiled.source_hashes()["spec/state.py"]
    record["sources"]["rabbitproof/check/cycles.py"] = "0" * 64
    (out / compiled.RECORD).write_text(json.dumps(record))
    done = run(["check", "examples/auto-ack.toml"], str(out), cwd=compiled.ROOT)
    assert done.returncode == 2 and done.stderr.strip().endswith("unset RABBITPROOF_FAST to use the pure-Python spec")
    assert "rabbitproof/check/cycles.py changed since" in done.stderr and not done.stdout


def test_the_modules_to_compile_type_check(tmp_path: Path) -> None:
    """mypy on the compiled modules as the build sees them: an edit that breaks their types fails
    here, not at the next `make fast`."""
    copy = compiled.copy_sources(tmp_path)
    assert compiled.to_compile(tmp_path)[-len(compiled.CHECK_MODULES):] == [
        f"rabbitproof/check/{m}.py" for m in compiled.CHECK_MODULES]
    compiled.type_check(copy)


@pytest.mark.parametrize("folder, module", [("spec", "network"), ("check", "observer")])
def test_a_type_error_stops_the_build_with_mypys_report(tmp_path: Path, folder: str, module: str) -> None:
    copy = compiled.copy_sources(tmp_path / "src")
    broken = tmp_path / "src" / "rabbitproof" / folder / f"{module}.py"
    broken.write_text(broken.read_text() + "\n\ndef broken() -> int:\n    return 'not an int'\n")
    with pytest.raises(compiled.CompiledSpecError, match=rf"do not type-check(.|\n)*{module}\.py"):
        compiled.build(tmp_path / "fast", copy, check_dir=tmp_path / "src" / "rabbitproof" / "check")
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
    assert sorted(p.name.split(".")[0] for p in (out / "rabbitproof" / "check").glob("*.so")) == \
        sorted(compiled.CHECK_MODULES)
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
    probe = ("import rabbitproof, rabbitproof.compiled as c, rabbitproof.check.observer as o, "
             "rabbitproof.check.answers as a; print(c.in_use(), o.__file__.endswith('.py'), a.__file__)")
    for fast, expected in ((None, "False True"), (str(out), "True False")):
        env = {k: v for k, v in os.environ.items() if k != compiled.ENV} | ({compiled.ENV: fast} if fast else {})
        printed = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True).stdout.split()
        # check's interpreted modules are the checkout's own, compiled or not
        assert " ".join(printed[:2]) == expected and printed[2] == str(compiled.CHECK_SOURCES / "answers.py")
