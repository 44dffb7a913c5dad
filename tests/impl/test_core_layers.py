"""impl/core's modules call one way: each imports only modules below it, at the top of the file.

Lower modules reach the ones above them only through interfaces they define (queues.Subscriber,
broker.Client, channel.Link) and callbacks; and only queues.py changes a queue's ready messages.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import rabbitproof.impl.core as core_package

CORE = Path(core_package.__file__).parent

# Bottom to top; a module may import only modules of earlier layers.
LAYERS = [
    {"errors", "frames", "routing", "names", "prefetch", "journal", "timers"},
    {"messages", "queue_arguments", "ttl"},
    {"limits"},
    {"queues"},
    {"exchanges"},
    {"broker"},
    {"channel"},
    {"connection"},
    {"__init__"},
]
LAYER = {name: n for n, names in enumerate(LAYERS) for name in names}


def core_imports(tree: ast.Module) -> list[tuple[str, ast.stmt]]:
    """(imported impl.core module, statement) for every import anywhere in the file."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "rabbitproof.impl.core":
                found += [(alias.name, node) for alias in node.names]
            elif node.module.startswith("rabbitproof.impl.core."):
                found.append((node.module.split(".")[3], node))
        elif isinstance(node, ast.Import):
            found += [(a.name.split(".")[3], node) for a in node.names if a.name.startswith("rabbitproof.impl.core.")]
    return found


def modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text(), str(path)) for path in sorted(CORE.glob("*.py"))}


def test_every_core_module_has_a_layer():
    assert set(modules()) == set(LAYER), "a new module in impl/core needs its place in LAYERS"


def test_core_modules_import_only_modules_below_them():
    upward = []
    for name, tree in modules().items():
        for target, node in core_imports(tree):
            if name == "__init__":
                continue                # the package re-exports its public classes
            if target not in LAYER or LAYER[target] >= LAYER[name]:
                upward.append(f"{name}.py line {node.lineno} imports {target}")
    assert upward == []


def test_core_imports_are_at_module_level_and_not_for_type_checking_only():
    hidden = []
    for name, tree in modules().items():
        top = set(map(id, tree.body))
        for target, node in core_imports(tree):
            if id(node) not in top:
                hidden.append(f"{name}.py line {node.lineno} imports {target} inside a block")
    assert hidden == []


def test_only_queues_changes_ready_messages():
    mutation = re.compile(r"\.ready(\.(append|requeue|pop_head|clear)\(| =)")
    outside = [f"{path.name}:{n}" for path in CORE.glob("*.py") if path.name != "queues.py"
               for n, line in enumerate(path.read_text().splitlines(), 1) if mutation.search(line)]
    assert outside == []
