"""The Spark session the Spark engine runs in: the master checked before any work, the settings the
level-synchronous BFS relies on, and the project's code shipped to executors.

``--master`` takes what ``spark-submit --master`` takes: ``local``, ``local[N]``, ``local[*]``,
``spark://HOST:PORT`` (a standalone cluster; several masters separated by commas), ``yarn`` or
``k8s://URL``. Without one, a run under ``spark-submit`` uses spark-submit's master and a plain
`rabbitproof explore` uses ``local[*]``. Executors get the code as a zip of the packages the model,
its configuration and its properties live in (``SparkContext.addPyFile``), so a cluster needs only
Python 3.11+ with pyspark and pyarrow, not a copy of the project.
"""
from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import re
import socket
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterable

DEFAULT_MASTER = "local[*]"
_LOCAL = re.compile(r"^local(\[(\*|[1-9][0-9]*)(,[0-9]+)?\])?$")
_STANDALONE = re.compile(r"^spark://([^/:,]+):([0-9]{1,5})(,[^/:,]+:[0-9]{1,5})*$")


def under_spark_submit() -> bool:
    """Whether this driver was started by spark-submit (which then owns the master and the settings)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def check_master(master: str | None) -> None:
    """ValueError (one line) for a master URL that is malformed, or a standalone master that does not
    answer on its port: said before any work starts, not after a minute of retries."""
    if master is None:
        return
    if _LOCAL.match(master) or master == "yarn" or master.startswith("k8s://"):
        return
    m = _STANDALONE.match(master)
    if not m:
        raise ValueError(f"--master {master!r} is not a Spark master URL "
                         "(local[N], local[*], spark://HOST:PORT, yarn, k8s://URL)")
    for hostport in master[len("spark://"):].split(","):
        host, _, port = hostport.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=5):
                return
        except OSError as e:
            last = f"{host}:{port}: {e.strerror or e}"
    raise ValueError(f"the Spark master {master} cannot be reached ({last})")


def is_local(master: str | None) -> bool:
    """Whether executors run in the driver's JVM (local mode): temporary files can then stay local."""
    return master is None and not under_spark_submit() or bool(master and _LOCAL.match(master))


def code_archive(packages: Iterable[str], folder: str) -> str:
    """A zip of the named top-level packages (their .py files), written in ``folder``; its path. The name
    carries a digest of the contents: Spark keeps a file it was sent under its name and refuses another
    of that name, so a session that later needs more packages (a model from another package) ships a
    second archive beside the first."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(set(packages)):
            spec = importlib.util.find_spec(name)
            if spec is None or spec.origin is None:
                continue
            origin = Path(spec.origin)
            if spec.submodule_search_locations:          # a package: every .py below it
                for source, inside in package_folders(name, origin.parent):
                    for path in sorted(source.rglob("*.py")):
                        z.write(path, str(Path(inside) / path.relative_to(source)))
            elif origin.suffix == ".py":
                z.write(origin, origin.name)
    data = buffer.getvalue()
    path = os.path.join(folder, f"rabbitproof-code-{hashlib.sha256(data).hexdigest()[:12]}.zip")
    with open(path, "wb") as f:
        f.write(data)
    return path


def package_folders(name: str, root: Path) -> list[tuple[Path, str]]:
    """The folders of package ``name`` (found at ``root``) and where each goes in the archive: the package's
    own, and, for rabbitproof in a checkout, the design card's folders installed inside it from the
    repository's top (pyproject.toml's package-dir), which are not below ``root`` there."""
    folders = [(root, name)]
    for part in getattr(importlib.import_module(name), "DESIGN_CARD", ()):
        found = importlib.util.find_spec(f"{name}.{part}")
        if found is not None and found.origin is not None and Path(found.origin).parent.parent != root:
            folders.append((Path(found.origin).parent, f"{name}/{part}"))
    return folders


def spark_session(master: str | None, partitions: int, driver_memory: str | None = None) -> Any:
    """The session (created, or the one already running in this process) with the engine's settings."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # heavy: imported only when the Spark engine runs

    builder = SparkSession.builder.appName("rabbitproof spark_check")
    if master is not None:
        builder = builder.master(master)
    elif not under_spark_submit():
        builder = builder.master(DEFAULT_MASTER)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.pyspark.python": os.environ["PYSPARK_PYTHON"],
        "spark.executorEnv.PYTHONHASHSEED": "0",
        # One task per frontier file: the level's states are spread over ``partitions`` files.
        "spark.sql.shuffle.partitions": str(partitions),
        # Planned once per level, not re-planned at each shuffle: adaptive execution ran every shuffle as
        # a job of its own (9 jobs a level instead of 4), and the partitions are already what we want.
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
        "spark.sql.files.openCostInBytes": str(1 << 40),
        "spark.sql.files.maxPartitionBytes": str(64 << 20),
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "4096",
        "spark.sql.parquet.compression.codec": "lz4_raw",
        # The visited set is joined where it lies, never broadcast (a broadcast goes through the driver).
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.join.preferSortMergeJoin": "false",
    }
    if driver_memory and not under_spark_submit():
        settings["spark.driver.memory"] = driver_memory
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def ship_code(session: Any, packages: Iterable[str]) -> None:
    """Send the packages to every executor (once per session and set of packages)."""
    wanted = frozenset(packages)
    shipped = getattr(session, "_rabbitproof_shipped", frozenset())
    if wanted <= shipped:
        return
    folder = tempfile.mkdtemp(prefix="rabbitproof-code-")
    session.sparkContext.addPyFile(code_archive(wanted | shipped, folder))
    session._rabbitproof_shipped = wanted | shipped
