"""`stream-dp experiment mean-estimators`: data construction, samplers, CSV sanity, seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stream_dp.cli import main
from stream_dp.dp.mechanisms import CellData, array_length, get_mean_mechanism
from stream_dp.dp.mechanisms.grouping import group
from stream_dp.dp.randomness import RandomSource
from stream_dp.experiments import itms_synthetic as itms
from stream_dp.experiments import mean_estimators
from stream_dp.experiments.fast_samplers import prepare
from stream_dp.experiments.mean_estimators import (
    ALL_SPECS,
    GROUPING_SPECS,
)
from stream_dp.experiments.worst_case_001 import (
    akmv_error_given_threshold,
    extreme_counts,
    geometric_counts,
    worst_case_cell,
)

# -- data ----------------------------------------------------------------------------------


def test_itms_counts_match_every_published_statistic() -> None:
    counts = itms.itms_counts()
    assert counts.size == 217 and counts.sum() == 17_166
    assert counts.max() == 417 and counts.min() == 1
    assert np.all(np.diff(counts) <= 0)
    assert array_length.median_length(counts) == 46 == np.median(counts)
    m_ub = array_length.eq9_length(counts)
    assert group("wraparound", counts, m_ub).n_arrays == 160
    assert group("bestfit", counts, m_ub).n_arrays == 164


def test_scalings_follow_lemmas_iv1_and_iv2() -> None:
    counts = itms.itms_counts()
    m_ub = array_length.eq9_length(counts)
    sample = itms.sample_scaled(counts, 10)
    assert sample.sum() == 171_660 and array_length.median_length(sample) == 460
    assert array_length.eq9_length(sample) == 10 * m_ub  # Lemma IV.1
    assert group("bestfit", sample, 10 * m_ub).n_arrays == 164
    users = itms.user_scaled(counts, 10)
    assert users.size == 2170 and sorted(users.tolist()) == sorted(np.tile(counts, 10).tolist())
    assert array_length.eq9_length(users) == m_ub  # Lemma IV.2
    assert group("wraparound", users, m_ub).n_arrays == 1600
    assert 1600 <= group("bestfit", users, m_ub).n_arrays <= 1640


def test_projected_gaussian_readings() -> None:
    counts = np.array([3, 1, 5000])
    readings = itms.projected_gaussian(counts, np.random.default_rng(0))
    assert [r.size for r in readings] == [3, 1, 5000]
    flat = np.concatenate(readings)
    assert flat.min() >= 0.0 and flat.max() <= 65.0
    assert abs(flat.mean() - itms.SPEED_MEAN) < 1.0
    again = itms.projected_gaussian(counts, np.random.default_rng(0))
    assert all(np.array_equal(a, b) for a, b in zip(readings, again, strict=True))


def test_001_collections() -> None:
    geometric = geometric_counts(6)
    assert (geometric.size, geometric.sum(), geometric.max()) == (127, 448, 64)
    extreme = extreme_counts(101, 10)
    assert (extreme.size, extreme.sum(), extreme.max()) == (101, 110, 10)


@pytest.mark.parametrize("epsilon", [0.3, 1.0])
def test_akmv_error_formula_matches_the_mechanism(epsilon: float) -> None:
    counts = geometric_counts(4)
    release = get_mean_mechanism("akmv").release(
        worst_case_cell(counts), 65.0, epsilon, RandomSource.seeded_for_tests(1)
    )
    threshold = release.parameters["threshold"]
    assert akmv_error_given_threshold(counts, 65.0, epsilon, threshold) == pytest.approx(
        release.parameters["worst_case_error_given_threshold"], rel=1e-12
    )


# -- fast samplers -------------------------------------------------------------------------


SPECS = {
    f"{name}{''.join(f'-{k}={v}' for k, v in params.items())}": (name, params)
    for _, name, params in GROUPING_SPECS
    + ALL_SPECS
    + mean_estimators.eq9_array_averaging(ALL_SPECS)
}


@pytest.mark.parametrize(("name", "params"), list(SPECS.values()), ids=list(SPECS))
def test_sampler_equals_release_draw_for_draw(name: str, params: dict) -> None:
    rng = np.random.default_rng(5)
    counts = np.concatenate([[40, 33, 20], rng.integers(1, 15, 27)])
    readings = itms.projected_gaussian(counts, rng)
    mechanism = get_mean_mechanism(name, **params)
    for epsilon in (0.5, 2.0):
        length = int(mechanism.prefix_needed(counts, epsilon).max())
        cell = CellData.from_readings(readings, 65.0, length)
        draw = prepare(mechanism, cell, 65.0, epsilon)
        fast, slow = RandomSource.seeded_for_tests(9), RandomSource.seeded_for_tests(9)
        for _ in range(3):
            assert draw(fast) == mechanism.release(cell, 65.0, epsilon, slow).value


# -- the --quick run -----------------------------------------------------------------------


# -- reproducibility and options -----------------------------------------------------------


def test_missing_pipelinedp_is_skipped_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mean_estimators, "pipelinedp_available", lambda: False)
    notes: list[str] = []
    assert mean_estimators._pipelinedp([], mean_estimators.Config.quick(seed=0), notes.append) == []
    assert notes and "pipeline_dp" in notes[0]


@pytest.mark.parametrize(("option", "value"), [("--runs", "1"), ("--runs", "x"), ("--seed", "-1")])
def test_bad_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    args = ["experiment", "mean-estimators", "--out", str(tmp_path), "--quick", option, value]
    assert main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and option in err[0]
    assert not list(tmp_path.iterdir())
