"""The compiled spec: an optional speed-up, the spec's hot modules compiled with mypyc. The pure-Python
spec stays the reference; the compiled one must give the same counts (tests/test_compiled.py compares
them, `rabbitproof bench compiled` measures both).

- ``build`` (`make fast`): copies spec/ into .build/fast/rabbitproof/spec, compiles the modules of ``MODULES`` there
  (mypy's type check first: a module whose types do not check is not compiled), and records the hash of
  every file it copied.
- ``activate`` (rabbitproof/__init__.py, before anything imports the spec): with RABBITPROOF_FAST=1 in
  the environment (or the path of another build), makes the build's copy `rabbitproof.spec` (substitute.py),
  in this process and those it starts (Spark's Python workers). It first checks that the build is of spec/ as it is now and of this
  Python: a build of other sources is refused, naming the files that differ, never used silently.

``MODULES`` are those where a search spends its time (the state, the broker, the clients, the network,
the disk, the faults, the step function and the properties). The classes other modules subclass
(``spec.actions``'s, ``spec.properties_api``'s) stay interpreted: a compiled class cannot be subclassed
by interpreted code.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rabbitproof.substitute import SubstituteError, substitute

ROOT = Path(__file__).resolve().parents[1]      # the checkout: the folder holding spec/ and rabbitproof/
SOURCES = ROOT / "spec"
BUILD = ROOT / ".build" / "fast"
ENV = "RABBITPROOF_FAST"
MODULES = ("state", "frames", "network", "client", "broker", "storage", "faults", "machine", "properties")
RECORD = "built-from.json"      # in the build: the hash of each source file, the Python it was built for

# mypy's settings for the compiled modules: they are type-checked, the modules they import only read.
MYPY_INI = "[mypy]\nfollow_imports = silent\n"


class CompiledSpecError(Exception):
    """The compiled spec cannot be built, or cannot be used as it is."""


def python_tag() -> str:
    """The interpreter a build is for: its compiled modules load in no other."""
    return f"{sys.implementation.cache_tag} {importlib.machinery.EXTENSION_SUFFIXES[0]}"


def source_hashes(spec_dir: Path = SOURCES) -> dict[str, str]:
    """The sha256 of every Python file of the spec, by name."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(spec_dir.glob("*.py"))}


def tree_for(spec_dir: Path) -> Path:
    """The folder mypy and mypyc run in: ``spec_dir`` is its ``rabbitproof/spec``, beside an empty
    ``rabbitproof/__init__.py``, so the modules are compiled under their installed names."""
    tree = spec_dir.parents[1]
    if spec_dir.parent.name != "rabbitproof" or spec_dir.name != "spec":
        raise CompiledSpecError(f"{spec_dir} is not a copy of the spec at rabbitproof/spec")
    (spec_dir.parent / "__init__.py").touch()
    return tree


def type_check(spec_dir: Path, python: str = sys.executable) -> None:
    """mypy on the modules to compile, as mypyc will see them; CompiledSpecError with its report if
    they do not check."""
    tree = tree_for(spec_dir)
    config = tree / "mypy.ini"
    config.write_text(MYPY_INI)
    done = subprocess.run([python, "-m", "mypy", "--config-file", str(config), "--cache-dir",
                           str(tree / ".mypy_cache"), *(f"rabbitproof/spec/{m}.py" for m in MODULES)],
                          cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        raise CompiledSpecError("the modules to compile do not type-check (mypy):\n" + done.stdout + done.stderr)


def build(out: Path = BUILD, spec_dir: Path = SOURCES, python: str = sys.executable) -> Path:
    """Compile ``MODULES`` of ``spec_dir`` into ``out`` (made afresh; the old build is replaced only
    once the new one is complete). The build directory's path."""
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    copied = partial / "rabbitproof" / "spec"
    shutil.copytree(spec_dir, copied, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    type_check(copied, python)
    done = subprocess.run([python, "-m", "mypyc", "--config-file", "mypy.ini", *(f"rabbitproof/spec/{m}.py" for m in MODULES)],
                          cwd=partial, capture_output=True, text=True)
    if done.returncode != 0:
        raise CompiledSpecError("mypyc failed:\n" + (done.stdout + done.stderr)[-4000:])
    shutil.rmtree(partial / "build", ignore_errors=True)        # the generated C and the object files
    shutil.rmtree(partial / ".mypy_cache", ignore_errors=True)
    missing = [m for m in MODULES if not list(copied.glob(f"{m}.*.so"))]
    if missing:
        raise CompiledSpecError(f"mypyc made no module for {', '.join(missing)}")
    (partial / RECORD).write_text(json.dumps({"python": python_tag(), "sources": source_hashes(copied)},
                                             indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out


def why_not_usable(out: Path = BUILD, spec_dir: Path = SOURCES) -> str | None:
    """Why the build in ``out`` cannot stand for the spec in ``spec_dir`` now, or None when it can."""
    record = out / RECORD
    if not record.exists():
        return f"there is no compiled spec in {out}"
    made = json.loads(record.read_text())
    if made.get("python") != python_tag():
        return f"the compiled spec in {out} was built for {made.get('python')}, not for this Python ({python_tag()})"
    now, then = source_hashes(spec_dir), made.get("sources", {})
    changed = sorted(name for name in set(now) | set(then) if now.get(name) != then.get(name))
    if changed:
        return f"the compiled spec in {out} was built from other sources: spec/{', spec/'.join(changed)} changed since"
    return None


def chosen(value: str) -> Path:
    """The build RABBITPROOF_FAST names: 1 (or yes, true) for .build/fast, else the path of a build."""
    return BUILD if value.strip().lower() in ("1", "yes", "true") else Path(value).resolve()


def activate(out: Path = BUILD, spec_dir: Path = SOURCES) -> None:
    """Use the compiled spec in ``out`` from now on, in this process and the ones it starts; or
    CompiledSpecError saying why it cannot be used (stale, missing, another Python, the spec already
    imported)."""
    problem = why_not_usable(out, spec_dir)
    if problem:
        raise CompiledSpecError(f"{ENV} is set, but {problem}: run `make fast`, or unset {ENV} "
                                f"to use the pure-Python spec")
    try:
        substitute("spec", out / "rabbitproof" / "spec")
    except SubstituteError:
        raise CompiledSpecError(f"{ENV} is set, but the pure-Python spec was imported first") from None
    if str(out) not in sys.path:        # mypyc's shared library of the compiled modules is a top-level module
        sys.path.insert(0, str(out))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(out) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(out)] + paths)


def in_use() -> bool:
    """Whether the spec this process imported is a compiled one."""
    from rabbitproof.spec import machine
    return not (machine.__file__ or "").endswith(".py")


def main() -> int:
    """`python -m rabbitproof.compiled`: build (`make fast`); exit 1 with the reason when it fails."""
    try:
        out = build()
    except CompiledSpecError as e:
        print(f"rabbitproof: {e}", file=sys.stderr)
        return 1
    print(f"compiled spec/{{{','.join(MODULES)}}}.py into {out.relative_to(ROOT)}; "
          f"{ENV}=1 uses it (make explore FAST=1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
