"""The one CLIP mean (docs/math.md §3, §7.2): the combiner on many cells and on one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stream_dp.dp.clip_mean import ClipMeanCombiner, ClippedSums, clipped_means
from stream_dp.dp.error_bars import mean_error
from stream_dp.dp.mechanisms import CellData, get_mean_mechanism
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource

U = 65.0


def random_sums(seed: int, n_cells: int = 40) -> ClippedSums:
    """Cells with 1..200 readings of which S >= 1 kept (top <= S), kept values in [0, U]."""
    rng = np.random.default_rng(seed)
    total = rng.integers(1, 200, size=n_cells)
    kept = rng.integers(1, total + 1)
    top = rng.integers(1, kept + 1)
    return ClippedSums(rng.uniform(0, U, size=n_cells) * kept, kept, top, total)


def noise(seed: int) -> LaplaceNoise:
    return LaplaceNoise(RandomSource.seeded_for_tests(seed))


def one_cell(sums: ClippedSums, g: int) -> ClippedSums:
    return ClippedSums(*(a[g : g + 1] for a in (sums.kept_sum, sums.kept, sums.top, sums.total)))


def test_sensitivity_bias_and_error_bar_are_eq_9_thm_iv_1_and_the_95_percent_bound() -> None:
    sums = random_sums(1)
    combiner = ClipMeanCombiner(U, 0.35)
    kept, top, total = sums.kept, sums.top, sums.total
    np.testing.assert_allclose(combiner.sensitivity(sums), U * top / kept, rtol=1e-15)
    np.testing.assert_allclose(combiner.bias(sums), U * (1 - kept / total), rtol=1e-15, atol=0)
    expected_bar = combiner.bias(sums) + math.log(20) * combiner.sensitivity(sums) / 0.35
    np.testing.assert_allclose(combiner.error_bar(sums), expected_bar, rtol=1e-8)
    assert np.array_equal(combiner.error_bar(sums), mean_error(U, 0.35, top, kept, total))
    np.testing.assert_allclose(sums.means, sums.kept_sum / kept, rtol=0)


def test_a_cell_with_nothing_kept_has_no_finite_mean_or_sensitivity() -> None:
    sums = ClippedSums(np.array([0.0, 30.0]), np.array([0, 2]), np.array([0, 1]), np.array([3, 2]))
    with np.errstate(invalid="ignore"):
        assert math.isnan(clipped_means(sums.kept_sum, sums.kept)[0])
    sensitivity = ClipMeanCombiner(U, 1.0).sensitivity(sums)
    assert sensitivity[0] == math.inf and sensitivity[1] == U / 2
    scale = ClipMeanCombiner(U, 1.0).noise_scale(sums, noise(3))
    assert scale[0] == math.inf and scale[1] >= U / 2


@pytest.mark.parametrize("epsilon", [0.5, 0.05])  # compiled plans, and plans in Python
def test_the_batch_is_each_cell_in_turn_on_the_same_bits(epsilon: float) -> None:
    sums = random_sums(2)
    combiner = ClipMeanCombiner(U, epsilon)
    batch = combiner.noisy_means(sums, noise(3))
    same_bits = noise(3)
    in_turn = [combiner.noisy_means(one_cell(sums, g), same_bits)[0] for g in range(len(batch))]
    assert batch.tolist() == in_turn
    assert not np.array_equal(batch, sums.means)  # noise was added


def test_the_clip_mechanism_is_the_combiner_on_one_cell() -> None:
    """``ClipMean`` releases what the combiner gives for the cell's first Gamma' readings."""
    rng = np.random.default_rng(4)
    for seed in range(12):
        readings = [rng.uniform(0, U, size=int(rng.integers(1, 9))) for _ in range(6)]
        kept = np.array([int(rng.integers(0, r.size + 1)) for r in readings])
        kept[0] = max(kept[0], 1)
        cell = CellData.from_readings(readings, U, kept_counts=kept)
        release = get_mean_mechanism("clip").release(
            cell, U, 0.4, RandomSource.seeded_for_tests(seed)
        )
        first = sum(float(r[:k].sum()) for r, k in zip(readings, kept, strict=True))
        sums = ClippedSums(
            np.array([first]), np.array([kept.sum()]), np.array([kept.max()]),
            np.array([sum(r.size for r in readings)]),
        )  # fmt: skip
        combiner = ClipMeanCombiner(U, 0.4)
        raw = combiner.noisy_means(sums, noise(seed))[0]
        assert release.raw_value == pytest.approx(raw, rel=1e-12)
        assert release.value == min(max(release.raw_value, 0.0), U)
        assert release.sensitivity == combiner.sampler_sensitivity(sums)[0]
        assert release.worst_case_error == pytest.approx(
            combiner.bias(sums)[0] + combiner.sampler_sensitivity(sums)[0] / 0.4, rel=1e-15
        )
        assert release.parameters["noise_scale"] == LaplaceNoise.effective_scale(
            release.sensitivity, 0.4
        )


def test_the_clip_mechanisms_float_mean_of_neighbours_moves_by_at_most_what_the_sampler_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/math.md §4.2, "Float inputs", for the one-cell ``clip`` mechanism: 3,000 vehicles
    with one reading each, one of them moved from 0 to U. A plain running sum of the vehicles'
    sums and ``U top / S`` let the input move further (8 of these 12 cases); the mechanism's
    input never moves by more than the sensitivity it gives the sampler."""
    given: list[tuple[float, float]] = []

    def recording(self: LaplaceNoise, values, sensitivities, epsilon):  # type: ignore[no-untyped-def]
        given.append((float(np.ravel(values)[0]), float(np.ravel(sensitivities)[0])))
        return np.asarray(values, dtype=np.float64)

    monkeypatch.setattr(LaplaceNoise, "release_many", recording)
    clip, old_over = get_mean_mechanism("clip"), 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        values = rng.uniform(0.0, U, size=3000)
        moved = int(rng.integers(0, 3000))
        old_means = []
        for value in (0.0, U):
            values[moved] = value
            cell = CellData.from_readings([values[i : i + 1] for i in range(3000)], U)
            clip.release(cell, U, 1.0, RandomSource.seeded_for_tests(seed))
            old_means.append(np.cumsum(values)[-1] / 3000)  # the old path: a running sum
        (low, sensitivity), (high, _) = given[-2:]
        assert abs(high - low) <= sensitivity
        old_over += abs(old_means[1] - old_means[0]) > U / 3000
    assert old_over > 0
