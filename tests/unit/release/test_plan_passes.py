"""The compiled passes over a vehicle-budget plan's entries
(``stream_dp.release.vehicle_budget.plan_passes``)
give exactly what the numpy forms they replace give (issue 25, the 1M-reading window): the
planned pairs' counts and the window's charge (with and without its read entries: what the
plan is checked by), on plans with sit-outs, dropped cells and cells not released."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from stream_dp.dp import kernels
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.randomness import RandomSource
from stream_dp.release import window
from stream_dp.release.accounting import PrivacyAccountant, WindowReads
from stream_dp.release.records import WindowRelease
from stream_dp.release.state import WindowCache
from stream_dp.release.vehicle_budget import plan as budget
from stream_dp.release.vehicle_budget import stages as budget_stages
from stream_dp.release.vehicle_budget.plan_passes import read_payments
from stream_dp.release.vehicle_budget.planner import BudgetPlan, plan_budget
from stream_dp.release.window import release_window
from tests.unit.dp.test_vehicle_budget_plan import T, U, random_occupancy
from tests.unit.release.test_budget_fast_paths import _roaming_occupancy
from tests.unit.release.test_vehicle_budget import _params, _window


def _tight_plan(seed: int) -> tuple[Occupancy, BudgetPlan, np.ndarray]:
    """A plan where many vehicles sit out and some cells are dropped."""
    rng = np.random.default_rng(seed)
    occ = _roaming_occupancy(rng, 60, 600)
    short = rng.random(len(occ.vehicles)) < 0.15
    room = np.where(short, rng.uniform(0.0, 6.0, len(occ.vehicles)), 1000.0)
    plan = plan_budget(
        occ, room, target=T, upper=U, variance_share=0.25, max_cell_epsilon=2.0, min_vehicles=2,
        prefix_limit=16,
    )  # fmt: skip
    sat_out = ~plan.kept & np.isfinite(plan.epsilon)[occ.cell_index]
    assert sat_out.sum() > 200 and 20 < plan.dropped.sum() < 40
    return occ, plan, room


def _arrays(value: object) -> object:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if dataclasses.is_dataclass(value):
        return [_arrays(getattr(value, f.name)) for f in dataclasses.fields(value)]
    return value


@pytest.mark.parametrize("seed", range(4))
def test_the_planned_pairs_counted_in_one_pass_equal_the_numpy_forms(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    occ, plan, _ = _tight_plan(seed)
    params = _params(variance_share=0.25, prefix_limit=16)
    fast, fast_g1, fast_sat_out = budget.planned_bound(occ, plan, params)
    monkeypatch.setattr(kernels, "use_compiled", lambda n: False)
    slow, slow_g1, slow_sat_out = budget.planned_bound(occ, plan, params)
    assert fast_sat_out == slow_sat_out > 50
    assert int(fast.grids.max()) < fast_g1 == slow_g1  # the sit-outs lower some vehicle's cells
    assert _arrays(fast) == _arrays(slow)


def _counted_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every pass of :data:`~stream_dp.dp.kernels.READ_LOSS` from now on (its entries), in a
    list that grows as they run."""
    passes: list[int] = []
    read_loss = kernels.READ_LOSS

    class Counted:
        def pick(self, n_items: int) -> Any:
            passes.append(n_items)
            return read_loss.pick(n_items)

        def __getattr__(self, name: str) -> Any:  # its forms, as the kernel's
            return getattr(read_loss, name)

    monkeypatch.setattr(kernels, "READ_LOSS", Counted())
    return passes


@pytest.mark.parametrize("seed", range(4))
def test_the_checks_charge_is_the_charges_bit_for_bit_and_one_pass_serves_both(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the plan is checked by (:meth:`PrivacyAccountant.vehicle_charges`) is, bit for
    bit and in both forms, what the window's charge records for each vehicle were the plan's
    cells released; the plan passes. The charge of the same entries reuses the check's pass;
    a charge of other entries (one more sat out, even in the same array) or other cells makes
    a pass of its own."""
    occ, plan, room = _tight_plan(seed)
    finite = np.isfinite(plan.epsilon)
    accountant = PrivacyAccountant(_params(), plan.epsilon)
    eps = accountant.cell_epsilons(len(occ.cells))
    passes = _counted_passes(monkeypatch)
    with kernels.forced("compiled"):
        charged = accountant.vehicle_charges(occ, plan.kept, finite, None)
        loss, _ = accountant.charge(3600, WindowReads(occ, plan.kept, finite))
        assert len(passes) == 1  # the charge reused the check's pass
        # Each against the last pass, which read the same entries and cells but for one.
        other = finite.copy()
        other[np.flatnonzero(other)[-1]] = False  # one cell fewer released
        kept = plan.kept.copy()
        other_loss, _ = accountant.charge(3600, WindowReads(occ, kept, other))
        kept[np.flatnonzero(kept)[0]] = False  # one entry more sat out, in the same array
        fewer_loss, _ = accountant.charge(3600, WindowReads(occ, kept, other))
    assert len(passes) == 3
    assert loss.losses is not None
    assert other_loss.losses is not None and fewer_loss.losses is not None  # each recomputed
    assert fewer_loss.losses.sum() < other_loss.losses.sum() < loss.losses.sum()
    with kernels.forced("numpy"):
        fresh = PrivacyAccountant(_params(), plan.epsilon)  # no pass to reuse
        numpy_charged = fresh.vehicle_charges(occ, plan.kept, finite, None)
    assert len(passes) == 4
    cells, _, vehicle, read_eps = read_payments(
        occ.cell_start, occ.vehicle_index, plan.kept, finite, eps, len(room), False
    )
    _, _, numpy_vehicle, numpy_read_eps = kernels.READ_LOSS.numpy(
        occ.cell_start, occ.vehicle_index, plan.kept, finite, eps, len(room), None, False
    )
    assert len(vehicle) == len(read_eps) == len(numpy_vehicle) == len(numpy_read_eps) == 0
    assert charged.tobytes() == numpy_charged.tobytes()
    assert (charged > 0).sum() == len(loss.losses) > 100
    assert charged[charged > 0].tobytes() == loss.losses.tobytes()
    assert cells.tolist() == occ.grids_per_vehicle(plan.kept).tolist()
    budget.check_plan(occ, plan, room, charged)  # within every room at the whole ε


def test_a_charge_by_own_shares_reuses_the_checks_pass_only_for_equal_shares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Charged by own shares (§13.1, "The loss"), the window's charge reuses the check's pass
    when the cap's kept counts and caps are equal, and with other kept counts makes its own:
    the charge a fresh accountant computes, not the reused one."""
    occ, plan, _ = _tight_plan(0)
    params = _params()
    bounded, _, _ = budget.planned_bound(occ, plan, params)
    capped, finite = bounded.capped, np.isfinite(plan.epsilon)
    assert capped is not None
    # Each kept count at least 2 halved: those vehicles' own shares of their cells fall.
    halved = dataclasses.replace(
        capped,
        kept_count=np.where(capped.kept_count > 1, capped.kept_count // 2, capped.kept_count),
    )
    passes = _counted_passes(monkeypatch)
    accountant = PrivacyAccountant(params, plan.epsilon)
    charged = accountant.vehicle_charges(occ, plan.kept, finite, capped)
    loss, _ = accountant.charge(3600, WindowReads(occ, plan.kept, finite, None, capped))
    assert len(passes) == 1
    halved_loss, _ = accountant.charge(3600, WindowReads(occ, plan.kept, finite, None, halved))
    assert len(passes) == 2
    fresh, _ = PrivacyAccountant(params, plan.epsilon).charge(
        3600, WindowReads(occ, plan.kept, finite, None, halved)
    )
    assert loss.losses is not None and halved_loss.losses is not None
    assert fresh.losses is not None and fresh.losses.tobytes() == halved_loss.losses.tobytes()
    assert charged[charged > 0].tobytes() == loss.losses.tobytes()
    assert halved_loss.losses.sum() < loss.losses.sum()
    # The same arrays changed in place after a pass are not the ones it read.
    counts = capped.kept_count.copy()
    in_place = dataclasses.replace(capped, kept_count=counts)
    accountant.charge(3600, WindowReads(occ, plan.kept, finite, None, in_place))
    counts[:] = halved.kept_count
    changed, _ = accountant.charge(3600, WindowReads(occ, plan.kept, finite, None, in_place))
    assert changed.losses is not None and changed.losses.tobytes() == fresh.losses.tobytes()
    # The same entries and cells without own shares (each vehicle the whole ε): another pass.
    passes.clear()
    whole, _ = accountant.charge(3600, WindowReads(occ, plan.kept, finite))
    assert len(passes) == 1 and whole.losses is not None
    assert whole.losses.sum() > loss.losses.sum()


@pytest.mark.parametrize("seed", range(4))
def test_the_charge_in_compiled_passes_equals_the_numpy_charge(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries kept in a released cell only: some cells the plan priced are not released."""
    occ, plan, _ = _tight_plan(seed)
    accountant = PrivacyAccountant(_params(), plan.epsilon)
    rng = np.random.default_rng(seed)
    released = np.isfinite(plan.epsilon) & (rng.random(len(occ.cells)) < 0.7)
    assert (np.isfinite(plan.epsilon) & ~released).any()
    reads = WindowReads(occ, plan.kept, released)
    with kernels.forced("compiled"):
        fast, fast_reads = accountant.charge(3600, reads)
    with kernels.forced("numpy"):
        slow, slow_reads = accountant.charge(3600, reads)
    assert (
        fast_reads is not None and slow_reads is not None and len(slow.vehicles) < len(occ.vehicles)
    )  # some unread
    assert fast == slow and fast.epsilon == slow.epsilon
    assert _arrays(fast.cells) == _arrays(slow.cells) and _arrays(fast.losses) == _arrays(
        slow.losses
    )
    assert fast_reads[0] == slow_reads[0]
    assert [_arrays(a) for a in fast_reads[1:]] == [_arrays(a) for a in slow_reads[1:]]


def _roaming_windows(hours: int, seed: int) -> list[list[tuple[int, int, float]]]:
    """3000 readings an hour of 400 vehicles over the 19 cells, each vehicle mostly away from
    its home cell: many cells per vehicle, so some run short of room and sit out."""
    rng = np.random.default_rng(seed)
    windows = []
    for _ in range(hours):
        vehicle = rng.integers(0, 400, 3000)
        cell = np.where(rng.random(3000) < 0.3, vehicle % 19, rng.integers(0, 19, 3000))
        value = rng.uniform(0, U, 3000)
        windows.append(list(zip(cell.tolist(), vehicle.tolist(), value.tolist(), strict=True)))
    return windows


def _release(
    windows: list[list[tuple[int, int, float]]], seed: int, span_hours: int = 1
) -> list[WindowRelease]:
    params = _params(vehicle_budget=6.0, max_span_hours=span_hours, target_mean_error=25.0)
    ledger = PrivacyAccountant(params).new_ledger()
    out = []
    for hour, readings in enumerate(windows):
        noise = LaplaceNoise(RandomSource.seeded_for_tests(seed + hour))
        release = release_window(hour * 3600, _window(hour * 3600, readings), params, noise,
                                 0, ledger)  # fmt: skip
        assert release.loss is not None
        ledger.record_released(release.loss)
        out.append(release)
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_a_budget_release_is_the_same_with_the_numpy_forms(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows whose vehicles run short of room (sit-outs) and with cells withheld."""
    windows = _roaming_windows(3, seed)
    monkeypatch.setattr(window, "new_release_nonce", lambda: "fixed")  # the same record ids
    fast = _release(windows, seed)
    monkeypatch.setattr(kernels, "use_compiled", lambda n: False)  # the charge's too
    slow = _release(windows, seed)
    assert all(len(r.cells) > 5 for r in fast)
    assert all(r.summary["vehicles_budget_limited"] > 0 for r in fast)
    for a, b in zip(fast, slow, strict=True):
        assert a.cells == b.cells and a.summary == b.summary and a.loss == b.loss
        assert a.loss is not None and b.loss is not None
        assert _arrays(a.loss.cells) == _arrays(b.loss.cells)
        assert _arrays(a.loss.losses) == _arrays(b.loss.losses)
        assert a.reads is not None and b.reads is not None
        assert [_arrays(x) for x in a.reads[1:]] == [_arrays(x) for x in b.reads[1:]]


def test_the_cell_totals_are_the_weighted_bincounts() -> None:
    """Also with a cell that has no entry (its total 0)."""
    occ = random_occupancy(np.random.default_rng(9), 30, 300)
    occ = dataclasses.replace(occ, cells=(*occ.cells, "zz"))
    expected = np.bincount(occ.cell_index, weights=occ.count, minlength=len(occ.cells))
    total = occ.total_per_cell()
    assert total.dtype == np.int64 and total[-1] == 0
    assert total.tolist() == expected.astype(np.int64).tolist()


def test_the_release_checks_the_plan_it_keeps_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The regrouping prices its choices with unchecked plans; the vehicle-budget stage
    checks the one it releases, and a plan that fails the check is not released (the
    release raises: its caller's failed outcome, ``release_ready_window``)."""
    checked: list[BudgetPlan] = []
    check = budget_stages.check_plan

    def recording(
        occupancy: Occupancy, plan: BudgetPlan, room: np.ndarray, charged: np.ndarray
    ) -> None:
        checked.append(plan)
        check(occupancy, plan, room, charged)

    monkeypatch.setattr(budget_stages, "check_plan", recording)
    (release,) = _release(_roaming_windows(1, 3), 3)
    assert len(checked) == 1 and release.cells
    assert {r["epsilon"] for r in release.cells} <= set(checked[0].epsilon.tolist())

    def failing(
        occupancy: Occupancy, plan: BudgetPlan, room: np.ndarray, charged: np.ndarray
    ) -> None:
        raise AssertionError("vehicle budget plan pays past a vehicle's room")

    monkeypatch.setattr(budget_stages, "check_plan", failing)
    with pytest.raises(AssertionError, match="past a vehicle's room"):
        _release(_roaming_windows(1, 3), 3)


def test_a_window_reads_its_vehicles_rooms_off_the_ledger_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The regrouping's price, its plans and the check read the same vehicles' rooms: the
    ledger is asked once per window and names, and the release is the one asking each time
    gives; other names are asked again."""
    windows = _roaming_windows(3, 4)
    monkeypatch.setattr(window, "new_release_nonce", lambda: "fixed")
    asked: list[int] = []
    room_of = budget.room_of

    def counting(mode: object, ledger: object, vehicles: tuple[str, ...], at: int) -> object:
        asked.append(len(vehicles))
        return room_of(mode, ledger, vehicles, at)  # type: ignore[arg-type]

    monkeypatch.setattr(budget, "room_of", counting)
    once = _release(windows, 4)
    assert len(asked) == 3 and once[-1].summary["vehicles_budget_limited"] > 0
    monkeypatch.setattr(budget.Rooms, "of", lambda rooms, vehicles: counting(
        rooms.mode, rooms.ledger, vehicles, rooms.window_start
    ))  # fmt: skip
    asked.clear()
    every_time = _release(windows, 4)
    assert len(asked) > 6
    for a, b in zip(once, every_time, strict=True):
        assert a.cells == b.cells and a.summary == b.summary and a.loss == b.loss


def test_a_windows_rooms_are_ranked_once_for_its_choices_and_release_prices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cell choices' pass test and every release price of a window read the same rooms'
    weighted median: one unit price per window ranks them (a sort of 10^5 rooms on the 1M
    window), and the release is the one a price made for each use gives."""
    windows = _roaming_windows(3, 4)
    monkeypatch.setattr(window, "new_release_nonce", lambda: "fixed")
    made: list[int] = []
    price_of = budget.UnitPrice

    def counting(room: np.ndarray, share: float, burst: float) -> object:
        made.append(len(room))
        return price_of(room, share, burst)

    monkeypatch.setattr(budget, "UnitPrice", counting)
    once = _release(windows, 4, span_hours=4)  # held cells: release prices
    assert len(made) == len(windows)  # choices and release prices: one price per window
    assert sum(len(r.cells) for r in once) > 5
    monkeypatch.setattr(WindowCache, "unit_price", lambda cache, room, compute: compute())
    made.clear()
    every_time = _release(windows, 4, span_hours=4)
    assert len(made) > 2 * len(windows)
    for a, b in zip(once, every_time, strict=True):
        assert a.cells == b.cells and a.summary == b.summary and a.loss == b.loss


def test_the_room_cache_serves_the_same_names_only() -> None:
    params = _params(vehicle_budget=6.0)
    ledger = PrivacyAccountant(params).new_ledger()
    rooms = budget.Rooms(budget.budget_mode(params), ledger, 7200, WindowCache())
    names, others = ("v1", "v2"), ("v1", "v3", "v4")
    first = rooms.of(names)
    assert rooms.of(names) is first
    other = rooms.of(others)
    assert len(other) == 3 and rooms.of(others) is other
    assert rooms.of(names) is not first


def test_the_room_cache_tells_names_of_one_length_apart() -> None:
    """Two vehicle lists of the same length, one naming a vehicle with less room: each gets
    its own rooms (a memo keyed on the length would serve the first list's), read-only."""
    rooms = {"v1": 2.0, "v2": 2.0, "v3": 0.5}
    ledger = SimpleNamespace(
        budget_room=lambda vehicles, at, b, burst: np.array([rooms[v] for v in vehicles])
    )
    mode = budget.budget_mode(_params(vehicle_budget=6.0))
    room_book = budget.Rooms(mode, ledger, 7200, WindowCache())  # type: ignore[arg-type]
    first = room_book.of(("v1", "v2"))
    second = room_book.of(("v1", "v3"))
    assert first.tolist() == [2.0, 2.0] and second.tolist() == [2.0, 0.5]
    with pytest.raises(ValueError):
        second[0] = 9.0  # shared by the price, every plan and the check


def test_the_release_checks_its_plan_against_the_vehicles_own_rooms(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plan made with twice each vehicle's room (as a bug could) pays past the room the
    ledger gives: the vehicle-budget stage checks against the ledger's rooms, and the
    release raises instead of publishing it."""
    plan_with = budget.plan_budget

    def generous(occupancy: Occupancy, room: np.ndarray, **kwargs: object) -> BudgetPlan:
        return plan_with(occupancy, np.asarray(room) * 2.0, **kwargs)  # type: ignore[arg-type]

    windows = _roaming_windows(3, 4)
    assert _release(windows, 4)[-1].summary["vehicles_budget_limited"] > 0  # rooms bind
    monkeypatch.setattr(budget, "plan_budget", generous)
    with pytest.raises(AssertionError, match="past a vehicle's room"):
        _release(windows, 4)
