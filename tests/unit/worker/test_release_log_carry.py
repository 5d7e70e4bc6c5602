"""Issue 25: a release's carry (entries deferred to the next window) is stored with the
release in the release log, read back exactly, and only the winning copy's carry counts."""

from __future__ import annotations

import numpy as np
import pytest

from stream_dp.dp.budget_ledger import WindowLoss
from stream_dp.windows.columns import WindowColumns
from stream_dp.wire import internal_records as rec
from stream_dp.worker.release_log import ReleaseLogIndex
from stream_dp.worker.release_snapshots import SnapshotTracker

W = 3600


def carry_of(vehicle: str, n: int = 3) -> WindowColumns:
    """A deferred entry set made by hand: ``n`` readings of ``vehicle`` in two cells."""
    cells = ["8a2a1072b59ffff"] * (n - 1) + ["8a2a1072b5bffff"]
    return WindowColumns.from_readings(
        cells, [vehicle] * n, [float(W + i) for i in range(n)], [10.0 + i for i in range(n)], 10
    )


def stored_copy(
    attempt: str, window: int, carry: WindowColumns | None, loss: bool = True
) -> list[bytes]:
    release = {
        "window_start": window,
        "cells": [{"cell": "c", "mean": 1.0, "release_id": f"{attempt}-{window}"}],
        "summary": {"K": 1, "privacy_loss": 1.0, "release_id": "w"},
    }
    parts = []
    if loss:
        counted = WindowLoss.from_counts(window, 1.0, [f"v-{attempt}"], [1])
        parts += rec.encode_loss(counted, attempt)
    if carry is not None:
        parts += rec.encode_carry(window, carry, attempt)
    return parts + rec.encode_release(release, attempt)


def read(values: list[bytes]):
    index = ReleaseLogIndex()
    return [w for offset, v in enumerate(values) if (w := index.add(offset, v)) is not None]


def assert_same_columns(a: WindowColumns, b: WindowColumns) -> None:
    assert a.cell_names == b.cell_names and a.vehicle_names == b.vehicle_names
    for name in ("cell_code", "vehicle_code", "count", "total", "total_sq",
                 "reading_pair", "reading_ts", "reading_value"):  # fmt: skip
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert getattr(a, name).dtype == getattr(b, name).dtype


def test_a_carry_round_trips_through_the_wire_codec():
    carry = carry_of("boat-1", 5)
    parts = rec.encode_carry(W, carry, "a")
    assembler = rec.PartAssembler()
    whole = [w for p in parts if (w := assembler.add(rec.decode(p))) is not None][0]
    start, back = rec.carry_payload(whole)
    assert start == W
    assert_same_columns(back, carry)
    assert back.pair_index() == carry.pair_index()


def test_the_stored_release_carries_its_own_carry_and_its_first_offset():
    carry = carry_of("boat-1")
    winners = read(stored_copy("a", W, carry))
    assert len(winners) == 1 and winners[0].offset == 0
    assert winners[0].carry is not None
    assert_same_columns(winners[0].carry, carry)


def test_only_the_winning_copy_s_carry_is_kept():
    a = stored_copy("a", W, carry_of("boat-a"))
    b = stored_copy("b", W, carry_of("boat-b"))
    winners = read(a[:-1] + b + a[-1:])  # a stored its carry, b completed first
    assert [w.attempt for w in winners] == ["b"]
    assert winners[0].carry.vehicle_names == ("boat-b",)
    no_carry = stored_copy("c", W, None)
    winners = read(no_carry + a)
    assert [w.attempt for w in winners] == ["c"] and winners[0].carry is None


def test_a_carry_without_its_release_is_never_fed_on():
    a = stored_copy("a", W, carry_of("boat-a"))
    winners = read(a[:-1])  # crashed after storing the carry, before its release
    assert winners == []


def test_a_snapshot_keeps_the_window_whose_carry_is_pending():
    """The carry's window is read again after a snapshot even when the ledger has pruned it."""
    tracker = SnapshotTracker()
    tracker.note_stored(W, 0, 1.0)
    tracker.note_stored(2 * W, 10, 1.0)
    pending = tracker.snapshot([2 * W, W], next_offset=20)
    assert pending.read_from == 0  # the carry's window W stored at offset 0 is kept
    dropped = tracker.snapshot([2 * W], next_offset=20)
    assert dropped.read_from == 10


def releaser(**settings: object):
    from stream_dp.config import Settings
    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.worker.metrics import ServiceMetrics
    from stream_dp.worker.release_service import ReleaseService

    fixed_epsilon = {"budget_period_seconds": 2 * W, "vehicle_budget": None}  # unless given
    chosen = Settings(**{**fixed_epsilon, **settings})  # type: ignore[arg-type]
    return ReleaseService(chosen, None, None, ServiceMetrics(), LaplaceNoise())  # type: ignore[arg-type]


def test_the_budget_gauge_shows_the_promise_and_0_without_one():
    def gauge(service) -> float:
        return service.metrics.registry.get_sample_value("stream_dp_vehicle_budget_epsilon")

    assert gauge(releaser(vehicle_budget=14.0, target_mean_error=10.0)) == 14.0
    assert gauge(releaser(budget_cap=5.0)) == 5.0  # the fixed-epsilon mode's cap
    assert gauge(releaser()) == 0.0  # no promise: the alerts stay quiet


def test_the_rebuild_takes_the_latest_stored_window_s_carry_and_keeps_it_in_snapshots():
    """Read in the rebuild's order: the latest window's carry is pending (its window is kept
    for the next rebuild although the ledger has pruned it); a later window stored without a
    carry means every deferred reading was released: none is fed on."""
    service = releaser()
    service.rebuilding = True
    pending = carry_of("boat-1")
    copies = stored_copy("a", W, None) + stored_copy("b", 2 * W, pending)
    for winner in read(copies):
        service._mark_stored(winner)
    assert service.carry_from == 2 * W
    assert_same_columns(service.carry, pending)
    for winner in read(stored_copy("c", 10 * W, None)):
        service._mark_stored(winner)  # window 10W took it in and deferred nothing
    assert service.carry is None and 2 * W not in service.windows_to_keep()


def test_a_pending_carry_s_window_is_kept_though_the_ledger_holds_nothing_of_it():
    service = releaser()
    for winner in read(stored_copy("a", W, carry_of("boat-1"), loss=False)):
        service._mark_stored(winner)  # nobody was charged: the ledger holds no entry
    assert [e.window_start for e in service.ledger.entries()] == []
    assert service.windows_to_keep() == [W]


def test_the_period_loss_gauge_sums_per_cell_epsilon_from_the_stored_losses():
    """Mixed ε (issue 25): vehicle b is in 3 cells of ε 0.2, 0.5, 1.3 (2.0) in one window and
    one cell of ε 0.7 in the next; a is in 4 cheap cells. The gauge is the ledger's 2.7, read
    back from the release log, where cells × the largest ε would say 4 × 1.3 + 1.3."""
    service = releaser(vehicle_budget=14.0, target_mean_error=10.0)
    first = WindowLoss.of_losses(W, ["a", "b"], [4, 3], [0.4, 2.0])
    second = WindowLoss.of_losses(2 * W, ["b"], [1], [0.7])
    release = {"cells": [], "summary": {"K": 1, "privacy_loss": 0.0, "release_id": "w"}}
    log = []
    for i, loss in enumerate((first, second)):
        attempt = f"x{i}"
        log += rec.encode_loss(loss, attempt)
        log += rec.encode_release({**release, "window_start": loss.window_start}, attempt)
    for winner in read(log):
        service._mark_stored(winner)
    registry = service.metrics.registry
    value = registry.get_sample_value("stream_dp_vehicle_privacy_loss_period_max_epsilon")
    assert value == pytest.approx(2.7)
    pld = registry.get_sample_value("stream_dp_vehicle_privacy_loss_period_max_epsilon_pld")
    assert pld == pytest.approx(service.accountant.period_pld(2.7))  # the accountant's figure


def test_a_carry_is_only_taken_forward_in_time():
    """A window completing out of order (older than the one that stored the carry) is
    released without it; the next later window takes it."""
    from stream_dp.windows.state import PartialColumns

    service = releaser()
    for winner in read(stored_copy("a", 2 * W, carry_of("boat-1"))):
        service._mark_stored(winner)
    coordinator = service.coordinator
    for p in range(coordinator.partitions):
        coordinator.set_progress(p, float("inf"), {})
    partial = PartialColumns.from_readings(["c"], ["boat-2"], [float(W)], [5.0], 10)
    coordinator.add_partial(W, 0, partial)  # an older window, ready now
    assert service.carry_for_next() is None
    for winner in read(stored_copy("b", W, None)):
        service._mark_stored(winner)  # stored: the carry of 2W stays pending
    assert service.carry_from == 2 * W and service.carry is not None
    coordinator.add_partial(3 * W, 0, partial)
    assert service.carry_for_next() is service.carry


def test_a_carry_across_a_gap_is_withheld_not_pooled_into_a_long_span():
    """Issue 25: the pending carry (readings of windows 0-2) is handed to the next ready
    window, 20 windows later; with max_span_hours 4 its pairs are too old to pool: the release
    withholds (and counts) them, and no record covers more than 4 hours."""
    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.release.window import release_ready_windows
    from stream_dp.windows.state import PartialColumns

    service = releaser(
        vehicle_budget=6.0, target_mean_error=10.0, variance_share=0.0, max_span_hours=4,
        coarsest_resolution=8, resolution=8, upper=65.0,
    )  # fmt: skip
    cell = "882a1072b5fffff"  # res 8
    # What windows 0-2 deferred: 6 new boats an hour, 2 readings each (they need a span).
    stale = WindowColumns.from_readings(
        [cell] * 36, [f"old-{6 * (i // 12) + i % 6}" for i in range(36)],
        [float((i // 12) * W + i) for i in range(36)], [30.0 + i % 6 for i in range(36)], 10,
    )  # fmt: skip
    for winner in read(stored_copy("a", 2 * W, stale)):
        service._mark_stored(winner)
    coordinator = service.coordinator
    for p in range(coordinator.partitions):
        coordinator.set_progress(p, float("inf"), {})
    partial = PartialColumns.from_readings(
        [cell] * 12, [f"new-{i % 6}" for i in range(12)], [float(20 * W + i) for i in range(12)],
        [30.0 + i % 6 for i in range(12)], 10,
    )  # fmt: skip
    coordinator.add_partial(20 * W, 0, partial)
    assert_same_columns(service.carry_for_next(), stale)  # the worker hands it on ...
    (release,) = list(
        release_ready_windows(
            coordinator, service.params, LaplaceNoise(), service.ledger, service.carry_for_next
        )
    )
    # ... and the release drops it: its 36 readings are withheld (counted), none in a record
    # (pooled, they would meet T in one record covering hours 0-20).
    assert release.window_start == 20 * W
    assert release.summary["readings_withheld"] == 36
    assert release.summary["readings_held"] == 12  # the window's own: carried on
    assert release.cells == []
    service._observe(release, 0.5, True)  # the metrics count held apart from withheld
    value = service.metrics.registry.get_sample_value
    assert value("stream_dp_readings_withheld_total") == 36
    assert value("stream_dp_readings_held_total") == 12
    assert (value("stream_dp_cells_held"), value("stream_dp_cells_withheld")) == (1, 0)
    # budget_planner auto left the window (a few pooled pairs) to the optimiser: counted so
    assert release.summary["planned_by"] == "optimiser"
    planned = "stream_dp_windows_planned_total"
    assert (value(planned, {"planner": "optimiser"}), value(planned, {"planner": "rules"})) == (
        1, 0,
    )  # fmt: skip
