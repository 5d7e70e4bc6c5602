"""Issue 21: every mean mechanism releases any cell the engine stores, whatever its counts.

The engine keeps each (window, cell, vehicle)'s first ``C`` readings plus aggregates
(``Settings.prefix_limit``). These tests feed every mechanism, with the parameters the release
gives it, cells whose counts sit around ``C`` (1, C-1, C, C+1, 2C, 10C, mixes, and the depot:
a few vehicles with many unequal counts among many with few) for cohort sizes from 1 to
100, with the kept counts of CLIP-USER followed or not by the pseudo-user step, and
check that none raises (in particular no ``InsufficientPrefixError``) and that the released
mean lies in [0, U].
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.config import Settings
from stream_dp.dp.clip_user import clip_user
from stream_dp.dp.mechanisms import (
    MEAN_MECHANISMS,
    CellData,
    MeanMechanism,
    get_mean_mechanism,
)
from stream_dp.dp.mechanisms.cummings import cohorts
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.pseudo_user import no_pseudo_user, pseudo_user_step
from stream_dp.dp.randomness import RandomSource
from stream_dp.release.params import ReleaseParams
from stream_dp.release.stages import configured_mean_mechanism
from stream_dp.release.window import release_window
from stream_dp.windows.columns import WindowColumns
from tests.support.settings import fixed_mode_settings

UPPER = 65.0
EPSILON = 1.0
DELTA = 1e-6
CELL = "882a100d2bfffff"
MECHANISMS = sorted(MEAN_MECHANISMS)
PATTERNS = ("1", "C-1", "C", "C+1", "2C", "10C", "mixed", "depot")


def test_all_twelve_mechanisms_are_covered() -> None:
    assert len(MECHANISMS) == 12


def release_settings(mechanism: str, prefix_limit: int, pseudo_user: bool = True) -> Settings:
    return fixed_mode_settings(
        mean_mechanism=mechanism,
        delta=DELTA,
        prefix_limit=prefix_limit,
        pseudo_user=pseudo_user,
        upper=UPPER,
        epsilon=EPSILON,
    )


def counts_for(pattern: str, n: int, c: int, rng: np.random.Generator) -> list[int]:
    """Per-vehicle reading counts of one cell (all >= 1)."""
    levels = [max(1, level) for level in (1, c - 1, c, c + 1, 2 * c, 10 * c)]
    fixed = dict(zip(PATTERNS[:6], levels, strict=True))
    if pattern in fixed:
        return [fixed[pattern]] * n
    if pattern == "mixed":
        return rng.choice(levels, size=n).tolist()
    # depot: about a third of the vehicles have unequal counts above C, the rest 3 readings
    busy = max(1, n // 3)
    return [c + 1 + 3 * i for i in range(busy)] + [3] * (n - busy)


def readings_for(counts: list[int], rng: np.random.Generator) -> list[np.ndarray]:
    """Readings in [0, U] with a vehicle-specific level (so the cohorts' variance is real)."""
    return [np.clip(rng.normal(rng.uniform(0, UPPER), 8.0, size=m), 0.0, UPPER) for m in counts]


def kept_counts(counts: list[int], c: int, pseudo_user: bool) -> np.ndarray:
    """Gamma' of a one-cell window: CLIP-USER, then the pseudo-user cap with ``C`` or not."""
    vehicles = [f"v{i:03d}" for i in range(len(counts))]
    occupancy = Occupancy.from_arrays([CELL] * len(counts), vehicles, counts)
    clip = clip_user(occupancy, UPPER, EPSILON)
    capped = (
        pseudo_user_step(clip, UPPER, EPSILON, prefix_limit=c)
        if pseudo_user
        else no_pseudo_user(clip)
    )
    return np.asarray(capped.kept_count, dtype=np.int64)


def _configured(settings: Settings) -> MeanMechanism:
    mechanism: MeanMechanism = configured_mean_mechanism(ReleaseParams.from_settings(settings))
    return mechanism


@cache
def configured(c: int) -> list[tuple[str, MeanMechanism]]:
    """Every mechanism with the parameters the release gives it for ``prefix_limit = c``."""
    return [(name, _configured(release_settings(name, c))) for name in MECHANISMS]


def release_every_mechanism(cell: CellData, c: int, source: RandomSource) -> None:
    for name, mechanism in configured(c):
        outcome = mechanism.release(cell, UPPER, EPSILON / 2, source)
        assert 0.0 <= outcome.value <= UPPER, (name, outcome)
        assert math.isfinite(outcome.raw_value), (name, outcome)


#: Cohort sizes: every n up to 30 (where cummings' cohorts, ⌊n/10⌋ and min(⌈ln n / ε⌉,
#: ⌊3n/5⌋), change fastest), then around C = 64 and up to 100; other sizes: the property test.
COHORT_SIZES = (*range(1, 31), 39, 40, 41, 50, 63, 64, 65, 80, 99, 100)


def test_no_mechanism_raises_for_any_cohort_size_and_count_pattern() -> None:
    """n in ``COHORT_SIZES`` x every pattern at the default C = 64, with and without the
    pseudo-user step, each cell given to all twelve mechanisms (other values of C and n: the
    property test below). Where the step caps nothing (every vehicle has the same count) both
    give the same cell, released once."""
    c = 64
    rng = np.random.default_rng(c)
    source = RandomSource.seeded_for_tests(c)
    variants = 0
    for n in COHORT_SIZES:
        for pattern in PATTERNS:
            counts = counts_for(pattern, n, c, rng)
            readings = readings_for(counts, rng)
            capped, uncapped = (kept_counts(counts, c, step) for step in (True, False))
            for kept in [capped] if np.array_equal(capped, uncapped) else [capped, uncapped]:
                cell = CellData.from_readings(readings, UPPER, prefix_length=c, kept_counts=kept)
                release_every_mechanism(cell, c, source)
                variants += 1
    assert variants > len(COHORT_SIZES) * len(PATTERNS)  # the cap bit somewhere: both ran


@settings(max_examples=100, deadline=None)
@given(
    c=st.integers(1, 80),
    picks=st.lists(st.integers(0, 5), min_size=1, max_size=100),
    suppressed=st.lists(st.booleans(), max_size=100),
    seed=st.integers(0, 2**32 - 1),
)
def test_no_mechanism_raises_with_suppressed_vehicles(
    c: int, picks: list[int], suppressed: list[bool], seed: int
) -> None:
    """Random ``C`` and mixes of the levels around it, some vehicles suppressed by CLIP-USER
    (kept count 0; at least one vehicle kept), the others capped anywhere in [1, count]."""
    rng = np.random.default_rng(seed)
    levels = [max(1, level) for level in (1, c - 1, c, c + 1, 2 * c, 10 * c)]
    counts = [levels[p] for p in picks]
    kept = np.array(
        [min(m, int(rng.integers(1, c + 1))) for m in counts], dtype=np.int64
    )  # a pseudo-user cap never needs more than the C stored readings
    drop = np.array((suppressed + [False] * len(counts))[: len(counts)])
    drop[int(rng.integers(len(counts)))] = False
    kept[drop] = 0
    cell = CellData.from_readings(
        readings_for(counts, rng), UPPER, prefix_length=c, kept_counts=kept
    )
    release_every_mechanism(cell, c, RandomSource.seeded_for_tests(seed))


def depot_window(rng: np.random.Generator, spread: bool) -> WindowColumns:
    """The depot cell of issue 21 (8 buses with 100-121 readings among 20 cars with 3), and
    with ``spread`` the cars also in a second cell (so CLIP-USER has a choice to make)."""
    counts = [100 + 3 * b for b in range(8)] + [3] * 20
    cells: list[str] = []
    vehicles: list[str] = []
    ts: list[float] = []
    for v, m in enumerate(counts):
        for i in range(m):
            vehicles.append(f"v{v:03d}")
            cells.append("882a100d2dfffff" if spread and v >= 8 and i == 0 else CELL)
            ts.append(float(i))
    values = rng.uniform(0, UPPER, size=len(ts)).tolist()
    return WindowColumns.from_readings(cells, vehicles, ts, values, 64)


@pytest.mark.parametrize("pseudo_user", [True, False], ids=["pseudo-user", "no-pseudo-user"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_release_step_releases_the_depot_with_every_mechanism(
    mechanism: str, pseudo_user: bool
) -> None:
    rng = np.random.default_rng(7)
    noise = LaplaceNoise(RandomSource.seeded_for_tests(7))
    config = release_settings(mechanism, 64, pseudo_user)
    for spread in (False, True):
        release = release_window(
            0, depot_window(rng, spread), ReleaseParams.from_settings(config), noise
        )
        assert release.summary["cells_released"] == 1 + spread
        assert all(0.0 <= cell["mean"] <= UPPER for cell in release.cells)


def test_cummings_variance_cohort_stays_within_the_stored_prefix() -> None:
    counts = np.array([100 + 3 * b for b in range(8)] + [3] * 20, dtype=np.int64)
    # n = 28, eps = 1/2: L = ceil(ln 28 / 0.5) = 7 buses, k_L = 103 > C = 64
    assert cohorts(counts, 0.5).k_variance == 103
    assert cohorts(counts, 0.5, prefix_limit=64).k_variance == 64
    limited = get_mean_mechanism("cummings", delta=DELTA, prefix_limit=64)
    assert int(limited.prefix_needed(counts, 0.5).max()) == 64
    unlimited = get_mean_mechanism("cummings", delta=DELTA)
    assert int(unlimited.prefix_needed(counts, 0.5).max()) == 103


def test_cummings_is_unchanged_where_the_prefix_already_suffices() -> None:
    """With k_L <= C, the limit changes nothing: same draws, same release."""
    rng = np.random.default_rng(11)
    counts = [40 + i for i in range(30)]
    cell = CellData.from_readings(readings_for(counts, rng), UPPER, prefix_length=64)
    releases = [
        get_mean_mechanism("cummings", delta=DELTA, prefix_limit=limit).release(
            cell, UPPER, 0.5, RandomSource.seeded_for_tests(3)
        )
        for limit in (None, 64)
    ]
    assert releases[0] == releases[1]
    assert releases[0].parameters["variance_k"] == 63  # L = 7 busiest: 63 .. 69


def test_cummings_rejects_a_non_positive_prefix_limit() -> None:
    with pytest.raises(ValueError, match="prefix_limit"):
        get_mean_mechanism("cummings", delta=DELTA, prefix_limit=0)
