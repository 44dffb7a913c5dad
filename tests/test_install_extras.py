"""The lean install: what `pip install .` brings runs check, trace, list, explore, conformance and broker
without any extra; a subcommand that needs a missing extra says which one in one line, exit 2
(rabbitproof/extras.py). The extras' modules are made unimportable in a process of its own."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from rabbitproof import __version__
from rabbitproof.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
# Every module the extras bring, and what they bring in turn, made unimportable.
BLOCKED = sorted({m for modules in EXTRAS.values() for m in modules} | {"py4j", "numpy", "_pytest"})
RUN = ("import sys\n"
       "class Absent:\n"
       "    def find_spec(self, name, path=None, target=None):\n"
       f"        if name.partition('.')[0] in {BLOCKED!r}:\n"
       "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
       "sys.meta_path.insert(0, Absent())\n"
       "from rabbitproof.cli import main\n"
       "sys.exit(main(sys.argv[1:]))\n")


def rabbitproof(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_the_core_dependencies_bring_no_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {d.split(">")[0].split("<")[0].split("[")[0].strip().lower() for d in project["dependencies"]}
    extras = {d.split(">")[0].split("<")[0].strip().lower() for ds in project["optional-dependencies"].values()
              for d in ds}
    assert core == {"z3-solver", "pamqp", "hypothesis", "rich"}
    assert {"spark", "proofs", "dev"} <= set(project["optional-dependencies"]) and not core & extras


def test_the_core_subcommands_run_without_any_extra(tmp_path, impl_broker_module):
    assert rabbitproof("list").returncode == 0
    explored = rabbitproof("explore", "ack_basics", "--no-progress")
    assert explored.returncode == 0 and "as pinned for ack_basics" in explored.stdout, explored.stderr
    checked = rabbitproof("check", str(ROOT / "examples" / "work-queue.toml"), "--no-progress", cwd=tmp_path)
    assert checked.returncode in (0, 1) and "lost" in checked.stdout, checked.stderr
    traced = rabbitproof("trace", str(ROOT / "examples" / "recordings" / "requeue-and-ack.json"))
    assert traced.returncode == 0 and traced.stdout.startswith("accepted"), traced.stderr
    assert rabbitproof("broker", "--help").returncode == 0
    b = impl_broker_module
    judged = rabbitproof("conformance", f"amqp://{b.user}:{b.password}@{b.host}:{b.port}/", "--programs", "3")
    assert judged.returncode == 0, judged.stdout + judged.stderr


def test_the_spark_engine_without_its_extra_is_refused_in_one_line():
    done = rabbitproof("explore", "ack_basics", "--engine", "spark", "--no-progress")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "pip install 'rabbitproof[spark]'" in done.stderr, done.stderr


def test_crosshair_without_its_extra_is_refused_in_one_line():
    done = rabbitproof("verify", "--part", "crosshair", "--no-progress")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "pip install 'rabbitproof[proofs]'" in done.stderr, done.stderr


def test_version():
    done = subprocess.run([sys.executable, "-m", "rabbitproof", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"rabbitproof {__version__}"
