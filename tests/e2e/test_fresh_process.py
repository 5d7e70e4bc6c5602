"""Behaviour only a fresh Python process shows: start-up imports, the allocator setting and
one-line errors."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

from stream_dp.testing.readings import unclamped_readings

#: Top-level packages that ``stream-dp --help`` must not import (each costs a large part of a
#: second at start-up).
HEAVY = ("numba", "llvmlite", "faust", "matplotlib")


def test_the_allocator_setting_takes_on_glibc_linux_in_a_fresh_process():
    code = "from stream_dp.allocator import keep_freed_memory; print(keep_freed_memory())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert out.stdout.strip() == str(glibc)


def test_python_dash_m_cli_reports_a_bad_value_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_DP_")}
    env["STREAM_DP_EPSILON"] = "abc"
    source = tmp_path / "readings.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in unclamped_readings(10, seed=2)))
    done = subprocess.run(
        [sys.executable, "-m", "stream_dp.cli", "release", str(source), "--out", "o.jsonl"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stderr.startswith("stream-dp release: error: invalid setting epsilon (")
    assert "Traceback" not in done.stderr
    assert done.returncode == 2


def test_help_imports_neither_numba_nor_faust_nor_matplotlib():
    """``stream-dp --help`` builds every command's parser; none may load a heavy module
    (the compiled kernels, the Kafka worker, the plots load when a command runs)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "stream_dp", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "usage: stream-dp" in done.stdout
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "stream_dp.cli" in imported  # the check reads importtime's output at all
    heavy = {name for name in imported if name.split(".")[0] in HEAVY}
    assert not heavy, sorted(heavy)
