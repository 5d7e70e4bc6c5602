"""The budget ledger (``stream_dp.dp.budget_ledger``) against plain-Python transcriptions."""

from __future__ import annotations

import math
import zlib
from collections import defaultdict

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp.budget_ledger import (
    CAP_RTOL,
    UNLIMITED_CELLS,
    BudgetLedger,
    WindowLoss,
    cells_used,
    limit_to_budget,
)
from stream_dp.dp.occupancy import Occupancy

# Ids whose string order differs from their numeric order, plus a newline.
IDS = st.sampled_from(["9", "10", "09", "a", "B", "b\nc"]) | st.text(alphabet="019ab", max_size=2)
SMALL_COUNTS = st.integers(min_value=1, max_value=4)  # few values: many ties
COUNTS = SMALL_COUNTS | st.integers(min_value=1, max_value=2**62)  # huge ones: lexsort path
OCCUPANCY = st.dictionaries(st.tuples(IDS, IDS), COUNTS, max_size=40).map(
    lambda d: Occupancy.from_triples((c, v, m) for (c, v), m in d.items())
)
EPSILONS = st.sampled_from([0.1, 0.25, 0.3, 1.0, 1 / 3])


# -- plain transcriptions ----------------------------------------------------------------------


def brute_limit(occ: Occupancy, allowed: list[int]) -> list[bool]:
    """Per vehicle: sort its entries by (most readings, smaller cell) and keep the first few."""
    per_vehicle: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for i, (c, v, m) in enumerate(
        zip(occ.cell_index.tolist(), occ.vehicle_index.tolist(), occ.count.tolist(), strict=True)
    ):
        per_vehicle[v].append((-m, c, i))
    keep = [True] * occ.n_entries
    for v, items in per_vehicle.items():
        for _, _, i in sorted(items)[allowed[v] :]:
            keep[i] = False
    return keep


def brute_spent(
    windows: list[WindowLoss], names: list[str], at: int, period: int, inclusive: bool = False
) -> list[float]:
    """Loop over windows in ascending order, summing each vehicle's ``cells * eps``."""
    out = []
    for name in names:
        total = 0.0
        for w in sorted(windows, key=lambda w: w.window_start):
            if inclusive:  # the rolling period ending with ``at``
                in_range = at - period < w.window_start <= at
            else:  # what a new window at ``at`` is checked against: both ways
                in_range = abs(w.window_start - at) < period and w.window_start != at
            if in_range and name in w.vehicles:
                total += int(w.cells[w.vehicles.index(name)]) * w.epsilon
        out.append(total)
    return out


def brute_allowed(spent: float, cap: float, eps: float) -> int:
    return min(max(math.floor((cap - spent + CAP_RTOL * cap) / eps), 0), UNLIMITED_CELLS)


# -- limit_to_budget ---------------------------------------------------------------------------


@given(occ=OCCUPANCY, data=st.data())
@settings(max_examples=200, deadline=None)
def test_limit_to_budget_matches_per_vehicle_sort(occ: Occupancy, data: st.DataObject) -> None:
    allowed = data.draw(
        st.lists(st.integers(0, 5), min_size=len(occ.vehicles), max_size=len(occ.vehicles)),
        label="allowed",
    )
    mask = limit_to_budget(occ, np.asarray(allowed, dtype=np.int64))
    assert mask.dtype == np.bool_ and mask.shape == (occ.n_entries,)
    assert mask.tolist() == brute_limit(occ, allowed)
    kept_cells = cells_used(occ, mask)
    assert kept_cells.tolist() == [
        min(g, a) for g, a in zip(occ.grids_per_vehicle().tolist(), allowed, strict=True)
    ]


@given(occ=OCCUPANCY, data=st.data())
@settings(max_examples=200, deadline=None)
def test_limit_to_budget_without_cell_order(occ: Occupancy, data: st.DataObject) -> None:
    """Entries not in cell order (not an Occupancy invariant violation we expect, but the
    function must not depend on it): the lexsort path gives the same answer."""
    perm = np.asarray(data.draw(st.permutations(range(occ.n_entries)), label="perm"), np.int64)
    shuffled = Occupancy(
        occ.cells, occ.vehicles, occ.cell_index[perm], occ.vehicle_index[perm], occ.count[perm]
    )
    allowed = [data.draw(st.integers(0, 3), label="allowed") for _ in occ.vehicles]
    assert limit_to_budget(shuffled, allowed).tolist() == brute_limit(shuffled, allowed)


def test_limit_to_budget_example() -> None:
    occ = Occupancy.from_triples(
        [
            ("c1", "v", 5),
            ("c2", "v", 7),
            ("c3", "v", 5),
            ("c4", "v", 1),
            ("c1", "w", 2),
            ("c2", "w", 9),
            ("c9", "x", 3),
        ]
    )
    assert occ.vehicles == ("v", "w", "x")
    mask = limit_to_budget(occ, [2, 5, 0])  # v: c2 (7), then c1 beats c3 on the tie
    kept = {
        (occ.cells[c], occ.vehicles[v])
        for c, v in zip(occ.cell_index[mask], occ.vehicle_index[mask], strict=True)
    }
    assert kept == {("c2", "v"), ("c1", "v"), ("c1", "w"), ("c2", "w")}
    assert limit_to_budget(occ, [UNLIMITED_CELLS] * 3).all()
    assert not limit_to_budget(occ, [0, 0, 0]).any()


def test_limit_to_budget_huge_counts_take_the_fallback_and_agree() -> None:
    triples = [
        (f"c{g}", f"v{v}", 2**62 if (g + v) % 3 == 0 else 1 + (g * v) % 4)
        for g in range(6)
        for v in range(5)
    ]
    occ = Occupancy.from_triples(triples)
    for allowed in ([0, 1, 2, 3, 4], [2] * 5, [6] * 5):
        assert limit_to_budget(occ, allowed).tolist() == brute_limit(occ, allowed)


def test_limit_to_budget_empty_and_validation() -> None:
    empty = Occupancy.from_triples([])
    assert limit_to_budget(empty, []).shape == (0,)
    occ = Occupancy.from_triples([("a", "x", 1), ("b", "y", 2)])
    with pytest.raises(ValueError, match="allowed"):
        limit_to_budget(occ, [1])
    with pytest.raises(ValueError, match="allowed"):
        limit_to_budget(occ, [1, -1])
    with pytest.raises(ValueError, match="allowed"):
        limit_to_budget(occ, [1.0, 2.0])


def test_cells_used_counts_kept_entries_and_validates() -> None:
    occ = Occupancy.from_triples([("a", "x", 1), ("b", "x", 2), ("b", "y", 3), ("c", "z", 1)])
    kept = np.array([True, False, True, True])  # entries in (cell, vehicle) order
    assert cells_used(occ, kept).tolist() == [1, 1, 1]
    assert cells_used(occ, np.zeros(4, bool)).tolist() == [0, 0, 0]
    assert cells_used(occ, np.ones(4, bool)).dtype == np.int64
    with pytest.raises(ValueError, match="kept"):
        cells_used(occ, np.ones(3, bool))
    with pytest.raises(ValueError, match="kept"):
        cells_used(occ, np.ones(4, np.int64))


# -- WindowLoss --------------------------------------------------------------------------------


def test_from_counts_drops_zeros_and_sorts() -> None:
    w = WindowLoss.from_counts(3600, 0.5, ["b", "a", "10", "9"], [2, 0, 1, 3])
    assert w.vehicles == ("10", "9", "b")
    assert w.cells.tolist() == [1, 3, 2]
    assert w.cells.dtype == np.int64
    np.testing.assert_array_equal(w.loss, [0.5, 1.5, 1.0])
    assert w.max_loss == 1.5 and len(w) == 3
    assert WindowLoss.from_counts(0, 1.0, ["a"], [0]).vehicles == ()
    assert WindowLoss.from_counts(0, 1.0, [], []).max_loss == 0.0
    with pytest.raises(ValueError, match="unique"):
        WindowLoss.from_counts(0, 1.0, ["a", "b", "a"], [1, 1, 1])
    with pytest.raises(ValueError, match=">= 0"):
        WindowLoss.from_counts(0, 1.0, ["a", "b"], [1, -1])
    with pytest.raises(ValueError, match="length"):
        WindowLoss.from_counts(0, 1.0, ["a", "b"], [1])


def test_window_loss_validation_and_immutability() -> None:
    w = WindowLoss(0, 1.0, ("a", "b"), np.array([1, 2], np.uint16))
    assert w.cells.dtype == np.int64
    with pytest.raises(ValueError):
        w.cells[0] = 5  # read-only
    for bad in [("b", "a"), ("a", "a")]:
        with pytest.raises(ValueError, match="sorted ascending and unique"):
            WindowLoss(0, 1.0, bad, np.array([1, 1]))
    with pytest.raises(ValueError, match="> 0"):
        WindowLoss(0, 1.0, ("a", "b"), np.array([1, 0]))
    with pytest.raises(ValueError, match="cells"):
        WindowLoss(0, 1.0, ("a", "b"), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="cells"):
        WindowLoss(0, 1.0, ("a", "b"), np.array([[1, 2]]))
    with pytest.raises(ValueError, match="cells"):
        WindowLoss(0, 1.0, ("a", "b"), np.array([1]))
    with pytest.raises(ValueError, match="strings"):
        WindowLoss(0, 1.0, (1, 2), np.array([1, 1]))  # type: ignore[arg-type]
    for eps in [0, -1.0, math.nan, math.inf, True, "x"]:
        with pytest.raises(ValueError, match="epsilon"):
            WindowLoss(0, eps, ("a",), np.array([1]))  # type: ignore[arg-type]
    for start in [1.5, True, "0", 2**63, -(2**63) - 1]:
        with pytest.raises(ValueError, match="window_start"):
            WindowLoss(start, 1.0, ("a",), np.array([1]))  # type: ignore[arg-type]
    assert WindowLoss(np.int64(7), 1, (np.str_("a"),), [1]).vehicles == ("a",)


def test_window_loss_equality_and_repr() -> None:
    a = WindowLoss(0, 0.5, ("a", "b"), np.array([1, 2]))
    assert a == WindowLoss(0, 0.5, ("a", "b"), [1, 2]) and hash(a) == hash(
        WindowLoss(0, 0.5, ("a", "b"), [1, 2])
    )
    assert a != WindowLoss(0, 0.5, ("a", "b"), [1, 3])
    assert a != WindowLoss(0, 0.25, ("a", "b"), [1, 2])
    assert a != WindowLoss(1, 0.5, ("a", "b"), [1, 2])
    assert a != WindowLoss(0, 0.5, ("a", "c"), [1, 2])
    assert "vehicles=2" in repr(a)
    ledger = BudgetLedger(10, None)
    ledger.record(a)
    assert "windows=1, vehicles=2" in repr(ledger)


# -- serialization -----------------------------------------------------------------------------

NAMES = st.lists(st.text(max_size=6), unique=True, max_size=12).map(sorted)


@given(
    names=NAMES,
    data=st.data(),
    start=st.integers(-(2**62), 2**62),
    eps=st.floats(min_value=1e-300, max_value=1e300, allow_nan=False, allow_infinity=False),
)
@settings(max_examples=300, deadline=None)
def test_round_trip(names: list[str], data: st.DataObject, start: int, eps: float) -> None:
    big = data.draw(st.sampled_from([4, 2**16, 2**40]), label="max count")
    cells = data.draw(st.lists(st.integers(1, big), min_size=len(names), max_size=len(names)))
    w = WindowLoss(start, eps, tuple(names), np.asarray(cells, dtype=np.int64))
    b = w.to_bytes()
    back = WindowLoss.from_bytes(b)
    assert back == w
    assert back.vehicles == w.vehicles and back.epsilon == w.epsilon
    assert WindowLoss.from_bytes(bytearray(b)) == w and WindowLoss.from_bytes(memoryview(b)) == w


def test_round_trip_awkward_names() -> None:
    names = sorted(["", "\n", "a\nb", "é", "车辆-7", "🚗", "\ud800", "\x00", "z\x00", "\r\n"])
    w = WindowLoss(-3600, 1 / 3, tuple(names), np.arange(1, len(names) + 1) * 7000)
    back = WindowLoss.from_bytes(w.to_bytes())
    assert back == w and back.vehicles == tuple(names)
    empty = WindowLoss(0, 1.0, (), np.zeros(0, np.int64))
    assert WindowLoss.from_bytes(empty.to_bytes()) == empty


def test_encoding_is_compact() -> None:
    names = tuple(f"veh{i:05d}" for i in range(1000))  # 8 characters each
    w = WindowLoss(0, 1.0, names, np.full(1000, 3))
    assert len(w.to_bytes()) < 1000 * (2 + 8 + 2) + 250  # u2 lengths, names, u2 counts


def _small() -> bytes:
    return WindowLoss(7200, 0.5, ("a", "b\nc", "é"), np.array([1, 300, 2])).to_bytes()


def test_every_truncation_and_byte_flip_is_rejected() -> None:
    b = _small()
    for k in range(len(b)):
        with pytest.raises(ValueError):
            WindowLoss.from_bytes(b[:k])
    for i in range(len(b)):
        flipped = bytearray(b)
        flipped[i] ^= 0xFF
        with pytest.raises(ValueError):
            WindowLoss.from_bytes(bytes(flipped))
    for bad in [b + b"\x00", b"", b"not a window loss at all", b"SDPL" + b"\x00" * 8]:
        with pytest.raises(ValueError):
            WindowLoss.from_bytes(bad)


def _sealed(header: object, lengths: bytes, names: bytes, counts: bytes) -> bytes:
    """An encoding with a valid checksum around arbitrary contents (layout of to_bytes)."""
    head = orjson.dumps(header)
    body = len(head).to_bytes(4, "little") + head + lengths + names + counts
    return b"SDPL" + zlib.crc32(body).to_bytes(4, "little") + body


def _header(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "version": 1,
        "window_start": 0,
        "epsilon": 1.0,
        "n": 2,
        "length_dtype": "<u2",
        "count_dtype": "<u2",
        "names_bytes": 2,
    }
    base.update(changes)
    return base


U2 = np.array([1, 1], "<u2").tobytes()


def test_checksummed_but_malformed_input_is_rejected() -> None:
    assert WindowLoss.from_bytes(_sealed(_header(), U2, b"ab", U2)).vehicles == ("a", "b")
    cases = [
        _sealed([1, 2], U2, b"ab", U2),  # header not an object
        _sealed({k: v for k, v in _header().items() if k != "n"}, U2, b"ab", U2),
        _sealed(_header(extra=1), U2, b"ab", U2),
        _sealed(_header(version=3), U2, b"ab", U2),
        _sealed(_header(n=-1), U2, b"ab", U2),
        _sealed(_header(n=3), U2, b"ab", U2),  # lies about the size
        _sealed(_header(n=True), U2, b"ab", U2),
        _sealed(_header(count_dtype="<f8"), U2, b"ab", U2),
        _sealed(_header(length_dtype=">u2"), U2, b"ab", U2),
        _sealed(_header(window_start=1.5), U2, b"ab", U2),
        _sealed(_header(epsilon=0.0), U2, b"ab", U2),
        _sealed(_header(epsilon="1"), U2, b"ab", U2),
        _sealed(_header(), U2, b"ba", U2),  # names not sorted
        _sealed(_header(), U2, b"aa", U2),  # names not unique
        _sealed(_header(), U2, b"ab", np.array([1, 0], "<u2").tobytes()),  # zero count
        _sealed(_header(), np.array([2, 1], "<u2").tobytes(), b"ab", U2),  # lengths too long
        _sealed(_header(), U2, b"\xff\xfe", U2),  # not UTF-8
        _sealed(_header(names_bytes=3), U2, b"ab", U2),
        b"SDPL" + b"\x00" * 4 + (10**6).to_bytes(4, "little") + b"{}",  # header past the end
    ]
    for i, case in enumerate(cases):
        with pytest.raises(ValueError):
            WindowLoss.from_bytes(case)
            pytest.fail(f"case {i} was accepted")


# -- BudgetLedger ------------------------------------------------------------------------------

VEHICLES = ["a", "b", "c", "d", "10", "9"]
WINDOW = st.builds(
    lambda start, eps, cells: WindowLoss.from_counts(start, eps, VEHICLES, cells),
    st.integers(0, 12).map(lambda k: 10 * k),
    EPSILONS,
    st.lists(st.integers(0, 3), min_size=len(VEHICLES), max_size=len(VEHICLES)),
)
WINDOWS = st.lists(WINDOW, max_size=10, unique_by=lambda w: w.window_start)


@given(
    windows=WINDOWS,
    period=st.sampled_from([1, 10, 25, 30, 100]),
    at=st.integers(-10, 140),
    cap=st.sampled_from([0.5, 1.0, 2.0, 3.3, 10.0]),
    eps=EPSILONS,
)
@settings(max_examples=200, deadline=None)
def test_spent_allowed_max_loss_match_the_loop(
    windows: list[WindowLoss], period: int, at: int, cap: float, eps: float
) -> None:
    ledger = BudgetLedger(period, cap)
    for w in windows:
        assert ledger.record(w)
    names = VEHICLES + ["unknown", "a"]  # an unknown vehicle and a repeated one
    expected = brute_spent(windows, names, at, period)
    spent = ledger.spent(names, at)
    assert spent.dtype == np.float64
    assert spent.tolist() == expected  # same additions in the same order: exact
    allowed = ledger.allowed_cells(names, at, eps)
    assert allowed.dtype == np.int64
    assert allowed.tolist() == [brute_allowed(s, cap, eps) for s in expected]
    assert ledger.max_loss(at) == max(brute_spent(windows, VEHICLES, at, period, True) + [0.0])


def test_rolling_boundary() -> None:
    hour = 3600
    ledger = BudgetLedger(2 * hour, cap=10.0)
    for k, cells in enumerate([1, 2, 4, 8]):  # windows 0, 1h, 2h, 3h
        ledger.record(WindowLoss(k * hour, 1.0, ("v",), np.array([cells])))
    # At 2h: window 0 is exactly one period earlier (excluded), 1h counts, 2h is the window
    # being checked (excluded), 3h is later but within a period (counts: a window released
    # out of order must fit with the ones after it too); 4h would be a period later.
    assert ledger.spent(["v"], 2 * hour).tolist() == [10.0]  # 1h and 3h
    assert ledger.spent(["v"], 2 * hour + 1).tolist() == [14.0]  # 1h, 2h and 3h
    assert ledger.spent(["v"], 2 * hour - 1).tolist() == [15.0]  # all four
    assert ledger.spent(["v"], 0).tolist() == [2.0]  # 1h only
    assert ledger.spent(["v"], 5 * hour).tolist() == [0.0]  # 3h is a period earlier
    assert ledger.allowed_cells(["v"], 2 * hour, 1.0).tolist() == [0]
    assert ledger.allowed_cells(["v"], 4 * hour, 1.0).tolist() == [2]  # 10 - 8 (3h)
    assert ledger.allowed_cells(["v"], 4 * hour, 3.0).tolist() == [0]
    assert ledger.max_loss(2 * hour) == 6.0  # 1h and 2h: inclusive of the given window
    assert ledger.max_loss(3 * hour) == 12.0
    assert ledger.max_loss(10 * hour) == 0.0


def test_allowed_cells_tolerance_and_overspent() -> None:
    ledger = BudgetLedger(100, cap=0.3)
    assert 0.3 / 0.1 < 3  # the float quotient that would cost a cell without the tolerance
    assert ledger.allowed_cells(["v"], 0, 0.1).tolist() == [3]
    ledger.record(WindowLoss(0, 0.1, ("v",), np.array([1])))
    ledger.record(WindowLoss(10, 0.1, ("v",), np.array([1])))
    ledger.record(WindowLoss(20, 0.1, ("v",), np.array([1])))
    assert ledger.allowed_cells(["v"], 30, 0.1).tolist() == [0]
    lowered = BudgetLedger.from_entries(100, 0.15, ledger.entries())  # cap lowered on restart
    assert lowered.allowed_cells(["v", "w"], 30, 0.1).tolist() == [0, 1]
    assert lowered.allowed_cells(["v"], 30, 1e-15).tolist() == [0]
    assert lowered.allowed_cells(["w"], 30, 1e-15).tolist() == [UNLIMITED_CELLS]  # clipped


def test_no_cap() -> None:
    ledger = BudgetLedger(3600, cap=None)
    ledger.record(WindowLoss(0, 1.0, ("v",), np.array([500])))
    allowed = ledger.allowed_cells(["v", "w"], 1, 1.0)
    assert allowed.tolist() == [UNLIMITED_CELLS, UNLIMITED_CELLS] and allowed.dtype == np.int64
    assert ledger.spent(["v", "w"], 1).tolist() == [500.0, 0.0]
    assert ledger.allowed_cells([], 1, 1.0).shape == (0,)


def test_record_is_idempotent_and_conflicts_raise() -> None:
    ledger = BudgetLedger(100, cap=5.0)
    w = WindowLoss(10, 0.5, ("a", "b"), np.array([1, 2]))
    assert ledger.record(w) is True
    assert ledger.record(w) is False
    assert ledger.record(WindowLoss.from_bytes(w.to_bytes())) is False  # replay after restart
    assert ledger.spent(["a", "b"], 20).tolist() == [0.5, 1.0]  # counted once
    for other in [
        WindowLoss(10, 0.5, ("a", "b"), np.array([1, 3])),
        WindowLoss(10, 0.25, ("a", "b"), np.array([1, 2])),
        WindowLoss(10, 0.5, ("a", "c"), np.array([1, 2])),
        WindowLoss(10, 0.5, (), np.zeros(0, np.int64)),
    ]:
        with pytest.raises(ValueError, match="already recorded"):
            ledger.record(other)
    assert ledger.entries() == (w,)
    assert ledger.spent(["a", "b", "c"], 20).tolist() == [0.5, 1.0, 0.0]
    with pytest.raises(ValueError, match="window_loss"):
        ledger.record("not a window")  # type: ignore[arg-type]


def test_entries_sorted_and_restore() -> None:
    ledger = BudgetLedger(1000, cap=4.0)
    for start in [300, 100, 200]:
        ledger.record(WindowLoss.from_counts(start, 0.5, ["x", "y"], [start // 100, 1]))
    assert [w.window_start for w in ledger.entries()] == [100, 200, 300]
    restored = BudgetLedger.from_entries(
        1000, 4.0, [WindowLoss.from_bytes(w.to_bytes()) for w in ledger.entries()]
    )
    assert restored.entries() == ledger.entries() and len(restored) == 3
    np.testing.assert_array_equal(restored.spent(["x", "y"], 400), ledger.spent(["x", "y"], 400))


@given(windows=WINDOWS, period=st.sampled_from([10, 25, 30]), cut=st.integers(-20, 150))
@settings(max_examples=200, deadline=None)
def test_prune_keeps_every_later_answer(windows: list[WindowLoss], period: int, cut: int) -> None:
    full, pruned = BudgetLedger(period, 2.0), BudgetLedger(period, 2.0)
    for w in windows:
        full.record(w)
        pruned.record(w)
    dropped = pruned.prune(cut)
    assert dropped == sum(w.window_start <= cut - period for w in windows)
    assert [w.window_start for w in pruned.entries()] == sorted(
        w.window_start for w in windows if w.window_start > cut - period
    )
    names = VEHICLES + ["zz"]
    for at in range(cut, 160, 5):
        assert pruned.spent(names, at).tolist() == full.spent(names, at).tolist()
        assert pruned.max_loss(at) == full.max_loss(at)
        assert (
            pruned.allowed_cells(names, at, 0.3).tolist()
            == full.allowed_cells(names, at, 0.3).tolist()
        )
    assert pruned.prune(cut) == 0


def test_prune_boundary() -> None:
    ledger = BudgetLedger(100, cap=5.0)
    for start in [0, 1, 2]:
        ledger.record(WindowLoss(start, 1.0, ("v",), np.array([1])))
    assert ledger.prune(100) == 1  # window 0 is outside (0, 100); window 1 is not
    assert [w.window_start for w in ledger.entries()] == [1, 2]
    assert ledger.spent(["v"], 100).tolist() == [2.0]
    assert ledger.prune(101) == 1 and ledger.spent(["v"], 101).tolist() == [1.0]


def test_prune_compacts_the_name_index() -> None:
    ledger = BudgetLedger(20, cap=3.0)
    for k in range(6):  # windows 0..50, each with its own vehicles
        names = [f"w{k}-{i}" for i in range(50)]
        ledger.record(WindowLoss.from_counts(10 * k, 1.0, names, [1] * 50))
    assert len(ledger._names) == 300
    assert ledger.prune(55) == 4  # windows 0..30 can no longer matter at >= 55
    assert len(ledger._names) == 100  # only the vehicles of windows 40 and 50 are held
    ledger.record(WindowLoss.from_counts(60, 1.0, ["new", "w5-0"], [1, 2]))
    names = ["w5-0", "w5-49", "new", "w4-0", "w0-0"]
    assert ledger.spent(names, 59).tolist() == [3.0, 1.0, 1.0, 1.0, 0.0]  # windows 40, 50, 60
    assert ledger.spent(names, 60).tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]  # window 50
    assert ledger.spent(names, 61).tolist() == [3.0, 1.0, 1.0, 0.0, 0.0]  # windows 60, 50
    assert ledger.max_loss(60) == 3.0
    assert ledger.prune(100) == 3 and len(ledger._names) == 0 and ledger.entries() == ()
    ledger.record(WindowLoss.from_counts(100, 1.0, ["w0-0"], [1]))
    assert ledger.spent(["w0-0", "new"], 101).tolist() == [1.0, 0.0]


def test_validation_names_the_argument() -> None:
    for period in [0, -5, 1.5, True, None]:
        with pytest.raises(ValueError, match="period_seconds"):
            BudgetLedger(period, 1.0)  # type: ignore[arg-type]
    for cap in [0, -1.0, math.nan, math.inf, "1", True]:
        with pytest.raises(ValueError, match="cap"):
            BudgetLedger(3600, cap)  # type: ignore[arg-type]
    ledger = BudgetLedger(3600, 1.0)
    for eps in [0, -0.5, math.nan, math.inf]:
        with pytest.raises(ValueError, match="epsilon"):
            ledger.allowed_cells(["a"], 0, eps)
    with pytest.raises(ValueError, match="at_window_start"):
        ledger.spent(["a"], 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at_window_start"):
        BudgetLedger(3600, None).allowed_cells(["a"], 1.5, 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at_window_start_inclusive"):
        ledger.max_loss(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="before_window_start"):
        ledger.prune(1.5)  # type: ignore[arg-type]
    assert BudgetLedger(np.int64(60), 2).cap == 2.0


# -- the pieces together: the cap holds over every rolling period -----------------------------


@given(
    windows=st.lists(st.tuples(OCCUPANCY, st.randoms(use_true_random=False)), max_size=8),
    period=st.sampled_from([1, 2, 3, 5]),
    cap=st.sampled_from([0.3, 1.0, 2.5]),
    eps=EPSILONS,
)
@settings(max_examples=80, deadline=None)
def test_cap_holds_over_every_rolling_period(
    windows: list, period: int, cap: float, eps: float
) -> None:
    ledger = BudgetLedger(period, cap)
    for t, (occ, rnd) in enumerate(windows):
        allowed = ledger.allowed_cells(occ.vehicles, t, eps)
        mask = limit_to_budget(occ, allowed)
        kept = mask & np.array([rnd.random() < 0.8 for _ in range(occ.n_entries)], dtype=bool)
        used = cells_used(occ, kept)  # CLIP-USER stand-in: it only suppresses more
        assert (used <= allowed).all()
        ledger.record(WindowLoss.from_counts(t, eps, occ.vehicles, used))
        assert ledger.max_loss(t) <= cap * (1 + CAP_RTOL)


@given(
    order=st.permutations(list(range(8))),
    wanted=st.lists(st.integers(0, 4), min_size=8, max_size=8),
    period_windows=st.integers(1, 4),
    cap_cells=st.integers(1, 5),
)
@settings(max_examples=300, deadline=None)
def test_the_cap_holds_in_every_rolling_period_whatever_the_release_order(
    order: list[int], wanted: list[int], period_windows: int, cap_cells: int
) -> None:
    """Windows released out of order (an older one completing late) still respect the cap."""
    eps, width = 0.5, 10
    ledger = BudgetLedger(period_windows * width, cap_cells * eps)
    used = {}
    for k in order:
        allowed = int(ledger.allowed_cells(["v"], k * width, eps)[0])
        used[k] = min(wanted[k], allowed)
        ledger.record(WindowLoss.from_counts(k * width, eps, ["v"], [used[k]]))
    for end in range(8):
        window = [used[k] for k in range(8) if end - period_windows < k <= end]
        assert sum(window) <= cap_cells


def test_a_window_older_than_the_pruned_horizon_gets_no_budget() -> None:
    """Found in review: pruning after the newest window, then releasing an older one out of
    order, let a vehicle exceed the cap. Pruned spans now count as unknown (+inf)."""
    day, hour = 86400, 3600
    ledger = BudgetLedger(day, cap=2.0)
    ledger.record(WindowLoss.from_counts(0, 1.0, ["v"], [1]))
    ledger.record(WindowLoss.from_counts(day + 2 * hour, 1.0, ["w"], [1]))
    assert ledger.allowed_cells(["v"], 2 * hour, 1.0).tolist() == [1]
    ledger.prune(day + 2 * hour - day)  # the service's slack: one period
    assert ledger.allowed_cells(["v"], 2 * hour, 1.0).tolist() == [1]  # still known
    ledger.prune(day + 2 * hour)  # too eager: window 0 is gone
    assert ledger.allowed_cells(["v", "x"], 2 * hour, 1.0).tolist() == [0, 0]
    assert ledger.allowed_cells(["v"], 2 * day, 1.0).tolist() == [2]  # later windows are fine


def test_record_released_keeps_one_period_of_slack() -> None:
    day, hour = 86400, 3600
    ledger = BudgetLedger(day, cap=2.0)
    assert ledger.record_released(WindowLoss.from_counts(0, 1.0, ["v"], [1]))
    ledger.record_released(WindowLoss.from_counts(day + 2 * hour, 1.0, ["w"], [1]))
    assert ledger.allowed_cells(["v"], 2 * hour, 1.0).tolist() == [1]  # window 0 still counted
    ledger.record_released(WindowLoss.from_counts(2 * day + 3 * hour, 1.0, ["w"], [1]))
    assert len(ledger) == 2  # window 0 is more than two periods behind: pruned
    assert ledger.allowed_cells(["v"], 2 * hour, 1.0).tolist() == [0]  # unknown: no budget


@given(
    triples=st.lists(
        st.tuples(
            st.sampled_from("abcd"), st.text("xyzé", min_size=1, max_size=3), st.integers(1, 3)
        ),
        min_size=1,
        max_size=30,
    ),
    data=st.data(),
)
@settings(max_examples=200, deadline=None)
def test_the_loss_of_an_occupancy_is_the_loss_from_its_counts(
    triples: list[tuple[str, str, int]], data: st.DataObject
) -> None:
    """The release's shortcut (names taken from the occupancy unchecked) builds exactly the
    WindowLoss that the checked constructor builds, vehicles left with no cell dropped."""
    occ = Occupancy.from_triples(triples)
    kept = np.array(
        data.draw(st.lists(st.booleans(), min_size=occ.n_entries, max_size=occ.n_entries))
    )
    loss = WindowLoss.of_occupancy(7200, 0.25, occ, kept)
    assert loss == WindowLoss.from_counts(7200, 0.25, occ.vehicles, cells_used(occ, kept))
    known = cells_used(occ, kept)
    assert WindowLoss.of_occupancy(7200, 0.25, occ, None, cells=known) == loss
    with pytest.raises(ValueError, match="one count per vehicle"):
        WindowLoss.of_occupancy(7200, 0.25, occ, None, cells=known[:-1])
    assert not loss.cells.flags.writeable
    assert all(type(v) is str for v in loss.vehicles)
