"""Output of `stream-dp experiment mean-estimators`: CSVs of every plotted number, PNGs."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from stream_dp.experiments.ais_cells import AisCell, PipelineDpPoint
from stream_dp.experiments.mae import MaePoint, write_points
from stream_dp.experiments.mean_estimators_plots import (
    plot_m_eps,
    plot_mae_panels,
    plot_worst_case,
)
from stream_dp.experiments.worst_case_001 import WorstCasePoint, write_worst_case


@dataclass
class Results:
    """Everything one run computes."""

    mae: list[MaePoint]
    m_eps: list[tuple[float, int, float]]
    m_eps_references: dict[str, int]  # constant m_UB rules, drawn for reference
    worst_case: list[WorstCasePoint]
    ais: Sequence[AisCell]
    pipelinedp: list[PipelineDpPoint]
    seconds: dict[str, float]


def write_outputs(results: Results, out: Path) -> list[Path]:
    """The CSVs and PNGs; returns their paths."""
    paths = [out / "mae.csv", out / "m_eps.csv", out / "worst_case_001.csv"]
    write_points(results.mae, paths[0])
    rules = results.m_eps_references
    _write_rows(
        paths[1],
        ["epsilon", "m_eps", "minimax_error_eq15"] + [f"m_{name}" for name in rules],
        [_texts([*row, *rules.values()]) for row in results.m_eps],
    )
    write_worst_case(results.worst_case, paths[2])
    paths.append(out / "ais_cells.csv")
    _write_rows(
        paths[-1],
        ["dataset", "hexagon", "hour_start", "vehicles", "readings", "max_count", "median_count"],
        [
            [c.name, c.hexagon, c.hour * 3600, len(c.speeds)]
            + [sum(s.size for s in c.speeds), max(s.size for s in c.speeds), c.median_count()]
            for c in results.ais
        ],
    )
    if results.pipelinedp:
        paths.append(out / "pipelinedp.csv")
        header = [f.name for f in fields(PipelineDpPoint)]
        rows = [_texts([getattr(p, name) for name in header]) for p in results.pipelinedp]
        _write_rows(paths[-1], header, rows)
    return paths + _plots(results, out)


def _plots(results: Results, out: Path) -> list[Path]:
    by_figure: dict[str, list[MaePoint]] = {}
    for p in results.mae:
        by_figure.setdefault(p.figure, []).append(p)
    fig1 = by_figure["fig1"]
    pairs = [
        ("array-averaging", "ARRAY-AVERAGING"),
        ("levy", "LEVY"),
        ("quantile-fixed", "FIXEDQUANTILE"),
    ]
    paths = [
        plot_mae_panels(
            [(title, [p for p in fig1 if p.mechanism.startswith(key)]) for key, title in pairs],
            out / "fig1_grouping.png",
            "WRAPAROUND vs BESTFIT, ITMS-statistics data (003 Fig. 1)",
            display=lambda label: "WRAPAROUND" if label.endswith("-wrap") else "BESTFIT",
        )
    ]
    for figure, title in (
        ("fig2", "All mechanisms, ITMS-statistics data (003 Fig. 2)"),
        ("fig3", "Sample scaling (003 Fig. 3)"),
        ("fig4", "User scaling (003 Fig. 4)"),
    ):
        points = by_figure[figure]
        paths.append(plot_mae_panels([(_panel(points), points)], out / f"{figure}.png", title))
    ais = by_figure.get("ais", [])
    cells = [[p for p in ais if p.dataset == c.name] for c in results.ais]
    panels = [(_panel(points), points) for points in cells if points]
    extra = {
        _panel(points): {
            "PipelineDP mean": [
                (p.epsilon, p.mae) for p in results.pipelinedp if p.dataset == points[0].dataset
            ]
        }
        for points in cells
        if points
    }
    if panels:
        paths.append(
            plot_mae_panels(
                panels, out / "ais_busiest_cells.png", "Busiest AIS hexagon-hours", extra
            )
        )
    paths.append(
        plot_m_eps(
            [r[0] for r in results.m_eps],
            [r[1] for r in results.m_eps],
            results.m_eps_references,
            out / "fig5_m_eps.png",
        )
    )
    paths.append(plot_worst_case(results.worst_case, out / "worst_case_001.png"))
    return paths


def _panel(points: Sequence[MaePoint]) -> str:
    """Panel title: dataset, vehicles, readings, true mean."""
    p = points[0]
    return f"{p.dataset}\nL={p.vehicles}, sum m={p.readings}, mean={p.true_mean:.2f}"


def _texts(row: Sequence[object]) -> list[str]:
    return [repr(v) if isinstance(v, float) else str(v) for v in row]


def _write_rows(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def summary(results: Results, eps: float) -> list[str]:
    """One line per MAE point at ``eps``."""
    return [
        f"{p.figure} {p.dataset} eps {eps:g}: {p.mechanism} MAE {p.mae:.4g} (+-{p.mae_se:.2g})"
        for p in results.mae
        if p.epsilon == eps
    ]
