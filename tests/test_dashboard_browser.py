"""End to end in a real browser: a worker on the embedded broker releases two windows, and
the ``/dashboard`` page, loaded in headless Chromium, renders exactly those releases.

No WebDriver: Chromium's own ``--dump-dom`` (which runs the page's JavaScript, so the
``/api/releases`` poll happens; ``--virtual-time-budget`` lets it settle) and
``--screenshot``. Needs the Debian package ``chromium``; skipped without it unless ``CI``
is set, where a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.service_harness import (
    create_topics,
    produce,
    service_settings,
    start_worker,
    synthetic_readings,
    wait_for_windows,
)

pytestmark = [pytest.mark.broker, pytest.mark.slow]

EPSILON = 0.7  # not the default, so the page must show the configured value
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--window-size=1280,900",
    # Virtual time runs the page's timers (the 2 s poll) without waiting for real time,
    # and pauses while a fetch is pending, so the dump happens after the first render.
    "--virtual-time-budget=5000",
]


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def find_chromium() -> str:
    """The Chromium binary; skip (or fail under CI) when it is not installed."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    reason = "headless Chromium is not installed (Debian package: chromium)"
    if _in_ci():
        pytest.fail(f"{reason}; CI must install it")
    pytest.skip(reason)


def run_chromium(browser: str, *args: str, timeout: float = 90.0) -> str:
    """Run one headless Chromium with a fresh profile; return its stdout."""
    with tempfile.TemporaryDirectory(prefix="stream-dp-chromium-") as profile:
        command = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
        done = subprocess.run(command, capture_output=True, timeout=timeout)
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace")[-3000:]
        raise AssertionError(f"chromium exited {done.returncode}: {command}\n{err}")
    return done.stdout.decode(errors="replace")


class DashboardDom(HTMLParser):
    """The parts of the dumped dashboard DOM the test looks at."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, Any]] = []  # each: tr attributes + "cells" (td texts)
        self.texts: dict[str, str] = {}  # text of elements with an id
        self.attrs_by_id: dict[str, dict[str, str]] = {}
        self._in_rows = False
        self._row: dict[str, Any] | None = None
        self._td: list[str] | None = None
        self._ids: list[tuple[str, str, list[str]]] = []  # (tag, id, text parts) still open

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.attrs_by_id[a["id"]] = a
            self._ids.append((tag, a["id"], []))
        if tag == "tbody" and a.get("id") == "rows":
            self._in_rows = True
        elif tag == "tr" and self._in_rows:
            self._row = {**a, "cells": []}
        elif tag == "td" and self._row is not None:
            self._td = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._row is not None and self._td is not None:
            self._row["cells"].append("".join(self._td).strip())
            self._td = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        elif tag == "tbody":
            self._in_rows = False
        if self._ids and self._ids[-1][0] == tag:
            _, ident, parts = self._ids.pop()
            self.texts[ident] = "".join(parts).strip()

    def handle_data(self, data: str) -> None:
        if self._td is not None:
            self._td.append(data)
        for _, _, parts in self._ids:
            parts.append(data)


def dump_dashboard(browser: str, url: str, expected_records: int, timeout: float = 60.0):
    """The rendered dashboard once it shows ``expected_records`` records (retries the load)."""
    deadline = time.monotonic() + timeout
    while True:
        dom = DashboardDom()
        html = run_chromium(browser, "--dump-dom", url)
        dom.feed(html)
        shown = dom.attrs_by_id.get("rows", {}).get("data-records")
        if shown == str(expected_records) or time.monotonic() > deadline:
            return dom, html
        time.sleep(1.0)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def browser() -> str:
    return find_chromium()


@pytest.fixture
def worker_with_releases(kafka, topic_prefix, tmp_path):
    settings = service_settings(topic_prefix, epsilon=EPSILON)
    create_topics(kafka, settings)
    worker = start_worker(kafka.bootstrap_servers, settings, tmp_path)
    try:
        worker.wait_ready()
        produce(kafka, settings.topic_readings, synthetic_readings(20, 2, 300, seed=7))
        records = wait_for_windows(kafka, settings, expected=2, worker=worker)
        yield worker, settings, records
    finally:
        worker.stop()


def test_dashboard_renders_the_released_windows(browser: str, worker_with_releases, tmp_path: Path):
    worker, settings, records = worker_with_releases
    windows = [r for r in records if r["type"] == "window"]
    cells = [r for r in records if r["type"] == "cell"]
    assert len(windows) == 2 and cells
    # What the page polls: the releaser's memory holds the same records as the topic.
    status, body = worker.get("/api/releases")
    assert status == 200
    api_ids = sorted(r["release_id"] for r in json.loads(body)["records"])
    assert api_ids == sorted(r["release_id"] for r in records)

    dom, html = dump_dashboard(browser, worker.url("/dashboard"), len(records))
    context = f"\n--- DOM ---\n{html[-4000:]}\n--- worker log ---\n{worker.log()}"

    assert dom.texts.get("status") == "releasing", context
    params = dom.texts.get("params", "")
    assert f"ε={EPSILON} per cell" in params, context
    assert f"H3 res {settings.resolution}" in params, context
    assert dom.attrs_by_id["params"].get("data-epsilon") == repr(EPSILON)

    window_rows = [r for r in dom.rows if "window" in r.get("class", "").split()]
    cell_rows = [r for r in dom.rows if r.get("data-type") == "cell"]
    assert len(window_rows) + len(cell_rows) == len(dom.rows), context
    # Newest window first; its first column is the window_start the releaser published.
    assert [r["cells"][0] for r in window_rows] == [w["window_start"] for w in windows][::-1]
    assert [r["data-window-start"] for r in window_rows] == [r["cells"][0] for r in window_rows]
    for row, summary in zip(window_rows, windows[::-1], strict=True):
        assert row["cells"][1] == f"{summary['cells_released']} cells released"
        assert row["cells"][4] == str(summary["n_vehicles"])
        assert row["cells"][5] == str(summary["n_readings"])
        assert row["data-release-id"] == summary["release_id"]

    assert len(cell_rows) == len(cells), context
    assert sorted((r["data-window-start"], r["data-cell"]) for r in cell_rows) == sorted(
        (c["window_start"], c["cell"]) for c in cells
    )
    by_id = {c["release_id"]: c for c in cells}
    for row in cell_rows:
        released = by_id[row["data-release-id"]]
        assert row["cells"][:2] == [released["window_start"], released["cell"]]
        assert row["cells"][2] == f"{released['mean']:.2f}"
        assert float(row["cells"][2]) <= settings.upper
        assert row["cells"][4] == str(released["n_vehicles"])
        assert row["cells"][5] == str(released["n_readings"])
    # Newest window first, each as its summary row then its cells in published order.
    expected_order = [
        r["release_id"]
        for w in windows[::-1]
        for r in [w, *(c for c in cells if c["window_start"] == w["window_start"])]
    ]
    assert [r["data-release-id"] for r in dom.rows] == expected_order, context

    shot = tmp_path / "dashboard.png"
    run_chromium(browser, f"--screenshot={shot}", worker.url("/dashboard"))
    data = shot.read_bytes()
    assert png_size(data) == (1280, 900)
    assert len(data) > 20_000, f"suspiciously small screenshot: {len(data)} bytes"
