"""The command-line contract of `python -m rabbitproof.impl.server`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "arguments",
    [["--port", "99999"], ["--port", "http"], ["--user", "nopassword"], ["--bogus"]],
)
def test_bad_options_give_one_error_line_and_exit_2(arguments, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "rabbitproof.impl.server", "--data-dir", str(tmp_path / "d"), *arguments],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0]


def test_data_dir_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    result = subprocess.run(
        [sys.executable, "-m", "rabbitproof.impl.server", "--port", "0", "--data-dir", str(target)],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_port_zero_prints_real_port_and_sigterm_exits_cleanly(fresh_server):
    assert fresh_server.port > 0
    assert (fresh_server.data_dir / "rabbitproof.sqlite3").exists()
    fresh_server.stop()
    assert fresh_server.returncode == 0
