"""The compiled spec: an optional speed-up, the spec's hot modules and those of `rabbitproof check`'s
search compiled with mypyc. The pure-Python code stays the reference; the compiled one must give the same
counts (tests/test_compiled.py compares them, `rabbitproof bench compiled` and `rabbitproof bench check-cost
--fast` measure both).

- ``build`` (`make fast`): copies spec/ into .build/fast/rabbitproof/spec and the modules of ``CHECK_MODULES``
  into .build/fast/rabbitproof/check, compiles ``MODULES`` and ``CHECK_MODULES`` there (mypy's type check
  first: a module whose types do not check is not compiled), and records the hash of every file it copied.
- ``activate`` (rabbitproof/__init__.py, before anything imports the spec): with RABBITPROOF_FAST=1 in
  the environment (or the path of another build), makes the build's copy `rabbitproof.spec`, and its compiled
  modules those of `rabbitproof.check` (substitute.py; the package's other modules are found where they are),
  in this process and those it starts (Spark's Python workers). It first checks that the build is of
  spec/ and of those check modules as they are now, and of this Python: a build of other sources is
  refused, naming the files that differ, never used silently.

``MODULES`` are those where a search spends its time (the state, the broker, the clients, the network,
the disk, the faults, the step function, the properties and the symmetry's renamings); ``CHECK_MODULES``
those of `check`'s own search (the observer, the canonical tags, the fused steps, the spent budgets and
the sorted symmetry: `rabbitproof bench check-cost` profiles). The classes other modules subclass
(``spec.actions``'s, ``spec.properties_api``'s) stay interpreted, and so does rabbitproof.check.questions
(its machine and its actions subclass the spec's): a compiled class cannot be subclassed by interpreted
code, nor subclass it.
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
CHECK_SOURCES = ROOT / "rabbitproof" / "check"
BUILD = ROOT / ".build" / "fast"
ENV = "RABBITPROOF_FAST"
MODULES = ("state", "frames", "network", "client", "broker", "storage", "faults", "machine", "properties", "symmetry")
CHECK_MODULES = ("observer", "cycles", "set_up_at_once", "pure_reads", "disk_at_once", "spent_budgets",
                 "interchangeable", "own_connection", "after_crash")
RECORD = "built-from.json"      # in the build: the hash of each source file, the Python it was built for

# mypy's settings for the compiled modules: they are type-checked, the modules they import only read.
MYPY_INI = "[mypy]\nfollow_imports = silent\n"


class CompiledSpecError(Exception):
    """The compiled spec cannot be built, or cannot be used as it is."""


def python_tag() -> str:
    """The interpreter a build is for: its compiled modules load in no other."""
    return f"{sys.implementation.cache_tag} {importlib.machinery.EXTENSION_SUFFIXES[0]}"


def source_hashes(spec_dir: Path = SOURCES, check_dir: Path = CHECK_SOURCES) -> dict[str, str]:
    """The sha256 of every Python file of the spec and of each of ``CHECK_MODULES``, by their paths in
    the checkout (``spec/broker.py``, ``rabbitproof/check/observer.py``)."""
    files = [(f"spec/{p.name}", p) for p in sorted(spec_dir.glob("*.py"))]
    files += [(f"rabbitproof/check/{m}.py", check_dir / f"{m}.py") for m in CHECK_MODULES]
    return {name: hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else "missing" for name, p in files}


def tree_for(spec_dir: Path) -> Path:
    """The folder mypy and mypyc run in: ``spec_dir`` is its ``rabbitproof/spec``, beside an empty
    ``rabbitproof/__init__.py``, so the modules are compiled under their installed names."""
    tree = spec_dir.parents[1]
    if spec_dir.parent.name != "rabbitproof" or spec_dir.name != "spec":
        raise CompiledSpecError(f"{spec_dir} is not a copy of the spec at rabbitproof/spec")
    (spec_dir.parent / "__init__.py").touch()
    return tree


def copy_sources(tree: Path, spec_dir: Path = SOURCES, check_dir: Path = CHECK_SOURCES) -> Path:
    """Copy the spec into ``tree``/rabbitproof/spec and ``CHECK_MODULES`` of ``check_dir`` (with the
    package's __init__.py) into ``tree``/rabbitproof/check, as the build compiles them; the spec's copy."""
    spec_copy = tree / "rabbitproof" / "spec"
    shutil.copytree(spec_dir, spec_copy, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    check_copy = tree / "rabbitproof" / "check"
    check_copy.mkdir(parents=True)
    for name in ("__init__",) + CHECK_MODULES:
        shutil.copy(check_dir / f"{name}.py", check_copy / f"{name}.py")
    return spec_copy


def to_compile(tree: Path) -> list[str]:
    """The files of ``tree`` mypy and mypyc take: ``MODULES`` of its spec, and ``CHECK_MODULES`` when it
    holds a copy of them (``copy_sources``)."""
    files = [f"rabbitproof/spec/{m}.py" for m in MODULES]
    if (tree / "rabbitproof" / "check").is_dir():
        files += [f"rabbitproof/check/{m}.py" for m in CHECK_MODULES]
    return files


def type_check(spec_dir: Path, python: str = sys.executable) -> None:
    """mypy on the modules to compile, as mypyc will see them; CompiledSpecError with its report if
    they do not check."""
    tree = tree_for(spec_dir)
    config = tree / "mypy.ini"
    config.write_text(MYPY_INI)
    done = subprocess.run([python, "-m", "mypy", "--config-file", str(config), "--cache-dir",
                           str(tree / ".mypy_cache"), *to_compile(tree)],
                          cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        raise CompiledSpecError("the modules to compile do not type-check (mypy):\n" + done.stdout + done.stderr)


def build(out: Path = BUILD, spec_dir: Path = SOURCES, python: str = sys.executable,
          check_dir: Path = CHECK_SOURCES) -> Path:
    """Compile ``MODULES`` of ``spec_dir`` and ``CHECK_MODULES`` of ``check_dir`` into ``out`` (made afresh;
    the old build is replaced only once the new one is complete). The build directory's path."""
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    copied = copy_sources(partial, spec_dir, check_dir)
    type_check(copied, python)
    done = subprocess.run([python, "-m", "mypyc", "--config-file", "mypy.ini", *to_compile(partial)],
                          cwd=partial, capture_output=True, text=True)
    if done.returncode != 0:
        raise CompiledSpecError("mypyc failed:\n" + (done.stdout + done.stderr)[-4000:])
    shutil.rmtree(partial / "build", ignore_errors=True)        # the generated C and the object files
    shutil.rmtree(partial / ".mypy_cache", ignore_errors=True)
    missing = [f"spec/{m}" for m in MODULES if not list(copied.glob(f"{m}.*.so"))]
    missing += [f"rabbitproof/check/{m}" for m in CHECK_MODULES if not list(partial.glob(f"rabbitproof/check/{m}.*.so"))]
    if missing:
        raise CompiledSpecError(f"mypyc made no module for {', '.join(missing)}")
    (partial / RECORD).write_text(json.dumps({"python": python_tag(),
                                              "sources": source_hashes(copied, partial / "rabbitproof" / "check")},
                                             indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out


def why_not_usable(out: Path = BUILD, spec_dir: Path = SOURCES, check_dir: Path = CHECK_SOURCES) -> str | None:
    """Why the build in ``out`` cannot stand for the spec in ``spec_dir`` and the check modules in
    ``check_dir`` now, or None when it can."""
    record = out / RECORD
    if not record.exists():
        return f"there is no compiled spec in {out}"
    made = json.loads(record.read_text())
    if made.get("python") != python_tag():
        return f"the compiled spec in {out} was built for {made.get('python')}, not for this Python ({python_tag()})"
    now, then = source_hashes(spec_dir, check_dir), made.get("sources", {})
    changed = sorted(name for name in set(now) | set(then) if now.get(name) != then.get(name))
    if changed:
        return f"the compiled spec in {out} was built from other sources: {', '.join(changed)} changed since"
    return None


def chosen(value: str) -> Path:
    """The build RABBITPROOF_FAST names: 1 (or yes, true) for .build/fast, else the path of a build."""
    return BUILD if value.strip().lower() in ("1", "yes", "true") else Path(value).resolve()


def activate(out: Path = BUILD, spec_dir: Path = SOURCES, check_dir: Path = CHECK_SOURCES) -> None:
    """Use the compiled spec in ``out`` from now on, in this process and the ones it starts; or
    CompiledSpecError saying why it cannot be used (stale, missing, another Python, the spec already
    imported). rabbitproof.check is found in the build first (its compiled modules), then in ``check_dir``."""
    problem = why_not_usable(out, spec_dir, check_dir)
    if problem:
        raise CompiledSpecError(f"{ENV} is set, but {problem}: run `make fast`, or unset {ENV} "
                                f"to use the pure-Python spec")
    try:
        substitute("spec", out / "rabbitproof" / "spec")
        substitute("check", out / "rabbitproof" / "check", also=(check_dir,))
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
    print(f"compiled spec/{{{','.join(MODULES)}}}.py and rabbitproof/check/{{{','.join(CHECK_MODULES)}}}.py "
          f"into {out.relative_to(ROOT)}; "
          f"{ENV}=1 uses it (make explore FAST=1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
