"""Adaptive resolution under secret routes (docs/math.md §14.10): the fine level is released
only under the coarse cells whose noisy count reaches the fine cut, on public candidates (every
child of those cells gets a noisy count, an empty one too); every vehicle pays both levels; a
lone vehicle shows at neither level beyond delta."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import h3
import numpy as np
import pytest
from jsonschema import Draft202012Validator
from numpy.typing import NDArray

from stream_dp.cli import main
from stream_dp.config import load_settings
from stream_dp.dp.laplace_tails import upper_tail
from stream_dp.dp.level_choice import USEFUL_CHANCE, USEFUL_SHARE, fine_cut_steps
from stream_dp.dp.partition_selection import threshold_steps
from stream_dp.dp.randomness import RandomSource
from stream_dp.dp.secret_accounting import COUNT_STEPS, SUM_STEPS, SecretRoutesBudget
from stream_dp.release.records import WindowRelease
from stream_dp.secret_routes import adaptive
from stream_dp.secret_routes.params import ADAPTIVE, FIXED, SecretRoutesParams
from stream_dp.secret_routes.release import release_secret_window
from tests.unit.secret_routes.columns import Pair, crowd, window_columns
from tests.unit.secret_routes.test_secret_privacy import NoThreshold, cp_low, epsilon_lower_bound
from tests.unit.secret_routes.test_secret_routes_settings import SCHEMA
from tests.unit.secret_routes.test_secret_span import run_release

ROOT = Path(__file__).resolve().parents[3]
FINE = h3.latlng_to_cell(40.70, -74.00, 8)
PARENT = h3.cell_to_parent(FINE, 7)
SIBLING = next(c for c in h3.cell_to_children(PARENT, 8) if c != FINE)
LONE = h3.latlng_to_cell(41.50, -73.00, 8)  # far away: alone at both levels
#: Fine cells under other coarse cells than PARENT's, far from each other.
ELSEWHERE = (h3.latlng_to_cell(40.80, -74.00, 8), h3.latlng_to_cell(40.90, -74.00, 8))


def two_levels(budget: SecretRoutesBudget, choice: str = ADAPTIVE,
               kind: type[SecretRoutesParams] = SecretRoutesParams,
               ) -> SecretRoutesParams:  # fmt: skip
    return kind(budget, window_seconds=3600, coarse_resolution=7, resolution_choice=choice)


def test_the_fine_cut_holds_its_chance_against_the_summed_pmf() -> None:
    """At the cut, the sum's discrete Laplace noise over n vehicles is within 10 % of U with
    probability >= USEFUL_CHANCE (0.8; the pmf summed term by term); one vehicle fewer is not
    enough."""
    for eps in (Fraction(1, 8), Fraction(1, 2), Fraction(2)):
        scale = SUM_STEPS / eps
        cut = fine_cut_steps(scale, SUM_STEPS, COUNT_STEPS)
        reach = math.floor(USEFUL_SHARE * cut / COUNT_STEPS * SUM_STEPS)  # |Z| <= reach steps
        q = math.exp(-1 / float(scale))
        inside = sum((1 - q) / (1 + q) * q ** abs(z) for z in range(-reach, reach + 1))
        assert inside >= USEFUL_CHANCE
        assert upper_tail(reach + 1, scale) <= (1 - USEFUL_CHANCE) / 2
        fewer = math.floor(USEFUL_SHARE * (cut - COUNT_STEPS) / COUNT_STEPS * SUM_STEPS)
        assert 2 * upper_tail(fewer + 1, scale) > 1 - USEFUL_CHANCE


def test_settings_charge_both_levels_and_select_on_the_coarse_one_only() -> None:
    settings = load_settings(privacy_model="secret-routes", contribution_cells=2,
                             coarse_resolution=7, resolution_choice="adaptive")  # fmt: skip
    params = SecretRoutesParams.from_settings(settings)
    fixed = SecretRoutesParams.from_settings(settings.model_copy(update={"resolution_choice":
                                                                         FIXED}))  # fmt: skip
    assert params.adaptive and params.budget.cells == 4 == fixed.budget.cells
    assert params.budget.window_epsilon == fixed.budget.window_epsilon
    b = params.budget
    assert params.threshold == threshold_steps(COUNT_STEPS, 2, b.selection_delta,
                                               params.count_scale)  # fmt: skip
    assert params.threshold < fixed.threshold


@pytest.mark.parametrize(("values", "field"), [
    ({"privacy_model": "secret-routes", "resolution_choice": "fixed"}, "resolution_choice"),
    ({"resolution_choice": "fixed"}, "resolution_choice"),
    ({"privacy_model": "secret-routes", "coarse_resolution": 7, "resolution_choice": "some"},
     "resolution_choice"),
])  # fmt: skip
def test_bad_resolution_choice_fails_naming_it(values: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        load_settings(**values)


def test_fine_cells_come_only_from_split_coarse_cells() -> None:
    params = two_levels(SecretRoutesBudget(8.0, 1e-6, 1, 2))
    pairs = crowd(FINE, 300, 20.0) + crowd(SIBLING, 40, 40.0)
    source = RandomSource.seeded_for_tests(5)
    columns = window_columns(pairs)
    shown_fine = set()
    for _ in range(30):
        out = release_secret_window(0, columns, params, source, 1)
        coarse = {r["cell"]: r for r in out.cells if r["resolution"] == 7}
        fine = [r for r in out.cells if r["resolution"] == 8]
        for record in fine:
            parent = coarse[h3.cell_to_parent(record["cell"], 7)]
            assert parent["n_vehicles_noisy"] * COUNT_STEPS >= params.fine_cut
        shown_fine |= {r["cell"] for r in fine}
        assert out.summary["cells_released"] == len(out.cells)
    assert {FINE, SIBLING} <= shown_fine
    by_cell = {r["cell"]: r for r in out.cells}
    assert by_cell[FINE]["mean"] == pytest.approx(20.0, abs=3)
    assert by_cell[PARENT]["n_vehicles_noisy"] == pytest.approx(340, abs=30)


class FedCounts:
    """A test double for the adaptive levels' count noise (``adaptive.noisy_counts``): it
    keeps the vehicle counts fed to it, the coarse level's then the fine one's, adds nothing
    to the coarse counts and ``fine_noise`` count steps to every fine candidate's."""

    def __init__(self, fine_noise: int = 0) -> None:
        self.fed: list[NDArray[np.int64]] = []
        self.fine_noise = fine_noise

    def __call__(self, vehicles: NDArray[np.int64], params: SecretRoutesParams,
                 source: RandomSource) -> NDArray[np.int64]:  # fmt: skip
        noise = self.fine_noise if self.fed else 0
        self.fed.append(vehicles.copy())
        return vehicles * COUNT_STEPS + noise


def fed_release(params: SecretRoutesParams, pairs: list[Pair],
                fine_noise: int = 0) -> tuple[FedCounts, WindowRelease]:  # fmt: skip
    """One release with :class:`FedCounts` as the count noise: what it was fed, the release."""
    fed = FedCounts(fine_noise)
    source = RandomSource.seeded_for_tests(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(adaptive, "noisy_counts", fed)
        return fed, release_secret_window(0, window_columns(pairs), params, source, 1)


def test_a_shown_coarse_cell_below_the_fine_cut_is_not_split() -> None:
    """count_share 0.8 puts the threshold (5.8 vehicles) below the fine cut (20.1): LONE's
    parent, 12 vehicles and no count noise, is shown but not split. Every fine candidate's
    noise lifts it to the cut, so a split that ignored the cut would show LONE's siblings."""
    params = two_levels(SecretRoutesBudget(8.0, 1e-6, 1, 2, count_share=0.8))
    lone_parent = h3.cell_to_parent(LONE, 7)
    assert params.threshold <= 12 * COUNT_STEPS < params.fine_cut
    _, out = fed_release(params, crowd(FINE, 300, 20.0) + crowd(LONE, 12, 10.0),
                         fine_noise=params.fine_cut)  # fmt: skip
    coarse = {r["cell"]: r for r in out.cells if r["resolution"] == 7}
    assert coarse[lone_parent]["n_vehicles_noisy"] == 12 and PARENT in coarse
    fine = {r["cell"] for r in out.cells if r["resolution"] == 8}
    assert fine == set(h3.cell_to_children(PARENT, 8))


@pytest.mark.parametrize("cells_per_vehicle", [1, 2])
@pytest.mark.parametrize("spread", ["siblings", "parents"])
def test_an_added_vehicle_moves_l0_counts_by_one_at_each_level(
    spread: str, cells_per_vehicle: int
) -> None:
    """Neighbouring streams: vehicle x in 3 children of PARENT (one coarse cell, 3 candidates)
    or in 3 coarse cells (3 parents, 3 candidates). At each level the counts fed to the noise
    move by one vehicle in L0 of x's cells there (all of them if fewer), no more (§14.10)."""
    budget = SecretRoutesBudget(8.0, 1e-6, cells_per_vehicle, 2 * cells_per_vehicle)
    params = SecretRoutesParams(budget, window_seconds=3600, contribution_cells=cells_per_vehicle,
                                coarse_resolution=7)  # fmt: skip
    if spread == "siblings":
        x_cells = tuple(sorted(h3.cell_to_children(PARENT, 8)))[:3]
        base = crowd(FINE, 300, 20.0)
    else:
        x_cells = (FINE, *ELSEWHERE)
        base = [pair for cell in x_cells for pair in crowd(cell, 300, 20.0)]
    added = [("x", cell, [30.0 + i]) for i, cell in enumerate(x_cells)]
    without, _ = fed_release(params, base)
    with_x, _ = fed_release(params, base + added)
    parents = {h3.cell_to_parent(cell, 7) for cell in x_cells}
    assert len(parents) == (1 if spread == "siblings" else 3)
    for level, x_has in ((0, len(parents)), (1, len(x_cells))):
        moved = with_x.fed[level] - without.fed[level]
        assert set(moved.tolist()) <= {0, 1}
        assert moved.sum() == min(cells_per_vehicle, x_has), (spread, level, moved)


def test_a_child_below_the_selection_threshold_shows_under_a_split_parent() -> None:
    """12 vehicles in a child: far below the threshold a fixed level needs (21), above the
    adaptive cut (5): shown in (almost) every run when adaptive, in none when fixed."""
    budget = SecretRoutesBudget(8.0, 1e-6, 1, 2, count_share=0.2)
    pairs = crowd(FINE, 300, 20.0) + crowd(SIBLING, 12, 40.0)
    found = {}
    for choice in (ADAPTIVE, FIXED):
        params = two_levels(budget, choice)
        assert params.fine_cut < 12 * COUNT_STEPS < params.threshold - 8 * COUNT_STEPS
        found[choice] = shown_runs(params, pairs, shows(SIBLING), 50, seed=3)
    assert found[ADAPTIVE] >= 45 and found[FIXED] == 0


def shows(cell: str) -> Callable[[WindowRelease], bool]:
    return lambda release: any(c["cell"] == cell for c in release.cells)


def shown_runs(params: SecretRoutesParams, pairs: list[Pair], event: Callable[[WindowRelease],
               bool], runs: int, seed: int) -> int:  # fmt: skip
    source = RandomSource.seeded_for_tests(seed)
    columns = window_columns(pairs)
    return sum(event(release_secret_window(0, columns, params, source, 1)) for _ in range(runs))


def empty_candidate_chance(count_share: float, vehicle_budget: float) -> float:
    """``P(Z_n >= c)``: an empty fine candidate shown by its count noise alone (§14.10)."""
    p = SecretRoutesParams.from_settings(load_settings(
        privacy_model="secret-routes", coarse_resolution=7, count_share=count_share,
        vehicle_budget=vehicle_budget,
    ))  # fmt: skip
    return upper_tail(p.fine_cut, p.count_scale)


def test_output_doc_states_the_empty_candidate_chance() -> None:
    """docs/output.md: the chance depends on count_share alone (B 4, 14, 56 agree), and its
    figures at 0.1, 0.2 and the default 0.5 are the computed ones."""
    chances = {}
    for share in (0.1, 0.2, 0.5):
        by_budget = [empty_candidate_chance(share, b) for b in (4.0, 14.0, 56.0)]
        assert max(by_budget) == pytest.approx(min(by_budget), rel=1e-3)
        chances[share] = by_budget[1]
    mantissa, exponent = f"{chances[0.5]:.0e}".split("e")
    superscript = str(int(exponent)).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    stated = (f"about {100 * chances[0.1]:.0f} % at 0.1, {100 * chances[0.2]:.1f} % at 0.2, "
              f"{mantissa}·10{superscript} at the default 0.5")  # fmt: skip
    assert load_settings().count_share == 0.5
    assert stated in " ".join((ROOT / "docs" / "output.md").read_text().split())


def touched_candidates_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken release: only the candidates some vehicle touched get a noisy count."""
    real = adaptive.candidate_level

    def broken(columns: Any, candidates: tuple[str, ...], *args: Any) -> Any:
        touched = tuple(c for c in candidates if c in columns.cell_names)
        return real(columns, touched, *args)

    monkeypatch.setattr(adaptive, "candidate_level", broken)


@pytest.mark.parametrize("broken", [False, True])
def test_an_empty_candidate_is_shown_by_its_noise_alone(monkeypatch, broken: bool) -> None:
    """Neighbours: the added vehicle is the only one in a child of a dense coarse cell. The
    child is shown without it by noise only; with it no more than e^eps_n as often. A release
    that noises only the touched candidates never shows it without the vehicle: caught."""
    if broken:
        touched_candidates_only(monkeypatch)
    budget = SecretRoutesBudget(4.0, 1e-6, 1, 2, count_share=0.1)
    params = two_levels(budget)
    base = crowd(FINE, 300, 20.0)
    runs = 3000
    with_x = shown_runs(params, [*base, ("x", SIBLING, [30.0])], shows(SIBLING), runs, 1)
    without = shown_runs(params, base, shows(SIBLING), runs, 2)
    found = epsilon_lower_bound(with_x, without, runs, budget.selection_delta)
    claim = budget.cells * float(budget.cell_epsilons[0]) - math.log1p(-budget.selection_delta)
    assert (found > claim) is broken, (with_x, without, found, claim)


@pytest.mark.parametrize(("kind", "caught"), [(SecretRoutesParams, False), (NoThreshold, True)])
def test_a_lone_vehicle_shows_at_neither_level_beyond_delta(
    kind: type[SecretRoutesParams], caught: bool
) -> None:
    budget = SecretRoutesBudget(2.0, 0.2, 1, 2)  # L0 1, two levels: delta_sel 0.02
    params = two_levels(budget, kind=kind)
    pairs = crowd(FINE, 300, 20.0) + [("x", LONE, [50.0])]
    lone = {LONE, h3.cell_to_parent(LONE, 7)}
    runs = 3000
    shown = shown_runs(params, pairs, lambda r: any(c["cell"] in lone for c in r.cells), runs, 9)
    assert (cp_low(shown, runs) > budget.selection_delta) is caught


@pytest.mark.parametrize("choice", ["adaptive", "fixed"])
def test_release_and_plan_state_the_choice_and_records_pass_the_schema(
    tmp_path: Path, capsys, monkeypatch, choice: str
) -> None:
    levels = ["--coarse-resolution", "6", "--resolution-choice", choice]
    assert run_release(tmp_path, *levels) == 0
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    validator = Draft202012Validator(json.loads(SCHEMA.read_text()))
    assert all(not list(validator.iter_errors(r)) for r in records)
    summary = next(r for r in records if r["type"] == "window")
    assert summary["resolution_choice"] == choice
    assert (summary["fine_cut_vehicles"] is None) is (choice == "fixed")
    assert {6, 7} <= {r["resolution"] for r in records if r["type"] == "cell"}
    capsys.readouterr()
    monkeypatch.setenv("STREAM_DP_COARSE_RESOLUTION", "6")
    monkeypatch.setenv("STREAM_DP_RESOLUTION_CHOICE", choice)
    assert main(["plan", "--privacy-model", "secret-routes", "--resolution", "7"]) == 0
    assert f"levels: {choice}, resolution " in capsys.readouterr().out
