"""`stream-dp experiment mean-estimators --quick` run whole (about a minute): plots, CSVs,
reproducibility."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from stream_dp.cli import main
from stream_dp.experiments import itms_synthetic as itms
from stream_dp.experiments import mean_estimators
from stream_dp.experiments.mean_estimators import (
    ALL_SPECS,
    GROUPING_SPECS,
    Config,
    run_experiment,
)
from stream_dp.experiments.mean_estimators_output import write_outputs

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PNGS = {
    "fig1_grouping.png",
    "fig2.png",
    "fig3.png",
    "fig4.png",
    "fig5_m_eps.png",
    "worst_case_001.png",
    "ais_busiest_cells.png",
}
SEEDED_CSVS = ("mae.csv", "m_eps.csv", "worst_case_001.csv", "ais_cells.csv")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mean_estimators")
    args = ["experiment", "mean-estimators", "--out", str(out), "--quick", "--seed", "3"]
    assert main(args) == 0
    return out


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def mae_by(rows: list[dict[str, str]], figure: str, mechanism: str) -> list[tuple[float, float]]:
    """(MAE, standard error) by increasing epsilon, for one dataset per figure."""
    picked = [r for r in rows if r["figure"] == figure and r["mechanism"] == mechanism]
    picked.sort(key=lambda r: float(r["epsilon"]))
    return [(float(r["mae"]), float(r["mae_se"])) for r in picked]


# -- data ----------------------------------------------------------------------------------


# -- fast samplers -------------------------------------------------------------------------


SPECS = {
    f"{name}{''.join(f'-{k}={v}' for k, v in params.items())}": (name, params)
    for _, name, params in GROUPING_SPECS
    + ALL_SPECS
    + mean_estimators.eq9_array_averaging(ALL_SPECS)
}


# -- the --quick run -----------------------------------------------------------------------


def test_quick_run_writes_plots_and_csvs(quick_run: Path) -> None:
    assert {p.name for p in quick_run.glob("*.png")} == PNGS
    for name in PNGS:
        assert (quick_run / name).read_bytes().startswith(PNG_MAGIC)
    for name in SEEDED_CSVS:
        assert len(read_rows(quick_run / name)) > 0
    if mean_estimators.pipelinedp_available():
        rows = read_rows(quick_run / "pipelinedp.csv")
        assert len(rows) == 3 * 3 and all(float(r["mae"]) >= 0 for r in rows)


def test_mae_rows_are_complete_and_non_negative(quick_run: Path) -> None:
    rows = read_rows(quick_run / "mae.csv")
    per_figure = {"fig1": len(GROUPING_SPECS), "fig2": 10, "fig3": 10, "fig4": 10, "ais": 30}
    for figure, mechanisms in per_figure.items():
        assert sum(r["figure"] == figure for r in rows) == 3 * mechanisms
    for row in rows:
        assert int(row["runs"]) == 200
        assert 0.0 <= float(row["mae"]) < 65.0 and float(row["mae_se"]) >= 0.0
    datasets = {r["dataset"] for r in rows if r["figure"] != "ais"}
    assert datasets == {"itms", "sample-scaled-x3", "user-scaled-x3"}


def test_baseline_mae_decreases_with_epsilon(quick_run: Path) -> None:
    rows = read_rows(quick_run / "mae.csv")
    for figure in ("fig2", "fig3", "fig4"):
        curve = mae_by(rows, figure, "baseline")
        assert len(curve) == 3
        for (mae_lo, se_lo), (mae_hi, se_hi) in zip(curve, curve[1:], strict=False):
            assert mae_hi < mae_lo + 3 * (se_lo + se_hi)
        assert curve[-1][0] < curve[0][0]


def test_bestfit_beats_wraparound(quick_run: Path) -> None:
    rows = read_rows(quick_run / "mae.csv")
    for algorithm in ("array-averaging", "levy", "quantile-fixed"):
        wrap = mae_by(rows, "fig1", f"{algorithm}-wrap")
        best = mae_by(rows, "fig1", f"{algorithm}-bestfit")
        assert len(wrap) == len(best) == 3
        assert all(b < w for (b, _), (w, _) in zip(best, wrap, strict=True))


def test_m_eps_is_a_non_decreasing_staircase_on_the_counts(quick_run: Path) -> None:
    rows = read_rows(quick_run / "m_eps.csv")
    eps = [float(r["epsilon"]) for r in rows]
    lengths = [int(r["m_eps"]) for r in rows]
    errors = [float(r["minimax_error_eq15"]) for r in rows]
    assert eps == sorted(eps) and len(eps) == 25
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1]  # Lemma V.3
    assert set(lengths) <= set(itms.itms_counts().tolist())  # Lemma V.2
    assert errors == sorted(errors, reverse=True)


def test_worst_case_optimal_beats_akmv_in_the_worst_case(quick_run: Path) -> None:
    rows = read_rows(quick_run / "worst_case_001.csv")
    assert {r["collection"] for r in rows} == {"geometric", "extreme-valued"}
    assert len(rows) == 2 * 5
    for row in rows:
        assert 0 < float(row["e_opt"]) <= float(row["e_akmv"])
    for name in ("geometric", "extreme-valued"):
        e_opt = [float(r["e_opt"]) for r in rows if r["collection"] == name]
        assert e_opt == sorted(e_opt, reverse=True)  # non-increasing in eps (001 Sec. III)


def test_ais_cells_are_the_busiest(quick_run: Path) -> None:
    rows = read_rows(quick_run / "ais_cells.csv")
    readings = [int(r["readings"]) for r in rows]
    assert len(rows) == 3 and readings == sorted(readings, reverse=True)
    mae_rows = read_rows(quick_run / "mae.csv")
    assert {r["dataset"] for r in mae_rows if r["figure"] == "ais"} == {r["dataset"] for r in rows}


# -- reproducibility and options -----------------------------------------------------------


def tiny(seed: int) -> Config:
    return replace(
        Config.quick(seed=seed, runs=20),
        epsilons=(1.0,),
        scale=2,
        m_eps_epsilons=(0.01, 1.0),
        wc_epsilons=(1.0,),
        ais_cells=1,
        pipelinedp_runs=5,
    )


@pytest.mark.slow  # the experiment three times
def test_same_seed_same_csvs_other_seed_other_csvs(tmp_path: Path) -> None:
    outputs = {}
    for tag, seed in (("a", 11), ("b", 11), ("c", 12)):
        out = tmp_path / tag
        out.mkdir()
        write_outputs(run_experiment(tiny(seed), log=lambda _: None), out)
        outputs[tag] = {name: (out / name).read_bytes() for name in SEEDED_CSVS}
    assert outputs["a"] == outputs["b"]
    assert outputs["a"]["mae.csv"] != outputs["c"]["mae.csv"]
    assert outputs["a"]["worst_case_001.csv"] != outputs["c"]["worst_case_001.csv"]
