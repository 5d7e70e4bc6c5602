"""`stream-dp experiment mean-estimators`: the mean-estimator experiments of 003 and 001.

* Fig. 1 (003): WRAPAROUND against BESTFIT for ARRAY-AVERAGING, LEVY and FIXEDQUANTILE on
  synthetic data built from the ITMS statistics (:mod:`.itms_synthetic`).
* Figs 2-4 (003): every mechanism (BESTFIT) on that data, under sample scaling (each
  count times lambda) and user scaling (each user replicated lambda times); lambda = 10.
  ARRAY-AVERAGING uses m_UB = median except under user scaling, where 003 uses eq. (9).
* Fig. 5 (003): m^(eps) of eq. (13) against eps for the ITMS counts.
* 001 Fig. 1: worst-case error of the Thm III.1 strategy against AKMV (:mod:`.worst_case_001`).
* The busiest hexagon-hours of the AIS sample, every mechanism plus PipelineDP's mean
  (:mod:`.ais_cells`).

MAE per point over ``runs`` seeded releases on one fixed dataset (:mod:`.mae`); the budget
eps is what the mechanism's ``release`` receives. CUMMINGS runs with delta = 1e-6. CLIP is
left out: on one cell with nothing clipped it is BASELINE.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from stream_dp.dp.mechanisms import array_length, get_mean_mechanism
from stream_dp.experiments import itms_synthetic as itms
from stream_dp.experiments.ais_cells import (
    AisCell,
    PipelineDpPoint,
    busiest_cells,
    pipelinedp_available,
    pipelinedp_point,
)
from stream_dp.experiments.mae import Dataset, MaePoint, derived_seed, mae_point
from stream_dp.experiments.mean_estimators_output import Results
from stream_dp.experiments.run_sizes import DEFAULT_RUNS, QUICK_RUNS
from stream_dp.experiments.worst_case_001 import COLLECTIONS, worst_case_point

DELTA = 1e-6
PIPELINEDP_RUNS = 1000

#: (label, registry name, parameters)
Spec = tuple[str, str, dict[str, Any]]

GROUPING_SPECS: tuple[Spec, ...] = (
    ("array-averaging-wrap", "array-averaging-wrap", {}),
    ("array-averaging-bestfit", "array-averaging-bestfit", {}),
    ("levy-wrap", "levy", {"grouping": "wraparound"}),
    ("levy-bestfit", "levy", {}),
    ("quantile-fixed-wrap", "quantile-fixed", {"grouping": "wraparound"}),
    ("quantile-fixed-bestfit", "quantile-fixed", {}),
)

ALL_SPECS: tuple[Spec, ...] = (
    ("baseline", "baseline", {}),
    ("array-averaging-bestfit", "array-averaging-bestfit", {}),
    ("levy", "levy", {}),
    ("quantile-fixed", "quantile-fixed", {}),
    ("quantile-optimized", "quantile-optimized", {}),
    ("opt-array-averaging", "opt-array-averaging", {}),
    ("opt-array-averaging-surrogate", "opt-array-averaging-surrogate", {}),
    ("worst-case-optimal", "worst-case-optimal", {}),
    ("akmv", "akmv", {}),
    ("cummings", "cummings", {"delta": DELTA}),
)


def eq9_array_averaging(specs: Sequence[Spec]) -> tuple[Spec, ...]:
    """003 Fig. 4: ARRAY-AVERAGING (BESTFIT, the one in :data:`ALL_SPECS` whose m_UB its name
    leaves free) with m_UB by eq. (9) as well."""
    from stream_dp.dp.mechanism_specs import mechanism_spec

    return tuple(
        (label, name, {**params, "m_ub": "eq9"} if mechanism_spec(name).m_ub_free else params)
        for label, name, params in specs
    )


def log_grid(start: float, stop: float, num: int) -> tuple[float, ...]:
    """``num`` log-spaced values rounded to 4 significant digits (readable CSVs)."""
    return tuple(float(f"{e:.4g}") for e in np.geomspace(start, stop, num))


@dataclass(frozen=True)
class Config:
    """Sizes of the experiments (the defaults, except ``runs``, are the papers')."""

    runs: int = DEFAULT_RUNS
    seed: int = 0
    epsilons: tuple[float, ...] = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)
    scale: int = 10
    m_eps_epsilons: tuple[float, ...] = log_grid(1e-3, 2.0, 120)
    wc_epsilons: tuple[float, ...] = log_grid(0.05, 5.0, 15)
    ais_resolution: int = 7
    ais_cells: int = 5
    pipelinedp_runs: int = PIPELINEDP_RUNS
    upper: float = itms.UPPER

    @classmethod
    def quick(cls, seed: int = 0, runs: int | None = None) -> Config:
        """Test size: 200 runs, 3 epsilons, lambda = 3, 3 AIS cells, short grids."""
        return cls(
            runs=QUICK_RUNS if runs is None else runs,
            seed=seed,
            epsilons=(0.5, 1.0, 2.0),
            scale=3,
            m_eps_epsilons=log_grid(1e-3, 2.0, 25),
            wc_epsilons=(0.05, 0.2, 0.5, 1.0, 2.0),
            ais_cells=3,
            pipelinedp_runs=100 if runs is None else runs,
        )


def synthetic_datasets(config: Config) -> dict[str, Dataset]:
    """The ITMS-statistics data and its two scalings, each with its own seeded readings."""
    base = itms.itms_counts()
    counts = {
        "itms": base,
        f"sample-scaled-x{config.scale}": itms.sample_scaled(base, config.scale),
        f"user-scaled-x{config.scale}": itms.user_scaled(base, config.scale),
    }
    out = {}
    for name, c in counts.items():
        rng = np.random.default_rng(derived_seed(config.seed, "data", name))
        out[name] = Dataset(name, itms.projected_gaussian(c, rng, upper=config.upper), config.upper)
    return out


def mae_curves(
    figure: str, dataset: Dataset, specs: Sequence[Spec], config: Config
) -> list[MaePoint]:
    """Every spec at every epsilon of ``config`` on ``dataset``."""
    return [
        mae_point(
            figure,
            dataset,
            label,
            get_mean_mechanism(name, **params),
            eps,
            config.runs,
            config.seed,
        )
        for label, name, params in specs
        for eps in config.epsilons
    ]


def m_eps_rows(config: Config) -> list[tuple[float, int, float]]:
    """(eps, m^(eps), E^(eps)(m^(eps)) of eq. (15)) for the ITMS counts."""
    counts = itms.itms_counts()
    rows = []
    for eps in config.m_eps_epsilons:
        m = array_length.opt_length(counts, eps)
        error = array_length.minimax_error(counts, m, config.upper, eps)
        rows.append((eps, m, float(error)))
    return rows


def m_eps_references() -> dict[str, int]:
    """The constant m_UB rules for the ITMS counts."""
    counts = itms.itms_counts()
    return {
        "median": array_length.median_length(counts),
        "eq9": array_length.eq9_length(counts),
        "surrogate": array_length.surrogate_length(counts),
    }


def run_experiment(config: Config, log: Callable[[str], None] = print) -> Results:
    """All sections; ``log`` gets one line per finished section with its time."""
    seconds: dict[str, float] = {}

    def timed(section: str, work: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        result = work()
        seconds[section] = time.perf_counter() - start
        log(f"{section}: {seconds[section]:.1f} s")
        return result

    data = timed("synthetic data", lambda: synthetic_datasets(config))
    itms_data, sample_data, user_data = data.values()
    points: list[MaePoint] = []
    points += timed("fig1", lambda: mae_curves("fig1", itms_data, GROUPING_SPECS, config))
    points += timed("fig2", lambda: mae_curves("fig2", itms_data, ALL_SPECS, config))
    points += timed("fig3", lambda: mae_curves("fig3", sample_data, ALL_SPECS, config))
    points += timed(
        "fig4", lambda: mae_curves("fig4", user_data, eq9_array_averaging(ALL_SPECS), config)
    )
    m_eps = timed("fig5", lambda: m_eps_rows(config))
    worst = timed(
        "wc001",
        lambda: [
            worst_case_point(name, eps, config.runs, config.seed, config.upper)
            for name in COLLECTIONS
            for eps in config.wc_epsilons
        ],
    )
    cells = timed("ais cells", lambda: load_cells(config.ais_resolution, config.ais_cells))
    for cell in cells:
        points += timed(
            f"ais {cell.name}",
            lambda cell=cell: mae_curves("ais", cell.dataset(config.upper), ALL_SPECS, config),
        )
    pdp = timed("pipelinedp", lambda: _pipelinedp(cells, config, log))
    return Results(points, m_eps, m_eps_references(), worst, cells, pdp, seconds)


def load_cells(resolution: int, top: int) -> tuple[AisCell, ...]:
    """The ``top`` busiest AIS hexagon-hours (cached: parsing the sample takes seconds)."""
    return _busiest(resolution, max(top, 5))[:top]


@lru_cache(maxsize=2)
def _busiest(resolution: int, top: int) -> tuple[AisCell, ...]:
    from stream_dp.sources.sample import load_sample

    return tuple(busiest_cells(load_sample(), resolution, top))


def _pipelinedp(
    cells: Sequence[AisCell], config: Config, log: Callable[[str], None]
) -> list[PipelineDpPoint]:
    if not pipelinedp_available():
        log("pipeline_dp is not importable: the PipelineDP baseline line is skipped")
        return []
    return [
        pipelinedp_point(cell, config.upper, eps, config.pipelinedp_runs)
        for cell in cells
        for eps in config.epsilons
    ]
