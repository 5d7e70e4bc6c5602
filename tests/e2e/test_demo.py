"""`stream-dp demo` end to end: the real CLI in a subprocess (embedded broker, one worker,
the bundled AIS sample), checked against the offline engine on the same readings."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stream_dp.commands.demo import DEMO_DEFAULTS, replayed_readings
from stream_dp.commands.profile import period_losses
from stream_dp.config import load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.engine import OfflineEngine
from stream_dp.kafka.embedded_broker import (
    EmbeddedBrokerError,
    free_loopback_port,
    resolve_broker_binary,
)
from tests.e2e.service_harness import start_keep_running_demo
from tests.e2e.waiting import PATIENCE_S, wait_until

pytestmark = [pytest.mark.broker, pytest.mark.slow]

# The README's quick check: the busiest 6 hours of the week (2020-12-03 15:00-21:00 UTC).
# Under the demo's per-vehicle budget cells pool hours; a replay of N hours pools no span
# longer than N, so the last window releases what is still pooling (the map opens on it).
HOURS = 6
ROOT = Path(__file__).parents[2]

# One line of the live table: window, cells, vessels, readings, G1->K, K*eps, eps spent,
# error bound; the busiest cell's mean (noisy) follows and is not parsed.
ROW = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d) +(\d+) +(\d+) +(\d+) +(\d+)->(\d+) +"
    r"(\d+\.\d\d) +(\d+\.\d\d) +(\S+)  ",
    re.MULTILINE,
)
LOSSES = re.compile(
    r"The busiest vessel lost ε (\d+\.\d) of its ε 14 per 7 days; the median vessel ε "
    r"(\d+\.\d) \((\d+) vessels"
)
SUMMARY = re.compile(
    r"(\d+) windows released once each, (\d+) cell records; late readings dropped: (\d+)\.\n"
    r"Largest loss of a vessel in each window, summed over the windows \(a bound [^)]*\): "
    r"(\d+\.\d\d) \(without CLIP-USER: (\d+\.\d\d); each cell's own eps, the least that meets "
    r"T, basic composition\)\."
)  # the demo's budget mode: no one ε per cell (issue 25)
#: In words, after the ledger's line: the busiest vessel's own loss against the promise.
PLAIN = re.compile(
    r"at most e\^(\d+\.\d\d) times more likely than without its data \(the plan keeps every "
    r"vessel within ε 14 per 7 days\)"
)


def _offline_summaries(readings: list[dict]) -> list[dict]:
    """The window summaries `stream-dp release` computes with the demo's settings."""
    return _offline(readings)[0]


def _offline(readings: list[dict]) -> tuple[list[dict], list[float]]:
    """The window summaries `stream-dp release` computes with the demo's settings, and each
    vehicle's loss over the budget period from its ledger."""
    span = min(load_settings().max_span_hours, HOURS)  # as the demo replays HOURS
    settings = load_settings(**{**DEMO_DEFAULTS, "max_span_hours": span})
    engine = OfflineEngine(settings, LaplaceNoise())
    summaries = [r.summary for part in (engine.feed(readings), engine.finish()) for r in part]
    return summaries, period_losses(settings, engine.ledger.entries())


def _minute(window_start: str) -> str:
    """``2020-12-01T04:00:00Z`` as the table prints it: ``2020-12-01 04:00`` (UTC)."""
    return datetime.fromisoformat(window_start).astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def test_demo_releases_what_the_offline_engine_releases(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        resolve_broker_binary()
    except EmbeddedBrokerError as exc:
        pytest.skip(f"embedded Tansu broker unavailable: {exc}")
    for name in [n for n in os.environ if n.startswith("STREAM_DP_")]:
        monkeypatch.delenv(name)  # the demo's defaults only, here and in the subprocess
    # An operator's setting for real deployments; the demo's own new broker has no ledger.
    monkeypatch.setenv("STREAM_DP_REQUIRE_EXISTING_LEDGER", "true")

    done = subprocess.run(
        [sys.executable, "-m", "stream_dp.cli", "demo", "--hours", str(HOURS)],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=2 * PATIENCE_S,  # a hang; pyproject's timeout (600 s) bounds the test
    )
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, f"exit {done.returncode}\n{out}\n{err[-3000:]}"

    summary = SUMMARY.search(out)
    assert summary, out
    windows, cells, late = (int(summary[i]) for i in (1, 2, 3))
    k_eps, g1_eps = (float(summary[i]) for i in (4, 5))
    assert windows > 0 and cells > 0

    readings = replayed_readings(HOURS)
    assert f"sample: {len(readings):,} AIS readings" in out
    expected, losses = _offline(readings)
    # The map opens on the newest window with cells (live first: the last may release none).
    assert any(s["cells_released"] > 0 for s in expected), "the map would have nothing to draw"
    assert windows == len(expected)
    assert cells == sum(s["cells_released"] for s in expected)
    assert late == sum(s["readings_dropped_late"] for s in expected) == 0
    assert k_eps == pytest.approx(sum(s["privacy_loss"] for s in expected), abs=0.006)
    assert g1_eps == pytest.approx(sum(s["privacy_loss_unclipped"] for s in expected), abs=0.006)
    assert g1_eps >= k_eps  # CLIP-USER never raises the worst-case loss

    # Windows are printed as the worker publishes them, which need not be event-time order.
    rows = ROW.findall(out)
    assert len(rows) == windows, out
    by_window = {_minute(s["window_start"]): s for s in expected}
    assert sorted(row[0] for row in rows) == sorted(by_window)
    spent = 0.0
    for row in rows:
        want = by_window[row[0]]
        spent += want["privacy_loss"]
        assert [int(v) for v in row[1:6]] == [
            want["cells_released"], want["n_vehicles"], want["n_readings"], want["G1"],
            want["K"],
        ]  # fmt: skip
        assert float(row[6]) == pytest.approx(want["privacy_loss"], abs=0.006)
        assert float(row[7]) == pytest.approx(spent, abs=0.006)
        assert float(row[8]) == pytest.approx(want["error_bound"], abs=0.006)

    # What each vessel lost, against the promise B = 14 per 7 days, from the worker's ledger.
    lost = LOSSES.search(out)
    assert lost, out
    ordered = sorted(losses)
    assert float(lost[1]) == pytest.approx(ordered[-1], abs=0.051) and ordered[-1] <= 14
    assert int(lost[3]) == len(ordered) and float(lost[2]) <= float(lost[1])
    plain = PLAIN.search(out)
    assert plain, out
    assert float(plain[1]) == pytest.approx(ordered[-1], abs=0.006)
    assert ordered[-1] <= k_eps + 0.006  # the summed window maxima bound one vessel's loss

    # Privacy: the output names no vessel (AIS vehicle ids are MMSI numbers).
    vessels = {r["vehicle_id"] for r in readings}
    assert len(vessels) > 10
    assert not [v for v in vessels if v in out or v in err]


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc's children lists)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_keep_running_serves_the_dashboard_until_a_signal_stops_everything(
    stop: signal.Signals,
) -> None:
    """--keep-running: after the replay the dashboard still answers; SIGINT or SIGTERM then
    stops the demo, its worker and the broker, and frees the port."""
    try:
        resolve_broker_binary()
    except EmbeddedBrokerError as exc:
        pytest.skip(f"embedded Tansu broker unavailable: {exc}")
    port = free_loopback_port()
    demo, shown = start_keep_running_demo(2, port)
    try:
        assert shown.splitlines()[-1].startswith("still running:"), shown
        assert f"http://127.0.0.1:{port}/dashboard" in shown
        assert f"http://127.0.0.1:{port}/metrics" in shown
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/dashboard", timeout=60) as page:
            assert page.status == 200
        assert demo.poll() is None  # still up after the replay, until the signal
        children = _descendants(demo.pid)
        assert len(children) >= 2  # the worker and the broker at least
        demo.send_signal(stop)
        status = demo.wait(timeout=PATIENCE_S)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert status == (130 if stop == signal.SIGINT else 128 + signal.SIGTERM)
    wait_until(lambda: not any(_alive(pid) for pid in children), "the demo's children stopped")
    assert not _listening(port)


def test_a_window_that_fails_makes_the_demo_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed window (its summary published as failed) is an error, as in `stream-dp
    release`: the demo says so and exits 1, where it used to exit 0 (a fresh install whose
    every budgeted window failed still 'succeeded')."""
    try:
        resolve_broker_binary()
    except EmbeddedBrokerError as exc:
        pytest.skip(f"embedded Tansu broker unavailable: {exc}")
    for name in [n for n in os.environ if n.startswith("STREAM_DP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("STREAM_DP_FAULT_INJECTION", "release-error:2")  # the worker's 2nd
    done = subprocess.run(
        [sys.executable, "-m", "stream_dp.cli", "demo", "--hours", "3"],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True,
        timeout=2 * PATIENCE_S,
    )  # fmt: skip
    assert done.returncode == 1, f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    assert len(re.findall(r"release failed \(InjectedReleaseError\)", done.stdout)) == 1
    assert "1 of these windows failed to release: published as failed, charged." in done.stdout
    # The worker's own line on it (where it was raised), which its log alone held before.
    assert re.search(r"window \S+ failed: InjectedReleaseError at fault_injection\.py:\d+ ",
                     done.stderr), done.stderr[-3000:]  # fmt: skip
    summary = SUMMARY.search(done.stdout)
    assert summary and int(summary[1]) == 3, done.stdout  # every window still published
