"""Behaviour only a fresh Python process shows: the allocator setting and one-line errors."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

from stream_dp.testing.readings import unclamped_readings


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
    assert "invalid configuration: epsilon: " in done.stderr
    assert "Traceback" not in done.stderr
    assert done.returncode == 2
