"""The live map in a real browser (Debian's headless Chromium over the DevTools protocol).

- a worker on the embedded broker releases two windows; its ``/dashboard`` draws exactly
  the released cells of each (ids and means) and the budget panel;
- ``stream-dp dashboard``, a standalone subscriber of the releases topic, shows what is on
  the topic (duplicates dropped) and a window published while the page is open, without a
  reload;
- 5,000 cells of one window are all drawn; the page's own render time is printed (a
  measurement, never asserted).
- the basemap: tiles from the configured server (a local stub) under the hexagons, with
  their credit; none with ``--map-tiles none``; OpenStreetMap's credit by default.

Skipped without Chromium unless ``CI`` is set, where a missing browser is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h3
import orjson
import pytest

from stream_dp.commands.demo_secret import CITY_START, dense_city_readings
from stream_dp.config import Settings, load_settings
from stream_dp.dashboard.span_text import span_text
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine
from stream_dp.kafka.embedded_broker import free_loopback_port
from tests.e2e.cdp_browser import Browser
from tests.e2e.service_harness import (
    create_topics,
    produce,
    produce_raw,
    start_keep_running_demo,
    start_worker,
    wait_for_windows,
)
from tests.e2e.tile_stub import TILE_PATH, serve_tiles
from tests.e2e.waiting import PATIENCE_S, wait_until
from tests.support.readings import synthetic_readings
from tests.support.records import hour_stamp, window_records
from tests.support.settings import service_settings

EPSILON = 0.7  # not the default, so the page must show the records' value
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: What the page reports about the window it drew last (the test hooks of dashboard.js).
DRAWN = """(() => {
  const svg = document.getElementById("hexes");
  const budget = document.getElementById("budget");
  return {
    window: document.body.dataset.renderedWindow,
    render_ms: svg && svg.dataset.renderMs ? Number(svg.dataset.renderMs) : null,
    drawn_at: svg && svg.dataset.drawnAt ? Number(svg.dataset.drawnAt) : null,
    cells: [...document.querySelectorAll("[data-cell]")].map((p) => [
      p.dataset.cell, p.dataset.mean, p.dataset.meanError]),
    cumulative_epsilon: budget.dataset.cumulativeEpsilon,
    budget_window: budget.dataset.window,
    params: document.getElementById("params").textContent,
    status: document.getElementById("status").dataset.state,
  };
})()"""


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


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def browser() -> Iterator[Browser]:
    with Browser(find_chromium()) as opened:
        yield opened


def wait_drawn(page: Browser, window: str, timeout: float = PATIENCE_S) -> dict[str, Any]:
    page.wait_for(
        f"document.body?.dataset.renderedWindow === {window!r}", timeout, f"window {window}"
    )
    return page.evaluate(DRAWN)


def clicked_details(page: Browser, cell: str) -> dict[str, str]:
    """Click the hexagon of ``cell``: the details panel's rows (label: value)."""
    page.evaluate(
        f"document.querySelector('[data-cell=\"{cell}\"]')"
        ".dispatchEvent(new MouseEvent('click', {bubbles: true}))"
    )
    rows = page.evaluate(
        "[...document.querySelectorAll('#details-fields dt, #details-fields dd')]"
        ".map((e) => e.textContent)"
    )
    return dict(zip(rows[::2], rows[1::2], strict=True))


def released_cells(records: list[dict[str, Any]], window: str) -> list[dict[str, Any]]:
    """The cell records the window starting at ``window`` released: those ending with it (a
    span's records start at the span's first window)."""
    summaries = [r for r in records if r["type"] == "window" and r["window_start"] == window]
    ends = {r["window_end"] for r in summaries}
    return [r for r in records if r["type"] == "cell" and r["window_end"] in ends]


def assert_drawn_equals_released(drawn: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """Every released cell of the window is drawn once, with its mean and mean_error."""
    cells = released_cells(records, drawn["window"])
    assert cells, "the window released no cell"
    assert len(drawn["cells"]) == len(cells)
    shown = {cell: (mean, error) for cell, mean, error in drawn["cells"]}
    assert sorted(shown) == sorted(c["cell"] for c in cells)
    for released in cells:
        mean, error = shown[released["cell"]]
        assert float(mean) == released["mean"]
        expected_error = released.get("mean_error")
        if expected_error is None:
            assert error == ""  # unknown: the hook is there, empty
        else:
            assert float(error) == expected_error


def cumulative(records: list[dict[str, Any]], through: str) -> float:
    return sum(
        r["privacy_loss"] for r in records if r["type"] == "window" and r["window_start"] <= through
    )


def choose_window(page: Browser, window: str) -> None:
    page.evaluate(
        "(() => { const s = document.getElementById('window-select');"
        f" s.value = {window!r}; s.dispatchEvent(new Event('change')); return s.value; }})()"
    )


# --- the worker's /dashboard ------------------------------------------------------------
@pytest.fixture
def worker_with_releases(kafka, topic_prefix, tmp_path):
    settings = service_settings(topic_prefix, epsilon=EPSILON, map_tiles="none")
    create_topics(kafka, settings)
    worker = start_worker(kafka.bootstrap_servers, settings, tmp_path)
    try:
        worker.wait_ready()
        produce(kafka, settings.topic_readings, synthetic_readings(20, 2, 300, seed=7))
        records = wait_for_windows(kafka, settings, expected=2, worker=worker)
        yield worker, settings, records
    finally:
        worker.stop()


@pytest.mark.broker
@pytest.mark.slow
def test_worker_dashboard_draws_the_released_cells(
    browser: Browser, worker_with_releases, tmp_path: Path
) -> None:
    worker, settings, records = worker_with_releases
    windows = sorted(r["window_start"] for r in records if r["type"] == "window")
    assert len(windows) == 2
    # The releaser's memory (/api/releases) comes to hold the same records as the topic: the
    # releaser remembers a window after publishing it and writing its snapshot, so the topic
    # may show a window before the memory does.
    topic_ids = sorted(r["release_id"] for r in records)

    def api_ids() -> list[str]:
        status, body = worker.get("/api/releases")
        assert status == 200
        return sorted(r["release_id"] for r in orjson.loads(body)["records"])

    wait_until(lambda: api_ids() == topic_ids, "the releaser's memory holding the topic's records")
    browser.navigate(worker.url("/dashboard"))
    drawn = wait_drawn(browser, windows[-1])  # the newest window by default
    context = f"\n--- worker log ---\n{worker.log()}"
    assert_drawn_equals_released(drawn, records)
    assert float(drawn["cumulative_epsilon"]) == pytest.approx(cumulative(records, windows[-1]))
    assert drawn["budget_window"] == windows[-1]
    assert f"ε={EPSILON} per cell" in drawn["params"], context
    drawn_res = sorted({r["resolution"] for r in records
                        if r["type"] == "cell" and r["window_start"] == windows[-1]})  # fmt: skip
    assert f"H3 res {', '.join(map(str, drawn_res))} ·" in drawn["params"], context
    assert drawn["status"] == "live"

    choose_window(browser, windows[0])
    older = wait_drawn(browser, windows[0])
    assert_drawn_equals_released(older, records)
    assert float(older["cumulative_epsilon"]) == pytest.approx(cumulative(records, windows[0]))

    # Clicking a cell shows its record.
    first = older["cells"][0][0]
    browser.evaluate(
        f"document.querySelector('[data-cell=\"{first}\"]')"
        ".dispatchEvent(new MouseEvent('click', {bubbles: true}))"
    )
    assert browser.evaluate("document.getElementById('details-fields').dataset.cell") == first

    shot = browser.screenshot(tmp_path / "dashboard.png")
    assert png_size(shot)[0] >= 1000
    assert len(shot) > 20_000, f"suspiciously small screenshot: {len(shot)} bytes"


# --- stream-dp dashboard -----------------------------------------------------------------
@dataclass
class Dashboard:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


@pytest.fixture
def start_dashboard(tmp_path: Path) -> Iterator[Any]:
    started: list[Dashboard] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Dashboard:
        """``stream-dp dashboard ARGS``, with no basemap unless ``args`` or ``env`` name one."""
        port = free_loopback_port()
        log_path = tmp_path / f"dashboard-{port}.log"
        command = [sys.executable, "-m", "stream_dp.cli", "dashboard", "--web-port", str(port),
                   *args]  # fmt: skip
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command,
                env={**os.environ, "STREAM_DP_MAP_TILES": "none", **(env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        dashboard = Dashboard(process, port, log_path)
        started.append(dashboard)
        deadline = time.monotonic() + PATIENCE_S
        while True:
            if process.poll() is not None:
                raise AssertionError(f"dashboard exited {process.returncode}:\n{dashboard.log()}")
            try:
                with urllib.request.urlopen(dashboard.url("/healthz"), timeout=2):
                    return dashboard
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"dashboard not up:\n{dashboard.log()}") from None
                time.sleep(0.2)

    yield start
    for dashboard in started:
        dashboard.process.terminate()
        try:
            dashboard.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            dashboard.process.kill()
            dashboard.process.wait()


def offline_releases(settings: Settings, hours: int) -> list[list[dict[str, Any]]]:
    """The records of each window the offline engine releases (seeded noise)."""
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(3)))
    readings = synthetic_readings(20, hours, 300, seed=11)
    return [r.records for part in (engine.feed(readings), engine.finish()) for r in part]


@pytest.mark.broker
@pytest.mark.slow
def test_standalone_dashboard_follows_the_releases_topic(
    browser: Browser, kafka, topic_prefix, start_dashboard
) -> None:
    settings = service_settings(topic_prefix, epsilon=EPSILON)
    create_topics(kafka, settings)
    windows = [w for w in offline_releases(settings, 3) if len(w) > 1]
    assert len(windows) >= 2
    first, later = windows[0], windows[1]
    # Published twice (as after a releaser's restart): the page shows each cell once.
    produce_raw(kafka, settings.topic_releases, [orjson.dumps(r) for r in first + first])
    dashboard = start_dashboard(
        "--bootstrap",
        kafka.bootstrap_servers,
        env={"STREAM_DP_TOPIC_RELEASES": settings.topic_releases, "STREAM_DP_KAFKA_EMBEDDED": "1"},
    )
    browser.navigate(dashboard.url("/dashboard"))
    drawn = wait_drawn(browser, first[-1]["window_start"])
    assert_drawn_equals_released(drawn, first)
    assert float(drawn["cumulative_epsilon"]) == pytest.approx(first[-1]["privacy_loss"])

    browser.evaluate("window.stillTheSamePage = true")
    published_at = time.time()
    produce_raw(kafka, settings.topic_releases, [orjson.dumps(r) for r in later])
    live = wait_drawn(browser, later[-1]["window_start"], timeout=PATIENCE_S)
    assert browser.evaluate("window.stillTheSamePage === true"), "the page was reloaded"
    assert_drawn_equals_released(live, later)
    assert float(live["cumulative_epsilon"]) == pytest.approx(
        first[-1]["privacy_loss"] + later[-1]["privacy_loss"]
    )
    print(f"new window drawn {live['drawn_at'] / 1000 - published_at:.2f} s after publishing")
    assert dashboard.process.poll() is None, dashboard.log()

    # Another instance reads the whole topic too (no consumer group shares it out).
    second = start_dashboard(
        "--bootstrap",
        kafka.bootstrap_servers,
        env={"STREAM_DP_TOPIC_RELEASES": settings.topic_releases, "STREAM_DP_KAFKA_EMBEDDED": "1"},
    )
    expected = [first[-1]["window_start"], later[-1]["window_start"]]
    deadline = time.monotonic() + PATIENCE_S
    while True:
        with urllib.request.urlopen(second.url("/api/dashboard/windows"), timeout=5) as answer:
            listed = [w["window_start"] for w in orjson.loads(answer.read())["windows"]]
        if listed == expected or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert listed == expected, second.log()


# --- what the page opens on ------------------------------------------------------------
def _fill_of(page: Browser, cell: str) -> str:
    return page.evaluate(f"document.querySelector('[data-cell=\"{cell}\"]').getAttribute('fill')")


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r},{g},{b})"


@pytest.mark.slow
def test_a_releases_file_opens_on_the_newest_window_with_cells(
    browser: Browser, start_dashboard, tmp_path: Path
) -> None:
    """Issue 26: the page opens on the newest window that released cells and says beside the
    map why the newest one released none; the window is in the URL and such a URL opens on
    it; each window is coloured on its own records' U; a file is not "live"; "1 cell"."""
    from stream_dp.dashboard.colour_scale import VIRIDIS_STOPS

    a = h3.latlng_to_cell(40.70, -74.00, 4)
    b, c = h3.latlng_to_cell(40.70, -74.00, 8), h3.latlng_to_cell(40.71, -74.01, 8)
    records = window_records(1, {a: 60.0}, 1.0, upper=120.0)  # U = 120: 60 is mid-scale
    records += window_records(2, {b: 30.0, c: 65.0}, 1.0, upper=65.0)
    records += window_records(3, {}, 0.0, upper=65.0, cells_withheld=4, n_readings=50, n_vehicles=7)
    releases = tmp_path / "releases.jsonl"
    releases.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    dashboard = start_dashboard("--releases-file", str(releases))

    browser.navigate(dashboard.url("/dashboard"))
    drawn = wait_drawn(browser, hour_stamp(2))  # not the newest window (3): it has no cell
    assert_drawn_equals_released(drawn, records)
    assert browser.evaluate("location.hash") == f"#window={hour_stamp(2)}"
    note = browser.evaluate(
        "(() => { const n = document.getElementById('note');"
        " return [n.hidden, n.dataset.window, n.textContent]; })()"
    )
    assert note[0] is False and note[1] == hour_stamp(3), note
    assert "4 cells withheld" in note[2] and "7 vehicles · 50 readings" in note[2], note
    assert drawn["status"] == "file" and "live" not in drawn["params"]
    assert "H3 res 8 ·" in drawn["params"] and "U=65" in drawn["params"]
    assert _fill_of(browser, c) == _rgb(VIRIDIS_STOPS[-1])
    options = browser.evaluate(
        "[...document.querySelectorAll('#window-select option')].map((o) => o.textContent)"
    )
    assert options == ["2020-12-01 03:00 · 0 cells", "2020-12-01 02:00 · 2 cells",
                       "2020-12-01 01:00 · 1 cell"]  # fmt: skip

    # A URL naming a window opens on it, on that window's U (120: 60 is the middle stop).
    browser.navigate("about:blank")
    browser.navigate(dashboard.url(f"/dashboard#window={hour_stamp(1)}"))
    older = wait_drawn(browser, hour_stamp(1))
    assert_drawn_equals_released(older, records)
    assert _fill_of(browser, a) == _rgb(VIRIDIS_STOPS[5])
    assert "H3 res 4 ·" in older["params"] and "U=120" in older["params"]
    ticks = browser.evaluate("document.getElementById('legend-ticks').textContent")
    assert ticks.endswith("120"), ticks

    # Changing the URL's window selects it in the open page.
    browser.evaluate(f"location.hash = '#window={hour_stamp(3)}'")
    empty = wait_drawn(browser, hour_stamp(3))
    assert empty["cells"] == []
    assert browser.evaluate("document.getElementById('note').dataset.window") == hour_stamp(3)
    assert "H3 res" not in empty["params"]


# --- the basemap -------------------------------------------------------------------------
#: The tile layer as the page holds it: each tile image's URL, and the attribution control.
TILES = """(() => ({
  tiles: [...document.querySelectorAll("#map img.leaflet-tile")].map((i) => i.src),
  loaded: document.querySelectorAll("#map img.leaflet-tile-loaded").length,
  loadedSrc: [...document.querySelectorAll("#map img.leaflet-tile-loaded")].map((i) => i.src),
  layers: document.querySelectorAll("#map .leaflet-tile-container").length,
  credit: document.querySelector(".leaflet-control-attribution").textContent,
  links: [...document.querySelectorAll(".leaflet-control-attribution a")].map((a) => a.href),
}))()"""


@pytest.mark.slow
def test_the_browser_draws_the_configured_basemap_under_the_hexagons(
    browser: Browser, start_dashboard, tmp_path: Path
) -> None:
    """Issue 34, item 9: with a tile URL the page's tiles come from that server (a stub on
    127.0.0.1), fetched by the browser, with the operator's credit; with none there is no
    tile layer; by default OpenStreetMap's tiles, credited to its contributors with a link
    (their host resolves to nothing in the test browser: no tile is fetched)."""
    cells = {h3.latlng_to_cell(40.70 + 0.01 * i, -74.01 + 0.01 * i, 8): 10.0 + 15 * i
             for i in range(4)}  # fmt: skip
    releases = tmp_path / "releases.jsonl"
    records = window_records(2, cells, 1.0)
    releases.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    with serve_tiles() as stub:
        credit = ["--map-tiles-attribution", "Stub tiles"]
        dashboard = start_dashboard(
            "--releases-file", str(releases), "--map-tiles", stub.template, *credit
        )
        browser.navigate(dashboard.url("/dashboard"))
        drawn = wait_drawn(browser, hour_stamp(2))
        assert_drawn_equals_released(drawn, records)
        browser.wait_for("document.querySelectorAll('#map img.leaflet-tile-loaded').length > 0")
        shown = browser.evaluate(TILES)
        asked = list(stub.requests)
        browser.screenshot(tmp_path / "basemap.png")
    assert shown["layers"] >= 1 and shown["loaded"] >= 1, shown
    assert all(src.startswith(stub.origin) for src in shown["tiles"]), shown["tiles"]
    assert asked and all(TILE_PATH.fullmatch(path) for path in asked), asked
    # every tile the page shows loaded was served by the stub (one still loading may not
    # have reached it yet)
    assert {urlsplit(src).path for src in shown["loadedSrc"]} <= set(asked)
    assert "Stub tiles" in shown["credit"] and "OpenStreetMap" not in shown["credit"]

    plain = start_dashboard("--releases-file", str(releases), "--map-tiles", "none")
    browser.navigate(plain.url("/dashboard"))
    wait_drawn(browser, hour_stamp(2))
    none = browser.evaluate(TILES)
    assert (none["tiles"], none["layers"]) == ([], 0), none
    assert browser.evaluate("document.getElementById('hexes').dataset.cells") == "4"

    default = start_dashboard("--releases-file", str(releases), env={"STREAM_DP_MAP_TILES": "osm"})
    browser.navigate(default.url("/dashboard"))
    wait_drawn(browser, hour_stamp(2))
    osm = browser.wait_for(f"(() => {{ const t = {TILES}; return t.tiles.length ? t : null; }})()")
    pattern = r"https://tile\.openstreetmap\.org/\d+/\d+/\d+\.png"
    assert all(re.fullmatch(pattern, src) for src in osm["tiles"]), osm["tiles"]
    assert "© OpenStreetMap contributors" in osm["credit"], osm["credit"]
    assert "https://www.openstreetmap.org/copyright" in osm["links"], osm["links"]


@pytest.mark.slow
def test_a_span_s_details_show_its_hours_and_a_holding_window_says_held(
    browser: Browser, start_dashboard, tmp_path: Path
) -> None:
    """Issue 34: windows 07-11 hold a cell that window 12 releases as one record spanning
    07:00-13:00. Its details show the span and its readings over the whole span (the
    window's own count is one hour's); a holding window's note and budget panel say held,
    not withheld. The page writes spans as ``stream_dp.dashboard.span_text`` does."""
    nyc = h3.latlng_to_cell(40.70, -74.00, 8)
    records: list[dict[str, Any]] = []
    for hour in range(7, 12):
        records += window_records(hour, {}, 0.0, upper=65.0, cells_held=1, readings_held=12,
                                  cells_withheld=0, n_readings=12, n_vehicles=6,
                                  planned_by="rules")  # fmt: skip
    released = window_records(12, {nyc: 30.0}, 1.0, upper=65.0, cells_held=0, n_readings=12,
                              planned_by="optimiser")  # fmt: skip
    released[0].update(window_start=hour_stamp(7), n_readings=72)
    records += released
    releases = tmp_path / "releases.jsonl"
    releases.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    dashboard = start_dashboard("--releases-file", str(releases))

    browser.navigate(dashboard.url("/dashboard"))
    drawn = wait_drawn(browser, hour_stamp(12))
    assert_drawn_equals_released(drawn, records)
    details = clicked_details(browser, nyc)
    assert details["span"] == "2020-12-01 07:00–13:00 (6 hours)", details
    assert details["readings (whole span)"] == "72", details
    assert browser.evaluate("document.getElementById('b-held').textContent") == "0"
    planner = "document.getElementById('b-planner').textContent"
    assert browser.evaluate(planner) == "the optimiser"  # the summary's planned_by

    choose_window(browser, hour_stamp(9))
    holding = wait_drawn(browser, hour_stamp(9))
    # no hexagon (the details list of the cell clicked before carries data-cell too)
    assert [c for c in holding["cells"] if c[1] is not None] == []
    note = browser.evaluate("document.getElementById('note-text').textContent")
    assert "1 cell held to pool with later hours" in note and "withheld" not in note, note
    assert "12 of them held" in note, note
    assert browser.evaluate("document.getElementById('b-held').textContent") == "1"
    assert browser.evaluate(planner) == "the rules"
    assert browser.evaluate("document.getElementById('b-withheld').textContent") == "0"

    for start, end in [("2024-06-01T07:00:00Z", "2024-06-01T13:00:00Z"),
                       ("2024-06-30T23:00:00Z", "2024-07-01T00:00:00Z"),
                       ("2024-06-01T20:00:00Z", "2024-06-02T02:00:00Z")]:  # fmt: skip
        assert browser.evaluate(f"spanText({start!r}, {end!r})") == span_text(start, end)


# --- 5,000 cells -------------------------------------------------------------------------
def many_cells_window(count: int) -> list[dict[str, Any]]:
    """One window of ``count`` adjacent res-8 cells (a disk around New York)."""
    center = h3.latlng_to_cell(40.70, -74.00, 8)
    k = 0
    while 1 + 3 * k * (k + 1) < count:
        k += 1
    cells = sorted(h3.grid_disk(center, k))[:count]
    common = {"schema_version": 1, "window_start": "2020-12-01T10:00:00Z",
              "window_end": "2020-12-01T11:00:00Z", "resolution": 8, "epsilon": 1.0,
              "mechanism": "clip", "K": 3}  # fmt: skip
    records = [
        {
            **common,
            "type": "cell",
            "release_id": f"cell-{i}",
            "cell": cell,
            "mean": round(65.0 * ((i * 7919) % 1000) / 1000, 3),
            "mean_error": (i % 17) * 1.0,
            "variance": 10.0,
            "n_vehicles": 3 + i % 5,
            "n_readings": 10 + i % 50,
            "error_bound": 5.0,
        }  # fmt: skip
        for i, cell in enumerate(cells)
    ]
    records.append(
        {
            **common,
            "type": "window",
            "release_id": "window",
            "privacy_loss": 3.0,
            "privacy_loss_unclipped": 5.0,
            "cells_released": count,
            "cells_withheld": 12,
            "budget_period_seconds": 86400,
        }  # fmt: skip
    )
    return records


@pytest.mark.slow
def test_5000_cells_are_all_drawn_and_the_render_time_reported(
    browser: Browser, start_dashboard, tmp_path: Path
) -> None:
    records = many_cells_window(5000)
    releases = tmp_path / "releases.jsonl"
    releases.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    dashboard = start_dashboard("--releases-file", str(releases))
    browser.navigate(dashboard.url("/dashboard"))
    drawn = wait_drawn(browser, "2020-12-01T10:00:00Z", timeout=PATIENCE_S)
    assert len(drawn["cells"]) == 5000
    assert_drawn_equals_released(drawn, records)
    assert browser.evaluate("document.getElementById('b-withheld').textContent") == "12"
    # Measured by the page: from the window's cells in hand to the painted frame. Printed, not
    # asserted: a test never fails on wall-clock time (the machine may be loaded).
    print(f"5,000 cells rendered in {drawn['render_ms']:.1f} ms (in-page)")
    assert drawn["render_ms"] is not None


# --- stream-dp demo --keep-running --------------------------------------------------------
#: A row of the demo's live table: window, cells, ..., eps spent (see tests/test_demo.py).
DEMO_ROW = r"^(\d{4}-\d\d-\d\d \d\d:\d\d) +(\d+) +\d+ +\d+ +\d+->\d+ +\d+\.\d\d +(\d+\.\d\d) "


@pytest.mark.slow  # the whole demo, then the browser
def test_demo_keep_running_leaves_the_map_of_the_newest_window_up(browser: Browser) -> None:
    """`stream-dp demo --hours 6 --keep-running` (the README's quick check): after the replay
    the map draws exactly the released cells of the newest window with cells (compared
    with the worker's own /api/releases), the budget panel holds the cumulative epsilon the
    demo printed, and the header names the resolutions drawn, not the configured 8."""
    import re
    import signal

    port = free_loopback_port()
    demo, out = start_keep_running_demo(6, port)
    try:
        rows = re.findall(DEMO_ROW, out, re.MULTILINE)
        assert rows and out.splitlines()[-1].startswith("still running:"), out
        # rows are (window, cells, eps spent); windows sort as text. The page opens on the
        # newest window with cells (live first releases cells in their hour: the last window
        # may release none).
        newest = max((row for row in rows if int(row[1]) > 0), default=None)
        assert newest is not None, out
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/releases", timeout=10) as r:
            records = orjson.loads(r.read())["records"]
        browser.navigate(f"http://127.0.0.1:{port}/dashboard")
        window = newest[0].replace(" ", "T") + ":00Z"
        drawn = wait_drawn(browser, window, timeout=PATIENCE_S)
        assert len(drawn["cells"]) == int(newest[1]) > 0
        assert_drawn_equals_released(drawn, records)
        assert float(drawn["cumulative_epsilon"]) == pytest.approx(float(newest[2]), abs=0.006)
        shown = sorted({r["resolution"] for r in released_cells(records, window)})
        assert f"H3 res {', '.join(map(str, shown))} ·" in drawn["params"]
        assert 8 not in shown and "res 8" not in drawn["params"]
        assert drawn["status"] == "live"
        assert browser.evaluate("location.hash") == f"#window={window}"
    finally:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(timeout=PATIENCE_S)
        except subprocess.TimeoutExpired:
            demo.kill()


# --- secret routes -------------------------------------------------------------------------
@pytest.mark.slow
def test_secret_routes_records_show_noisy_counts_their_interval_and_the_model(
    browser: Browser, start_dashboard, tmp_path: Path
) -> None:
    """Issue 36: a secret-routes release (the real engine's records) is drawn; the page names
    the model, the window's and the period's epsilon of every vehicle, and a cell's noisy
    count and 95 % interval; no exact count is shown."""
    settings = load_settings(privacy_model="secret-routes")
    first = CITY_START // settings.window_seconds * settings.window_seconds
    span = (first, first + settings.window_seconds)
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(8)), span=span)
    releases = [w for part in (engine.feed(dense_city_readings(1)), engine.finish()) for w in part]
    (release,) = releases
    records = release.records
    path = tmp_path / "releases.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    dashboard = start_dashboard("--releases-file", str(path))

    browser.navigate(dashboard.url("/dashboard"))
    start = release.summary["window_start"]
    drawn = wait_drawn(browser, start)
    assert_drawn_equals_released(drawn, records)
    assert "protected by secret-routes" in drawn["params"]
    text = "(id) => document.getElementById(id).textContent"
    assert browser.evaluate(f"({text})('b-model')") == "secret-routes"
    window = browser.evaluate(f"({text})('b-window')")
    assert window == f"ε {release.summary['epsilon_window']:.3f} (every vehicle)"
    assert "every vehicle" in browser.evaluate(f"({text})('b-period')")
    cell = max(release.cells, key=lambda c: c["n_vehicles_noisy"])
    details = clicked_details(browser, cell["cell"])
    assert details["vehicles (noisy count)"] == f"{cell['n_vehicles_noisy']:.1f}", details
    units = next(k for k in details if k.startswith("95 % interval"))
    assert details[units] == f"[{cell['mean_low']:.2f}, {cell['mean_high']:.2f}]", details
    assert details["privacy model"].startswith("secret-routes"), details
    assert "vehicles" not in details and "readings (whole span)" not in details
