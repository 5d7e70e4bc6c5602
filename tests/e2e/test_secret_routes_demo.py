"""`stream-dp demo --privacy-model secret-routes` end to end: the real CLI, the embedded
broker and a worker releasing the dense synthetic city under secret routes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.waiting import PATIENCE_S

pytestmark = [pytest.mark.broker, pytest.mark.slow]
ROOT = Path(__file__).parents[2]
ROW = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d +(\d+) +(\S+) +(\S+)  (\d+) cars, ", re.MULTILINE)


def test_the_secret_routes_demo_shows_cells(broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """(``broker``: the embedded broker's binary runs here; the demo starts its own.)"""
    for name in [n for n in os.environ if n.startswith("STREAM_DP_")]:
        monkeypatch.delenv(name)
    done = subprocess.run(
        [sys.executable, "-m", "stream_dp.cli", "demo", "--privacy-model", "secret-routes",
         "--hours", "2"],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True,
        timeout=2 * PATIENCE_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = ROW.findall(done.stdout)
    assert len(rows) == 2, done.stdout
    assert all(int(cells) >= 1 for cells, *_ in rows)
    assert float(rows[1][2]) > float(rows[0][2])  # the period's epsilon grows
    assert "dense synthetic city" in done.stdout
    assert "2 windows released once each" in done.stdout
