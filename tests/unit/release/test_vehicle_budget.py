"""The per-vehicle budget (issue 25; docs/math.md §13): per-cell ε, pacing, sit-outs, spans,
and the guarantee that no vehicle's summed ε over any rolling period exceeds B."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import h3
import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.dp.error_bars import mean_error
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.occupancy import Occupancy
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import WindowRelease
from stream_dp.release.vehicle_budget import stages as budget_stages
from stream_dp.release.vehicle_budget.planner import EPSILON_STEP, plan_budget
from stream_dp.release.window import release_window
from stream_dp.windows.columns import WindowColumns

U, T, HOUR = 65.0, 10.0, 3600
CENTRE = h3.latlng_to_cell(40.70, -74.02, 8)
CELLS = sorted(h3.grid_disk(CENTRE, 2))  # 19 res-8 cells, one res-6 parent or two


def _occupancy(entries: list[tuple[str, str, int]]) -> Occupancy:
    return Occupancy.from_triples(entries)


def test_a_dense_cell_needs_a_fraction_of_the_epsilon_of_a_sparse_one() -> None:
    dense = [("a", f"v{i}", 5) for i in range(30)]
    sparse = [("b", f"w{i}", 5) for i in range(3)]
    occ = _occupancy(dense + sparse)
    plan = plan_budget(
        occ, np.full(len(occ.vehicles), 10.0), target=T, upper=U, variance_share=0.0,
        max_cell_epsilon=10.0,
    )  # fmt: skip
    eps = dict(zip(occ.cells, plan.epsilon.tolist(), strict=True))
    assert eps["a"] < eps["b"] / 5
    assert plan.kept.all()
    # Each cell's ε meets T with its cap, and is the least on the grid (1/128) that does.
    total = occ.total_per_cell()
    kept = np.bincount(occ.cell_index, weights=np.minimum(occ.count, plan.cap[occ.cell_index]))
    bars = mean_error(U, plan.epsilon, plan.cap, kept.astype(np.int64), total)
    assert np.all(bars <= T)
    below = plan.epsilon - EPSILON_STEP
    assert np.all(mean_error(U, below, plan.cap, kept.astype(np.int64), total) > T)
    assert np.all(plan.epsilon / EPSILON_STEP == np.round(plan.epsilon / EPSILON_STEP))


def test_a_vehicle_past_its_room_sits_out_and_pays_at_most_its_room() -> None:
    # v0 is in both cells; it can pay for one of them only.
    entries = [("a", f"v{i}", 4) for i in range(8)] + [("b", f"w{i}", 4) for i in range(8)]
    entries.append(("b", "v0", 1))
    occ = _occupancy(entries)
    room = np.full(len(occ.vehicles), 10.0)
    v0 = occ.vehicles.index("v0")
    full = plan_budget(occ, room, target=T, upper=U, variance_share=0.0, max_cell_epsilon=10.0)
    room[v0] = full.paid[v0] - 0.05  # short of both cells' ε
    plan = plan_budget(occ, room, target=T, upper=U, variance_share=0.0, max_cell_epsilon=10.0)
    assert np.all(plan.paid <= room + 1e-9)
    pairs = zip(occ.cell_index.tolist(), occ.vehicle_index.tolist(), strict=True)
    entry = {(occ.cells[c], occ.vehicles[v]): i for i, (c, v) in enumerate(pairs)}
    # It sits out b, where its one reading of 33 costs least per ε saved, and keeps a.
    assert not plan.kept[entry[("b", "v0")]] and plan.kept[entry[("a", "v0")]]
    assert np.isfinite(plan.epsilon).all()


def test_the_ledger_paces_a_vehicle_by_a_token_bucket_read_off_its_entries() -> None:
    week = 7 * 86400
    ledger = BudgetLedger(week, None)
    budget, burst = 14.0, 14.0 / 6
    assert ledger.budget_room(["v"], 0, budget, burst)[0] == pytest.approx(burst)
    ledger.record(WindowLoss.of_losses(0, ["v"], [2], [burst]))
    # One hour later the bucket holds one hour's refill, B / period.
    assert ledger.budget_room(["v"], HOUR, budget, burst)[0] == pytest.approx(
        budget * HOUR / week, abs=1e-6
    )
    # 12 hours refill 1 (rate 1/12 an hour), 28 hours the whole burst; a stranger's bucket
    # is full at once.
    assert ledger.budget_room(["v"], 12 * HOUR, budget, burst)[0] == pytest.approx(1.0)
    assert ledger.budget_room(["v", "x"], 28 * HOUR, budget, burst) == pytest.approx([burst, burst])


def test_the_rolling_budget_bounds_the_bucket() -> None:
    ledger = BudgetLedger(10 * HOUR, None)
    for hour in range(5):
        ledger.record(WindowLoss.of_losses(hour * HOUR, ["v"], [1], [2.0]))
    room = ledger.budget_room(["v"], 5 * HOUR, 10.0, 5.0)[0]
    assert room == pytest.approx(0.0, abs=1e-6)  # 10 spent in the period: nothing left


def test_old_and_new_window_loss_encodings_are_read() -> None:
    old = WindowLoss(7, 0.5, ("a", "b"), np.array([1, 3]))
    new = WindowLoss.of_losses(7, ["a", "b"], [1, 3], [0.25, 1.5])
    assert WindowLoss.from_bytes(old.to_bytes()) == old
    back = WindowLoss.from_bytes(new.to_bytes())
    assert back == new and back.loss.tolist() == [0.25, 1.5] and back != old


# --- the release: ε on records, spans, the guarantee ------------------------------------------


def _params(**changes: Any) -> ReleaseParams:
    values: dict[str, Any] = {
        "epsilon": 1.0, "upper": U, "resolution": 8, "coarsest_resolution": 6,
        "target_mean_error": T, "variance_share": 0.0, "vehicle_budget": 6.0,
        "budget_period_seconds": 6 * HOUR, "max_span_hours": 3, "app_id": "test",
        "budget_planner": "rules",  # these tests' machinery: the rules' plan (§13.1)
    }  # fmt: skip
    values.update(changes)
    if "vehicle_budget_burst" not in changes:  # these tests' data: the burst B/6
        values["vehicle_budget_burst"] = values["vehicle_budget"] / 6
    return ReleaseParams(**values)


def _window(start: int, readings: list[tuple[int, int, float]]) -> WindowColumns:
    """Readings (cell index, vehicle index, value) at ``start`` + i seconds."""
    cells = [CELLS[c] for c, _, _ in readings]
    vehicles = [f"v{v}" for _, v, _ in readings]
    ts = [float(start + i) for i in range(len(readings))]
    return WindowColumns.from_readings(cells, vehicles, ts, [x for *_, x in readings], 64)


def _run(
    params: ReleaseParams,
    windows: list[list[tuple[int, int, float]]],
    restart_at: int = -1,
    ends: bool = False,
) -> tuple[list[WindowRelease], list[WindowLoss]]:
    """Release the windows in order as the offline engine does (ledger, carry); at
    ``restart_at`` the ledger is rebuilt from its stored (encoded) losses; ``ends``: the input
    ends with the last window (``stream-dp release`` on a file: nothing is held then)."""
    ledger = PrivacyAccountant(params).new_ledger()
    releases, losses = [], []
    carry = None
    for hour, readings in enumerate(windows):
        if not readings:  # no window: nothing is released (the engine's gap)
            continue
        if hour == restart_at:
            stored = [WindowLoss.from_bytes(e.to_bytes()) for e in ledger.entries()]
            ledger = BudgetLedger.from_entries(params.ledger_period_seconds, None, stored)
        last = ends and hour == len(windows) - 1
        release = release_window(
            hour * HOUR, _window(hour * HOUR, readings), params, LaplaceNoise(), 0, ledger, carry,
            last=last,
        )  # fmt: skip
        assert release.loss is not None
        ledger.record_released(release.loss)
        carry = release.carry
        releases.append(release)
        losses.append(release.loss)
    return releases, losses


def _worst_rolling_loss(losses: list[WindowLoss], period: int) -> float:
    spends: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for loss in losses:
        for name, value in zip(loss.vehicles, loss.loss.tolist(), strict=True):
            spends[name].append((loss.window_start, value))
    worst = 0.0
    for items in spends.values():
        for start, _ in items:
            worst = max(worst, sum(x for t, x in items if start <= t < start + period))
    return worst


def _worst_loss_by_reading_hour(releases: list[WindowRelease], period: int) -> float:
    """The largest loss of a vehicle for its readings of any period ``[s, s + period)``: a
    release counts against every period its readings may come from. A read's readings lie in
    its record's span, so each vehicle's loss in a release is counted against every hour from
    the earliest span start of the release's records to the release's window (an
    over-count, never an under-count, of the hours of its reads)."""
    spends: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    for rel in releases:
        assert rel.loss is not None
        if not rel.cells:
            continue
        first = min(_hours(r["window_start"]) for r in rel.cells) * HOUR
        for name, value in zip(rel.loss.vehicles, rel.loss.loss.tolist(), strict=True):
            if value > 0:
                spends[name].append((first, rel.window_start, value))
    worst = 0.0
    for items in spends.values():
        for start in range(-period, max(last for _, last, _ in items) + HOUR, HOUR):
            total = sum(x for lo, hi, x in items if lo < start + period and hi >= start)
            worst = max(worst, total)
    return worst


def _busy_windows(hours: int, seed: int) -> list[list[tuple[int, int, float]]]:
    rng = np.random.default_rng(seed)
    return [
        [(int(rng.integers(0, 4)), int(rng.integers(0, 40)), float(rng.uniform(0, U)))
         for _ in range(int(rng.integers(100, 400)))]
        for _ in range(hours)
    ]  # fmt: skip


def test_records_carry_their_own_epsilon_that_meets_t() -> None:
    releases, _ = _run(_params(), _busy_windows(6, 1))
    records = [r for rel in releases for r in rel.cells]
    assert records, "the data must release cells"
    epsilons = {r["epsilon"] for r in records}
    assert len(epsilons) > 1 and max(epsilons) <= 6.0 / 6 + 1e-9
    assert all(r["mean_error"] <= T for r in records)
    for rel in releases:
        if rel.cells:
            assert rel.summary["max_vehicle_loss"] == pytest.approx(rel.loss.max_loss)
        # The summary's epsilon: the largest per-cell ε released (the burst with none).
        largest = max((r["epsilon"] for r in rel.cells), default=1.0)
        assert rel.summary["epsilon"] == pytest.approx(largest)
    assert any(rel.summary["epsilon"] < 1.0 for rel in releases)


def test_a_sparse_cell_pools_its_hours_into_one_span_and_never_again() -> None:
    # One cell, 6 new vessels an hour with 2 readings each: an hour needs ε 3.247 to meet T
    # (3.25 on the grid of 1/128), four hours pooled 0.812 (0.8125 = 104/128), under the burst
    # (1).
    windows = [[(0, 6 * h + v, 30.0 + v) for v in range(6) for _ in range(2)] for h in range(6)]
    params = _params(vehicle_budget=6.0, max_span_hours=4, coarsest_resolution=8)
    releases, _ = _run(params, windows)
    assert [len(rel.cells) for rel in releases] == [0, 0, 0, 1, 0, 0]
    (record,) = releases[3].cells
    assert (record["window_start"], record["window_end"]) == (
        "1970-01-01T00:00:00Z", "1970-01-01T04:00:00Z",
    )  # fmt: skip
    assert record["n_readings"] == 4 * 12 and record["epsilon"] == 104 * EPSILON_STEP
    # Released once: the next windows start afresh (their carry holds hours 4 and 5 only).
    assert releases[3].carry is None
    assert releases[5].carry is not None and int(releases[5].carry.count.sum()) == 24


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)  # fmt: skip
@given(
    hours=st.integers(4, 14),
    seed=st.integers(0, 10_000),
    budget=st.sampled_from([1.5, 3.0, 6.0]),
    span=st.integers(1, 4),
    restart=st.integers(-1, 13),
    whole_burst=st.booleans(),
    empty=st.sets(st.integers(1, 13), max_size=6),
)
def test_no_vehicle_ever_exceeds_b_over_any_rolling_period(
    hours: int, seed: int, budget: float, span: int, restart: int, whole_burst: bool,
    empty: set[int],
) -> None:  # fmt: skip
    burst = budget if whole_burst else None  # no pacing: the rolling budget alone holds B
    params = _params(vehicle_budget=budget, vehicle_budget_burst=burst, max_span_hours=span)
    # Hours without readings release nothing: a carry then crosses them (never a longer span).
    windows = [[] if h in empty else w for h, w in enumerate(_busy_windows(hours, seed))]
    releases, losses = _run(params, windows, restart_at=restart)
    assert _worst_rolling_loss(losses, params.budget_period_seconds) <= budget * (1 + 1e-9)
    # The promise is about readings: the releases using a vehicle's readings of any period.
    by_readings = _worst_loss_by_reading_hour(releases, params.budget_period_seconds)
    assert by_readings <= budget * (1 + 1e-9)
    # Every reading in at most one record: the records never count more readings than exist.
    records = [r for rel in releases for r in rel.cells]
    assert sum(r["n_readings"] for r in records) <= sum(map(len, windows))
    for record in records:
        assert record["epsilon"] > 0 and record["mean_error"] <= T
        length = _hours(record["window_end"]) - _hours(record["window_start"])
        assert 1 <= length <= span


def _planners_used(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The returned list fills with each window's planner and the pooled pairs it was
    given."""
    used: list[tuple[str, int]] = []

    def counted(name: str, regroup: Any) -> Any:
        def run(columns: WindowColumns, *args: Any, **kwargs: Any) -> Any:
            used.append((name, len(columns)))
            return regroup(columns, *args, **kwargs)

        return run

    for name, attribute in (("optimiser", "optimised_regroup"), ("rules", "budget_regroup")):
        monkeypatch.setattr(
            budget_stages, attribute, counted(name, getattr(budget_stages, attribute))
        )
    return used


@pytest.mark.parametrize(("seed", "span", "restart"), [(1, 3, 4), (2, 1, -1), (3, 4, 6)])
def test_auto_switching_planners_window_by_window_keeps_every_vehicle_within_b(
    monkeypatch: pytest.MonkeyPatch, seed: int, span: int, restart: int
) -> None:
    # Windows of 80-160 pooled pairs under a limit of 120: the planner changes from window to
    # window, over one ledger, one carry and a restart.
    used = _planners_used(monkeypatch)
    params = _params(
        vehicle_budget=6.0, max_span_hours=span, budget_planner="auto", optimiser_max_pairs=120
    )
    windows = _busy_windows(12, seed)
    releases, losses = _run(params, windows, restart_at=restart)
    assert {name for name, _ in used} == {"optimiser", "rules"}
    assert all((pairs <= 120) == (name == "optimiser") for name, pairs in used)
    assert sum(len(rel.cells) for rel in releases) >= 6
    assert _worst_rolling_loss(losses, params.budget_period_seconds) <= 6.0 * (1 + 1e-9)
    assert _worst_loss_by_reading_hour(releases, params.budget_period_seconds) <= 6.0 * (1 + 1e-9)
    records = [r for rel in releases for r in rel.cells]
    assert sum(r["n_readings"] for r in records) <= sum(map(len, windows))
    for record in records:
        assert record["mean_error"] <= T
        assert 1 <= _hours(record["window_end"]) - _hours(record["window_start"]) <= span


def test_auto_counts_the_carried_pairs_with_the_windows_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One cell, 6 new vessels an hour (6 pairs a window); the carry grows by 6 an hour until
    # the four-hour span is released. Under a limit of 6 only the first window (6 pooled
    # pairs) is the optimiser's: every later one holds its own 6 and the carry's.
    used = _planners_used(monkeypatch)
    windows = [[(0, 6 * h + v, 30.0 + v) for v in range(6) for _ in range(2)] for h in range(4)]
    params = _params(
        vehicle_budget=6.0, max_span_hours=4, coarsest_resolution=8, budget_planner="auto",
        optimiser_max_pairs=6,
    )  # fmt: skip
    _run(params, windows)
    assert used == [("optimiser", 6), ("rules", 12), ("rules", 18), ("rules", 24)]


def _six_vessels_an_hour(hours: Iterable[int]) -> tuple[Any, list[WindowRelease]]:
    """Six new vessels with 2 readings each in the centre cell in each of ``hours``, released
    by the offline engine under a budget of 6 per 6 hours with spans of up to 4 hours: the
    engine and its releases."""
    from stream_dp.config import load_settings
    from stream_dp.engine import OfflineEngine

    lat, lon = h3.cell_to_latlng(CENTRE)
    readings = [
        {"vehicle_id": f"v{6 * h + v}", "ts": h * HOUR + 100 * v + i, "lat": lat, "lon": lon,
         "speed": 30.0 + v}
        for h in hours for v in range(6) for i in range(2)
    ]  # fmt: skip
    settings = load_settings(
        app_id="test", upper=U, resolution=8, coarsest_resolution=8, target_mean_error=T,
        variance_share=0.0, vehicle_budget=6.0, budget_period_seconds=6 * HOUR,
        max_span_hours=4, partitions=2,
    )  # fmt: skip
    engine = OfflineEngine(settings, LaplaceNoise())
    return engine, list(engine.feed(readings)) + list(engine.finish())


def test_a_carry_across_hours_without_readings_is_withheld() -> None:
    """Readings in hours 0-2 and 20 only (no window in between): the carry of hour 2 reaches
    hour 20, too old to pool under max_span_hours 4; withheld and counted, never a 21-hour
    record."""
    _, releases = _six_vessels_an_hour((0, 1, 2, 20))
    assert [r.window_start // HOUR for r in releases] == [0, 1, 2, 20]
    assert all(
        _hours(c["window_end"]) - _hours(c["window_start"]) <= 4 for r in releases for c in r.cells
    )
    # Hour 20 pools nothing of hours 0-2: its 36 stale readings are withheld; its own 12
    # are held (carried on to pool with later hours), not withheld.
    last = releases[-1]
    assert last.cells == [] and last.summary["readings_withheld"] == 36
    assert last.summary["readings_held"] == 12


def _hours(stamp: str) -> int:
    day, hour = int(stamp[8:10]), int(stamp[11:13])
    return (day - 1) * 24 + hour


def test_the_guarantee_test_sees_a_ledger_that_forgets() -> None:
    """Without its history (a ledger rebuilt empty every window) the same data overspends:
    the property above is what the ledger buys."""
    params = _params(vehicle_budget=3.0, vehicle_budget_burst=3.0, max_span_hours=1)
    windows = _busy_windows(12, 3)
    losses = []
    for hour, readings in enumerate(windows):
        ledger = BudgetLedger(params.budget_period_seconds, None)
        release = release_window(hour * HOUR, _window(hour * HOUR, readings), params,
                                 LaplaceNoise(), 0, ledger)  # fmt: skip
        assert release.loss is not None
        losses.append(release.loss)
    assert _worst_rolling_loss(losses, params.budget_period_seconds) > 3.0 + 1e-6
    assert math.isfinite(_worst_rolling_loss(losses, params.budget_period_seconds))


def test_release_prints_the_busiest_loss_and_writes_the_ledger_audit(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from stream_dp.cli import main

    rows = ["vehicle_id,ts,lat,lon,speed"]
    lat, lon = h3.cell_to_latlng(CENTRE)
    for hour in range(4):
        for v in range(40):
            for i in range(3):
                rows.append(f"v{v},{hour * HOUR + 60 * v + i},{lat},{lon},{20 + v % 7}")
    source = tmp_path / "in.csv"
    source.write_text("\n".join(rows) + "\n")
    audit = tmp_path / "ledger.jsonl"
    code = main([
        "release", str(source), "--out", str(tmp_path / "out.jsonl"), "--ledger-out",
        str(audit), "--target-mean-error", "10", "--coarsest-resolution", "6",
        "--variance-share", "0", "--vehicle-budget", "3", "--budget-period-seconds", "21600",
    ])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "busiest vehicle's loss over the run: epsilon" in err
    assert "at most epsilon 3 per 6 hours" in err  # the promise with its period (issue 34)
    lines = [orjson.loads(line) for line in audit.read_text().splitlines()]
    assert len(lines) == 40 and {"vehicle_id", "loss", "loss_pld"} == set(lines[0])
    busiest = max(row["loss"] for row in lines)
    assert 0 < busiest <= 3.0 + 1e-9
    assert f"epsilon {busiest:.2f} (basic)" in err
    assert all(row["loss_pld"] is not None for row in lines)  # the test env has dp-accounting
    assert all(0 < row["loss_pld"] <= row["loss"] + 1e-9 for row in lines)


def test_the_run_losses_count_a_failed_window_at_its_ledger_charge() -> None:
    """Issue 25: a failed window under a vehicle budget is charged per-vehicle ε (no cells
    read); the audit and the busiest line add that charge, not cells × ``epsilon``."""
    from stream_dp.dp.pld_accounting import pld_available
    from stream_dp.release.run_losses import RunLosses

    runs = RunLosses(_params())
    failed = WindowLoss.of_losses(0, ["a", "b"], [3, 1], [0.6, 0.25])
    runs.add(WindowRelease(0, [], {"status": "failed"}, failed))
    assert runs.basic("a") == pytest.approx(0.6) and runs.basic("b") == pytest.approx(0.25)
    assert runs.busiest()[0] == pytest.approx(0.6)
    rows = {row["vehicle_id"]: row for row in runs.rows()}
    assert rows["a"]["loss"] == pytest.approx(0.6)
    if pld_available():
        assert rows["a"]["loss_pld"] == pytest.approx(0.6)


def test_the_run_losses_add_each_vehicles_cells_at_their_exact_epsilon() -> None:
    """The audit (``--ledger-out``) counts each read at its cell's own ε: its basic figure is
    the ledger's charge to the last bit (grid values and their sums are exact in binary)."""
    from stream_dp.release.run_losses import RunLosses

    releases, losses = _run(_params(), _busy_windows(6, 1))
    runs = RunLosses(_params())
    for release in releases:
        runs.add(release)
    charged: defaultdict[str, float] = defaultdict(float)
    for loss in losses:
        for name, value in zip(loss.vehicles, loss.loss.tolist(), strict=True):
            charged[name] += value
    assert {name: runs.basic(name) for name in charged} == dict(charged)
    epsilons = {r["epsilon"] for rel in releases for r in rel.cells}
    assert any(e != round(e, 2) for e in epsilons)  # off the old 0.01 grid: 0.3671875 and such


def test_pld_composes_cells_of_different_epsilon_below_their_sum() -> None:
    from stream_dp.dp.pld_accounting import mixed_pld_loss, pld_loss

    mixed = mixed_pld_loss({0.1: 200, 0.35: 40}, 0.0, 1e-6)
    assert mixed is not None and mixed < 0.1 * 200 + 0.35 * 40
    # One ε alone: the same figure as the single-ε accountant.
    assert mixed_pld_loss({0.5: 30}, 0.0, 1e-6) == pytest.approx(pld_loss(30, 0.5, 0.0, 1e-6))
    assert mixed_pld_loss({}, 0.0, 1e-6) == 0.0


def test_the_offline_engine_passes_each_window_carry_to_the_next() -> None:
    engine, releases = _six_vessels_an_hour(range(6))
    records = [r for rel in releases for r in rel.cells]
    assert len(records) == 1
    assert (records[0]["window_start"], records[0]["window_end"]) == (
        "1970-01-01T00:00:00Z", "1970-01-01T04:00:00Z",
    )  # fmt: skip
    assert records[0]["n_readings"] == 48  # four hours' readings, pooled once
    assert engine.carry is not None and int(engine.carry.count.sum()) == 24  # hours 4 and 5


def test_a_vehicle_below_its_cells_cap_is_charged_its_share_of_the_cells_epsilon() -> None:
    """The ledger charges each vehicle what it loses (§13.1, the loss): the cell's ε for a
    vehicle at the cap, ``ε k / c`` rounded up to the grid for one with k < c kept readings;
    the run's audit adds the same charges."""
    from stream_dp.release.run_losses import RunLosses

    counts, readings = _heavy_and_light()
    params = _params(max_span_hours=1, vehicle_budget=24.0, vehicle_budget_burst=4.0)
    releases, losses = _run(params, [readings], ends=True)
    (record,) = releases[0].cells
    assert record["cap"] >= 24
    charged = _assert_charged_their_shares(releases[0], record, counts)
    runs = RunLosses(params)
    runs.add(releases[0])
    assert {name: runs.basic(name) for name in charged} == charged


def test_with_a_variance_share_every_vehicle_read_pays_the_whole_epsilon() -> None:
    """The variance runs at the cell's ``s ε`` whatever a vehicle's share of the mean, and the
    run's PLD audit composes a read as one cell's mean and variance: with ``s > 0`` the ledger
    keeps charging the cell's whole ε (§13.1, the loss)."""
    _, readings = _heavy_and_light()
    params = _params(max_span_hours=1, vehicle_budget=40.0, vehicle_budget_burst=8.0,
                     variance_share=0.25)  # fmt: skip
    releases, losses = _run(params, [readings], ends=True)
    (record,) = releases[0].cells
    assert record["cap"] > 5  # light vehicles below the cap: they would pay less with s = 0
    assert set(losses[0].loss.tolist()) == {record["epsilon"]}


def test_a_pooled_span_charges_each_vehicle_its_share_of_its_pooled_readings() -> None:
    """The share reads the pooled counts: over a span, a vehicle's kept readings of all the
    span's hours against the span cell's cap."""
    hours = 3
    heavy = [(0, v, 30.0) for v in range(3) for _ in range(8)]  # three vessels, 8 an hour
    light = [(0, 10 + v, 20.0 + v) for v in range(30)]  # thirty, one reading an hour
    windows = [heavy + light for _ in range(hours)]
    params = _params(
        max_span_hours=hours,
        vehicle_budget=24.0,
        vehicle_budget_burst=4.0,
        budget_period_seconds=96 * HOUR,
    )  # slow pacing: the hours wait, pooled
    releases, _ = _run(params, windows, ends=True)
    records = [(rel, r) for rel in releases for r in rel.cells]
    assert len(records) == 1
    rel, record = records[0]
    span = _hours(record["window_end"]) - _hours(record["window_start"])
    assert span == hours  # the three hours pooled into one record
    per_vehicle = {f"v{v}": 8 * hours for v in range(3)} | {f"v{10 + v}": hours for v in range(30)}
    _assert_charged_their_shares(rel, record, per_vehicle)


def _heavy_and_light() -> tuple[dict[str, int], list[tuple[int, int, float]]]:
    """Per vehicle its readings in one cell (three heavy, 24 each; 37 light, 4-8), and the
    readings."""
    counts = {f"v{i}": 24 if i < 3 else 4 + i % 5 for i in range(40)}
    readings = [(0, int(name[1:]), float(10 + i % 40)) for name, n in counts.items()
                for i in range(n)]  # fmt: skip
    return counts, readings


def _assert_charged_their_shares(
    release: WindowRelease, record: dict[str, Any], counts: dict[str, int]
) -> dict[str, float]:
    """The release charged each vehicle of ``counts`` (its readings in ``record``) the
    record's ε at the cap, else ``ε k / c`` rounded up to the grid (less than ε); returns the
    charges."""
    eps, cap = record["epsilon"], record["cap"]
    assert release.loss is not None
    charged = dict(zip(release.loss.vehicles, release.loss.loss.tolist(), strict=True))
    assert sorted(charged) == sorted(counts)
    for name, k in counts.items():
        share = eps * min(k, cap) / cap
        if k >= cap:
            assert charged[name] == eps
        else:
            assert share <= charged[name] <= share + 2 * EPSILON_STEP < eps
    return charged
