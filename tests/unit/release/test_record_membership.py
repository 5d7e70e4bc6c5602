"""Which readings each released record holds (``tests.support.membership``): the truth the
usefulness benchmarks score ``mean_error`` against (docs/math.md §12.1, §13.3). Checked per
record against what the release published: its ``n_readings`` (M), its vehicles, its kept
count (S) and, without noise, its mean (the mean of each kept vehicle's first readings)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import h3
import numpy as np
import pytest

from stream_dp.release.accounting import PrivacyAccountant
from tests.support.membership import (
    MemberPair,
    MembershipError,
    RecordMembers,
    member_readings,
    recording_members,
)
from tests.support.noise_free import NoNoise
from tests.unit.release.test_span_policy import _harbour
from tests.unit.release.test_span_policy import _params as _span_params
from tests.unit.release.test_vehicle_budget import CELLS, HOUR, U, _window


class Readings:
    """Readings as columns: finest cell, vehicle, time, its window, value (clamped to U)."""

    def __init__(self, cells: list[str], vehicles: list[str], ts: list[float], values: Any):
        self.cells, self.vehicles = cells, vehicles
        self.ts = np.asarray(ts, dtype=np.float64)
        self.window = (self.ts // HOUR).astype(np.int64) * HOUR
        self.value = np.clip(np.asarray(values, dtype=np.float64), 0.0, U)

    def held(self, members: list[RecordMembers]) -> np.ndarray:
        return member_readings(members, self.cells, self.vehicles, self.window)

    def in_cell_and_span(self, record: dict[str, Any]) -> int:
        """The readings of the record's cell within its span (the older truth's count)."""
        start, end = (_epoch(record[k]) for k in ("window_start", "window_end"))
        res = int(record["resolution"])
        return sum(
            1
            for c, w in zip(self.cells, self.window.tolist(), strict=True)
            if start <= w < end and h3.cell_to_parent(c, res) == record["cell"]
        )


def _epoch(stamp: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())


def _check(
    records: list[dict[str, Any]], members: list[RecordMembers], readings: Readings
) -> np.ndarray:
    """Every record's members against what it published; the readings' record indices."""
    assert len(members) == len(records) > 0
    held = readings.held(members)  # raises unless every pair fits its readings, once each
    for k, (record, member) in enumerate(zip(records, members, strict=True)):
        assert member.cell == record["cell"]
        mine = np.flatnonzero(held == k)
        assert sum(p.count for p in member.pairs) == len(mine) == record["n_readings"]
        vehicles = {readings.vehicles[i] for i in mine}
        assert len(vehicles) == record["n_vehicles"] and set(member.kept) == vehicles
        assert sum(member.kept.values()) == record["n_readings_used"]
        kept = []
        for vehicle, n in member.kept.items():
            own = mine[[readings.vehicles[i] == vehicle for i in mine.tolist()]]
            order = np.lexsort((readings.value[own], readings.ts[own]))  # the first by time
            kept.extend(readings.value[own[order[:n]]].tolist())
        assert record["mean"] == pytest.approx(min(max(np.mean(kept), 0.0), U), abs=1e-9)
    return held


def _tagged(windows: list[list[tuple[int, int, float]]]) -> Readings:
    """The harbour windows' readings, timed as ``test_vehicle_budget._window`` times them."""
    cells, vehicles, ts, values = [], [], [], []
    for hour, window in enumerate(windows):
        for i, (c, v, x) in enumerate(window):
            cells.append(CELLS[c])
            vehicles.append(f"v{v}")
            ts.append(float(hour * HOUR + i))
            values.append(x)
    return Readings(cells, vehicles, ts, values)


def _release_harbour(
    monkeypatch: pytest.MonkeyPatch, windows: list[list[tuple[int, int, float]]], **params: Any
) -> tuple[list[dict[str, Any]], list[RecordMembers], Counter[str]]:
    """The windows released without noise as the offline engine releases them (an empty
    window is no window: the carry crosses it), with the members recorded and the span
    policy's actions counted."""
    import stream_dp.release.vehicle_budget.stages as stages_module
    import stream_dp.release.window as window_module

    seen: Counter[str] = Counter()
    pooling, fresh = stages_module.choose_pooling, stages_module.fresh_carry

    def counting_pooling(*args: Any) -> Any:
        choice = pooling(*args)
        seen["due"] += len(choice.due)
        seen["withheld"] += choice.withheld
        seen["set aside"] += 0 if choice.aside is None else int(choice.aside.count.sum())
        return choice

    def counting_fresh(*args: Any) -> Any:
        carry, stale = fresh(*args)
        seen["cut"] += stale
        return carry, stale

    monkeypatch.setattr(stages_module, "choose_pooling", counting_pooling)
    monkeypatch.setattr(stages_module, "fresh_carry", counting_fresh)
    p = _span_params(**params)
    ledger, carry, records = PrivacyAccountant(p).new_ledger(), None, []
    with recording_members() as members:
        for hour, readings in enumerate(windows):
            if not readings:
                continue
            release = window_module.release_window(
                hour * HOUR, _window(hour * HOUR, readings), p, NoNoise(), 0, ledger, carry
            )
            assert release.loss is not None
            ledger.record_released(release.loss)
            carry = release.carry
            records.extend(release.cells)
    return records, members, seen


def test_members_are_each_record_s_readings_with_spans_cuts_and_due_cells(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Harbour data (moored vessels breaking pooled cells) with hours without readings: spans,
    carried pairs withheld, carries cut across a gap, due cells whose window's readings are
    set aside. Each record's members are exactly its readings; the older truth (every reading
    of the cell and span) credits some record with readings it does not hold."""
    records, members, seen, older = [], [], Counter(), 0
    for seed in (0, 3):
        windows = _harbour(14, seed)
        windows[5] = windows[6] = []  # a gap: the carry crosses it and is cut
        got, mine, counts = _release_harbour(
            monkeypatch, windows, coarsest_resolution=6, max_span_hours=4
        )
        readings = _tagged(windows)
        _check(got, mine, readings)
        older += sum(readings.in_cell_and_span(r) > r["n_readings"] for r in got)
        records += got
        members += mine
        seen += counts
    assert seen["due"] and seen["withheld"] and seen["set aside"] and seen["cut"]
    assert any(_epoch(r["window_end"]) - _epoch(r["window_start"]) > HOUR for r in records)
    assert older > 0


def test_a_count_no_run_of_windows_fits_or_a_reading_in_two_records_is_refused() -> None:
    readings = Readings(["a", "a", "a"], ["v", "v", "v"], [0.0, HOUR, 2.0 * HOUR], [1, 2, 3])
    run = RecordMembers(2 * HOUR, 0, "a", (MemberPair("a", "v", 2, HOUR),), {"v": 2})
    assert readings.held([run]).tolist() == [-1, 0, 0]
    before = RecordMembers(2 * HOUR, 0, "a", (MemberPair("a", "v", 1, HOUR),), {"v": 1})
    assert readings.held([before]).tolist() == [-1, 0, -1]  # the releasing window set aside
    with pytest.raises(MembershipError, match="no run"):
        readings.held([RecordMembers(2 * HOUR, 0, "a", (MemberPair("a", "v", 3, HOUR),), {})])
    with pytest.raises(MembershipError, match="two records"):
        readings.held([run, run])


def test_recording_changes_nothing_released(monkeypatch: pytest.MonkeyPatch) -> None:
    import stream_dp.release.window as window_module

    monkeypatch.setattr(window_module, "new_release_nonce", lambda: "fixed")
    windows = _harbour(6, 1)
    plain = [r for rs in _plain_release(windows) for r in rs]
    with recording_members() as members:
        recorded = [r for rs in _plain_release(windows) for r in rs]
    assert recorded == plain and len(members) == len(plain) > 0


def _plain_release(windows: list[list[tuple[int, int, float]]]) -> list[list[dict[str, Any]]]:
    from stream_dp.release.window import release_window

    p = _span_params(coarsest_resolution=6, max_span_hours=4)
    ledger, carry, out = PrivacyAccountant(p).new_ledger(), None, []
    for hour, readings in enumerate(windows):
        release = release_window(
            hour * HOUR, _window(hour * HOUR, readings), p, NoNoise(), 0, ledger, carry
        )
        ledger.record_released(release.loss)
        carry = release.carry
        out.append(release.cells)
    return out


@pytest.mark.slow
def test_the_ais_week_s_records_hold_their_members() -> None:
    """The budget profile on the bundled AIS week: each record's members are its readings;
    the older truth credits records with readings they do not hold (withheld ones)."""
    from stream_dp.commands.profile import BUDGET_PROFILE
    from stream_dp.config import load_settings
    from stream_dp.engine import OfflineEngine
    from stream_dp.sources.sample import load_sample
    from tests.support.settings import FIXED_MODE

    settings = load_settings(app_id="t", upper=U, **{**FIXED_MODE, **BUDGET_PROFILE})
    engine = OfflineEngine(settings, NoNoise())
    sample = load_sample()
    records: list[dict[str, Any]] = []
    with recording_members() as members:
        for batch in (engine.feed(sample), engine.finish()):
            for release in batch:
                records.extend(release.cells)
    assert engine.counts.accepted == len(sample)
    res = settings.resolution
    readings = Readings(
        [h3.latlng_to_cell(r["lat"], r["lon"], res) for r in sample],
        [r["vehicle_id"] for r in sample], [float(r["ts"]) for r in sample],
        [float(r["speed"]) for r in sample],
    )  # fmt: skip
    _check(records, members, readings)
    older = [readings.in_cell_and_span(r) - r["n_readings"] for r in records]
    assert min(older) >= 0 and sum(x > 0 for x in older) >= 3


def test_a_due_cell_s_record_holds_none_of_the_releasing_window_s_readings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hour 0 (slow pacing: the cell waits for a longer span): thirty passing vessels and two
    readings of vessel 100 (held at R0 = 8). Hour 1:
    vessel 100 and two others moored: pooled, the cell misses T, so it is due and released
    from hour 0's readings; vessel 100's hour-1 readings in the same cell are set aside for
    the next span, not credited to this record (its pair ends the window before)."""
    from tests.unit.release.test_span_policy import MOORED, PASSING, SLOW_PACE

    windows = [[*PASSING, (0, 100, 20.0), (0, 100, 21.0)], MOORED]
    records, members, seen = _release_harbour(
        monkeypatch, windows, coarsest_resolution=8, budget_period_seconds=SLOW_PACE
    )
    assert seen["due"] == 1 and seen["set aside"] == 180
    (record,) = records
    assert record["n_readings"] == 62
    assert {(p.vehicle, p.count) for p in members[0].pairs} >= {("v100", 2)}
    held = _check(records, members, _tagged(windows))
    assert int((held == 0).sum()) == 62 and (held[62:] == -1).all()
