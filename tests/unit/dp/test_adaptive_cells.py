"""Accuracy-targeted adaptive cells: the choice (pure) and the targeted release."""

from __future__ import annotations

import json
import random

import h3
import numpy as np
import pytest

from stream_dp.cli import main
from stream_dp.config import ConfigError, load_settings
from stream_dp.dp.adaptive_cells import best_cap_mean_error, choose_cells
from stream_dp.dp.budget_ledger import BudgetLedger
from stream_dp.dp.error_bars import LN20, SAMPLER_RTOL
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.release.params import ReleaseParams, checked_settings
from stream_dp.release.window import release_window
from stream_dp.windows.columns import WindowColumns

U = 65.0
CENTRE = h3.latlng_to_cell(40.70, -74.02, 8)


def brute_best_cap(counts: list[int], eps: float, limit: int | None) -> float:
    """Every integer cap the pseudo-user step allows, evaluated directly."""
    total = sum(counts)
    best = np.inf
    for c in range(min(counts), max(counts) + 1):
        if limit is not None and c > limit and c != max(counts):
            continue
        kept = sum(min(m, c) for m in counts)
        value = U * (1 - kept / total) + LN20 * (U * c / kept) / eps * (1 + SAMPLER_RTOL)
        best = min(best, value)
    return best


@pytest.mark.parametrize("seed", range(20))
def test_best_cap_error_matches_a_scan_of_every_cap(seed: int) -> None:
    rng = random.Random(seed)
    units = [
        [rng.choice([1, 2, 3, 5, 8, 40, 200]) for _ in range(rng.randint(1, 9))] for _ in range(4)
    ]
    limit = rng.choice([None, 4, 64])
    unit = np.repeat(np.arange(len(units)), [len(u) for u in units])
    count = np.concatenate([np.array(u) for u in units])
    got = best_cap_mean_error(unit, count, len(units) + 1, U, 0.7, limit)
    for g, counts in enumerate(units):
        assert got[g] == pytest.approx(brute_best_cap(counts, 0.7, limit), rel=1e-12)
    assert got[-1] == np.inf  # an empty unit


def random_occupancy(
    seed: int, n_vehicles: int = 60
) -> tuple[list[str], list[tuple[int, int, int]]]:
    """Cells of a disk around the centre at res 8; (cell, vehicle, count) pairs, busier near
    the centre (dense) and sparse at the edge."""
    rng = random.Random(seed)
    cells = sorted(h3.grid_disk(CENTRE, 12))
    ring = {c: h3.grid_distance(CENTRE, c) for c in cells}
    pairs = set()
    for v in range(n_vehicles):
        for _ in range(rng.randint(1, 6)):
            c = rng.choice(cells)
            if rng.random() < 0.8 and ring[c] > 2:
                c = rng.choice([x for x in cells if ring[x] <= 2])
            pairs.add((cells.index(c), v))
    triples = [(c, v, rng.choice([1, 2, 4, 10, 60])) for c, v in sorted(pairs)]
    used = sorted({c for c, _, _ in triples})
    remap = {c: i for i, c in enumerate(used)}
    return [cells[c] for c in used], [(remap[c], v, n) for c, v, n in triples]


@pytest.mark.parametrize("shape", ["compact", "remainder"])
@pytest.mark.parametrize("seed", range(6))
def test_the_choice_covers_each_reading_at_most_once_within_the_target(shape, seed) -> None:
    names, triples = random_occupancy(seed)
    cell, vehicle, count = (np.array(x) for x in zip(*triples, strict=True))
    target = 30.0
    chosen = choose_cells(
        names, cell, vehicle, count, upper=U, mean_epsilon=1.0, target=target, finest=8,
        coarsest=5, prefix_limit=64, shape=shape,
    )  # fmt: skip
    assert list(chosen.names) == sorted(chosen.names)
    assert np.all(chosen.predicted_error <= target)
    assert np.all((chosen.resolution >= 5) & (chosen.resolution <= 8))
    for i, name in enumerate(names):  # each observed cell is in its released ancestor, or none
        u = chosen.unit_of_cell[i]
        if u >= 0:
            assert h3.cell_to_parent(name, int(chosen.resolution[u])) == chosen.names[u]
    released = set(chosen.names)
    for g, name in enumerate(chosen.names):
        res = int(chosen.resolution[g])
        ancestors = {h3.cell_to_parent(name, r) for r in range(5, res)}
        descendants = [n for n in released if h3.get_resolution(n) > res
                       and h3.cell_to_parent(n, res) == name]  # fmt: skip
        if shape == "compact":
            assert not ancestors & released  # non-overlapping (compact_cells shape)
        assert bool(chosen.remainder[g]) == bool(descendants) or shape == "compact"
    # the predicted error of each released cell is recomputed from its own readings
    for g in range(len(chosen.names)):
        members = np.flatnonzero(chosen.unit_of_cell[cell] == g)
        per_vehicle: dict[int, int] = {}
        for e in members.tolist():
            per_vehicle[int(vehicle[e])] = per_vehicle.get(int(vehicle[e]), 0) + int(count[e])
        expected = brute_best_cap(list(per_vehicle.values()), 1.0, 64)
        assert chosen.predicted_error[g] == pytest.approx(expected, rel=1e-12)


def test_detail_is_kept_where_traffic_is_dense_and_sparse_cells_merge() -> None:
    names, triples = random_occupancy(3, n_vehicles=400)
    cell, vehicle, count = (np.array(x) for x in zip(*triples, strict=True))
    chosen = choose_cells(
        names, cell, vehicle, count, upper=U, mean_epsilon=1.0, target=20.0, finest=8,
        coarsest=5, prefix_limit=64, shape="remainder",
    )  # fmt: skip
    ring = {name: h3.grid_distance(CENTRE, name) for name in names}
    released_at = {
        name: int(chosen.resolution[u])
        for name, u in zip(names, chosen.unit_of_cell.tolist(), strict=True)
        if u >= 0
    }
    finest = {name for name, res in released_at.items() if res == 8}
    dense = {name for name in names if ring[name] <= 2}  # where random_occupancy crowds
    assert finest <= dense  # detail only where traffic is dense ...
    assert len(finest) >= len(dense) / 2  # ... and most of the dense cells keep it
    merged = [res for name, res in released_at.items() if ring[name] > 4]
    assert merged and max(merged) <= 6  # sparse cells are released, in coarser cells


def test_a_cell_missing_the_target_at_the_coarsest_resolution_is_withheld() -> None:
    lone = h3.latlng_to_cell(10.0, 10.0, 8)  # one vehicle, far from everything
    names = sorted([CENTRE, lone])
    cell = np.array([names.index(CENTRE)] * 50 + [names.index(lone)])
    vehicle = np.array(list(range(50)) + [50])
    count = np.ones(51, dtype=np.int64)
    chosen = choose_cells(
        names, cell, vehicle, count, upper=U, mean_epsilon=1.0, target=15.0, finest=8,
        coarsest=6,
    )  # fmt: skip
    assert chosen.unit_of_cell[names.index(lone)] == -1
    assert chosen.unit_of_cell[names.index(CENTRE)] >= 0


def targeted_window(seed: int, value_shift: float = 0.0) -> WindowColumns:
    names, triples = random_occupancy(seed, n_vehicles=200)
    rng = random.Random(seed)
    readings = []
    for c, v, n in triples:
        for r in range(n):
            value = min(U, max(0.0, rng.uniform(0, U) + value_shift))
            readings.append((names[c], f"v{v:03d}", float(r * 7 + v), value))
    rng.shuffle(readings)
    cells, vehicles, ts, values = (list(x) for x in zip(*readings, strict=True))
    return WindowColumns.from_readings(cells, vehicles, ts, values, 64)


@pytest.mark.parametrize("share", [0.0, 0.5])
def test_the_targeted_release_meets_the_target_and_charges_released_cells_only(share) -> None:
    settings = load_settings(
        resolution=8, coarsest_resolution=5, target_mean_error=20.0, variance_share=share,
        epsilon=1.0, vehicle_budget="none",
    )  # fmt: skip
    window = targeted_window(1)
    noise = LaplaceNoise(RandomSource.seeded_for_tests(1))
    release = release_window(
        0, window, ReleaseParams.from_settings(settings), noise, ledger=BudgetLedger(86400, None)
    )
    assert release.cells
    for record in release.cells:
        assert record["mean_error"] <= 20.0
        assert 5 <= record["resolution"] <= 8
        assert h3.get_resolution(record["cell"]) == record["resolution"]
        assert record["scope"] in ("cell", "remainder")
    summary = release.summary
    total = int(window.count.sum())
    released_readings = sum(r["n_readings"] for r in release.cells)
    assert released_readings + summary["readings_withheld"] == total
    assert summary["cells_released"] == len(release.cells)
    # a vehicle is charged for the released cells it was kept in, no more
    assert release.loss is not None
    assert int(release.loss.cells.max()) == summary["K"] <= len(release.cells)
    assert summary["privacy_loss"] == pytest.approx(summary["K"] * settings.epsilon)


def test_the_choice_depends_on_the_occupancy_only() -> None:
    settings = load_settings(resolution=8, coarsest_resolution=5, target_mean_error=20.0)
    shapes = []
    for shift in (0.0, 30.0):
        release = release_window(
            0, targeted_window(2, shift), ReleaseParams.from_settings(settings), LaplaceNoise()
        )
        shapes.append(
            [
                (r["cell"], r["resolution"], r["mean_error"], r["n_readings_used"])
                for r in release.cells
            ]
        )
    assert shapes[0] == shapes[1]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--target-mean-error", "0"], "target_mean_error"),
        (["--target-mean-error", "-1"], "target_mean_error"),
        (["--coarsest-resolution", "9", "--resolution", "8"], "coarsest_resolution"),
        (["--variance-share", "1"], "variance_share"),
        (["--variance-share", "-0.1"], "variance_share"),
        (["--accounting", "pld", "--mean-mechanism", "levy"], "levy"),
        (["--accounting", "pld", "--mean-mechanism", "cummings", "--delta", "1e-6"], "cummings"),
        (["--accounting", "fancy"], "accounting"),
        (["--target-mean-error", "5", "--mean-mechanism", "baseline"], "target_mean_error"),
    ],
)
def test_bad_settings_fail_with_one_line_and_exit_2(tmp_path, capsys, args, field) -> None:
    source = tmp_path / "r.jsonl"
    source.write_text(
        json.dumps({"vehicle_id": "a", "ts": 0, "lat": 40.7, "lon": -74.0, "speed": 1})
    )
    code = main(["release", str(source), "--out", str(tmp_path / "o.jsonl"), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and field in err


def test_pld_without_the_optional_package_names_the_extra(monkeypatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_dp_accounting(name, *args, **kwargs):
        if name.startswith("dp_accounting"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dp_accounting)
    with pytest.raises(ConfigError, match=r"stream-dp\[pld\]"):
        checked_settings(load_settings(accounting="pld"))


@pytest.mark.parametrize("seed", range(5))
def test_regrouping_a_window_merges_pairs_exactly(seed) -> None:
    """Each merged (cell, vehicle) pair: counts and sums added, the first C readings kept."""
    from stream_dp.release.adaptive import regroup as _regroup

    rng = random.Random(seed)
    cells = sorted(h3.grid_disk(CENTRE, 2))
    readings = [
        (rng.choice(cells), f"v{rng.randrange(6)}", float(rng.randrange(1000)), rng.uniform(0, U))
        for _ in range(400)
    ]
    limit = 5
    cs, vs, ts, xs = (list(x) for x in zip(*readings, strict=True))
    window = WindowColumns.from_readings(cs, vs, ts, xs, limit)
    parents = sorted({h3.cell_to_parent(c, 7) for c in cells})
    names = tuple(sorted(parents + cells[:3]))  # three cells on their own, the rest merged
    target = {c: names.index(c) if c in cells[:3] else names.index(h3.cell_to_parent(c, 7))
              for c in cells}  # fmt: skip
    target[cells[3]] = -1  # one cell dropped
    unit = np.array([target[window.cell_names[c]] for c in window.cell_code.tolist()])
    cells_in = np.bincount([u for u in target.values() if u >= 0], minlength=len(names))
    merged = _regroup(window, names, unit, limit, cells_in > 1)
    expected: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for c, v, t, x in readings:
        if target[c] >= 0:
            expected.setdefault((names[target[c]], v), []).append((t, x))
    got = merged.pair_index()
    assert set(got) == set(expected)
    for key, pair in got.items():
        values = sorted(expected[key])
        assert merged.count[pair] == len(values)
        assert merged.total[pair] == pytest.approx(sum(x for _, x in values))
        prefix = merged.prefixes(np.array([pair]))[0]
        assert list(prefix) == [x for _, x in values[:limit]]


def test_a_window_with_every_cell_withheld_releases_nothing_and_charges_nobody() -> None:
    settings = load_settings(
        resolution=8, coarsest_resolution=7, target_mean_error=1.0, vehicle_budget="none"
    )
    window = targeted_window(4)
    release = release_window(
        0,
        window,
        ReleaseParams.from_settings(settings),
        LaplaceNoise(),
        ledger=BudgetLedger(86400, None),
    )
    assert release.cells == []
    assert release.summary["readings_withheld"] == int(window.count.sum())
    assert release.summary["cells_withheld"] > 0 and release.summary["K"] == 0
    assert release.loss is not None and len(release.loss) == 0
