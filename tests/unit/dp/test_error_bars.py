"""mean_error / variance_error: closed forms, and empirical coverage >= 95 % on adversarial data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stream_dp.dp.error_bars import LN20, mean_error, variance_error
from stream_dp.dp.grid_error import ErrorModel, grid_error, mean_bias, variance_bias
from stream_dp.dp.mechanisms import MEAN_MECHANISMS
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.release.params import ReleaseParams
from stream_dp.release.window import release_window
from stream_dp.windows.columns import WindowColumns
from tests.support.settings import fixed_mode_settings

U = 65.0
CELLS = ["872a10701ffffff", "872a10703ffffff"]
#: Mechanisms that state a data-independent bound (their specs; the others publish null).
BOUNDED = {name for name, spec in MEAN_MECHANISMS.items() if spec.states_error_bound}


def test_mean_error_is_the_bias_plus_the_laplace_95_quantile() -> None:
    top, kept, total, eps = 3, 40, 50, 0.8
    expected = U * (1 - kept / total) + math.log(20) * (U * top / kept) / eps
    assert float(mean_error(U, eps, top, kept, total)) == pytest.approx(expected, rel=1e-8)
    assert float(mean_error(U, eps, top, 0, total)) == math.inf


def test_variance_error_uses_the_corrected_bias() -> None:
    top, kept, total, eps = 2, 30, 50, 0.5
    bias = float(variance_bias(U, kept, total))
    assert bias == pytest.approx(U**2 * kept * (total - kept) / total**2)  # M < 2S branch
    got = float(variance_error(U, eps, top, kept, total))
    assert got == pytest.approx(bias + LN20 * U**2 * top * (kept - top) / kept**2 / eps)


def test_an_even_split_is_eq_13() -> None:
    top, kept, total = np.array([1, 4, 9]), np.array([5, 40, 12]), np.array([9, 40, 30])
    legacy = grid_error(U, 0.7, top, kept, total)
    split = grid_error(U, 0.7, top, kept, total, ErrorModel.split(0.7))
    assert np.array_equal(legacy, split)
    mean_only = grid_error(U, 0.7, top, kept, total, ErrorModel.split(0.7, 0.0))
    assert np.allclose(mean_only, mean_bias(U, kept, total) + U * top / kept / 0.7)


def test_error_model_refuses_a_bad_share() -> None:
    for share in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="variance_share"):
            ErrorModel.split(1.0, share)


def adversarial_window(rng: np.random.Generator) -> tuple[WindowColumns, dict[str, float]]:
    """Two cells built to maximise the clipping bias: a heavy hitter at U with many readings
    (capped by the pseudo-user step), light vehicles at 0, and a vehicle in both cells that
    CLIP-USER may suppress in one; readings late in time at U so a cap cuts the high ones."""
    readings = []
    for cell in CELLS:
        for r in range(60):  # heavy hitter: early readings 0, later ones U (cap keeps the 0s)
            readings.append((cell, "heavy", float(r), 0.0 if r < 6 else U))
        for v in range(30):
            for r in range(int(rng.integers(1, 4))):
                readings.append((cell, f"light{v}", float(100 + r), 0.0))
    for cell in CELLS:  # a vehicle in both cells, all at U
        readings.extend((cell, "both", float(200 + r), U) for r in range(5))
    cells, vehicles, ts, values = (list(c) for c in zip(*readings, strict=True))
    window = WindowColumns.from_readings(cells, vehicles, ts, values, 64)
    truth = {c: float(np.mean([v for cc, _, _, v in readings if cc == c])) for c in CELLS}
    return window, truth


@pytest.mark.parametrize("mechanism", sorted(MEAN_MECHANISMS))
@pytest.mark.parametrize("share", [0.0, 0.5])
def test_mean_error_covers_at_least_95_percent_on_adversarial_data(mechanism, share) -> None:
    delta = 1e-6 if MEAN_MECHANISMS[mechanism].needs_delta else None
    settings = fixed_mode_settings(
        mean_mechanism=mechanism, delta=delta, variance_share=share, epsilon=0.5
    )
    rng = np.random.default_rng(7)
    window, truth = adversarial_window(rng)
    noise = LaplaceNoise(RandomSource.seeded_for_tests(hash((mechanism, share)) % 2**32))
    hits = trials = 0
    biased = False
    for _ in range(150 if mechanism in BOUNDED else 3):
        release = release_window(0, window, ReleaseParams.from_settings(settings), noise)
        for record in release.cells:
            bound = record["mean_error"]
            if mechanism not in BOUNDED:
                assert bound is None
                continue
            assert bound is not None and bound > 0
            if share == 0.0:
                assert record["variance"] is None and record["variance_error"] is None
            else:
                assert record["variance_error"] > 0
            biased |= record["n_readings_used"] < record["n_readings"]
            trials += 1
            hits += abs(record["mean"] - truth[record["cell"]]) <= bound
    if mechanism in BOUNDED:
        assert biased, "the data must exercise the clipping bias"
        assert hits / trials >= 0.95, f"{mechanism}: coverage {hits / trials:.3f}"


def test_error_bars_are_capped_at_the_range_of_the_value() -> None:
    """Issue 26: with one vehicle and a small epsilon the Laplace quantile alone exceeds U;
    the published mean_error is U (both means lie in [0, U]), variance_error U^2/4, and
    every record states its U."""
    settings = fixed_mode_settings(upper=U, epsilon=0.05, variance_share=0.5, resolution=7)
    readings = [(CELLS[0], "alone", 0.0, 30.0), (CELLS[0], "alone", 1.0, 50.0)]
    readings += [(CELLS[1], f"v{v}", float(v), 40.0) for v in range(3)]
    cells, vehicles, ts, values = (list(c) for c in zip(*readings, strict=True))
    window = WindowColumns.from_readings(cells, vehicles, ts, values, 64)
    release = release_window(
        0,
        window,
        ReleaseParams.from_settings(settings),
        LaplaceNoise(RandomSource.seeded_for_tests(5)),
    )
    by_cell = {r["cell"]: r for r in release.cells}
    lone = by_cell[CELLS[0]]
    uncapped_mean = float(mean_error(U, 0.025, 1, lone["n_readings_used"], lone["n_readings"]))
    uncapped_var = float(variance_error(U, 0.025, 1, 2, 2))
    assert uncapped_mean > U and uncapped_var > U**2 / 4  # the case where the cap acts
    assert lone["mean_error"] == U
    assert lone["variance_error"] == U**2 / 4
    assert all(r["mean_error"] <= U for r in release.cells)
    assert {r["upper"] for r in [*release.cells, release.summary]} == {U}
