"""PNG plots of the mean-estimator experiments (matplotlib, Agg backend)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from stream_dp.experiments.mae import MaePoint
from stream_dp.experiments.worst_case_001 import WorstCasePoint

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: (epsilon, MAE) per line label, drawn dashed beside the mechanisms (PipelineDP).
ExtraLines = Mapping[str, Sequence[tuple[float, float]]]


def _pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_mae_panels(
    panels: Sequence[tuple[str, Sequence[MaePoint]]],
    path: Path,
    title: str,
    extra: Mapping[str, ExtraLines] | None = None,
    display: Callable[[str], str] = str,
) -> Path:
    """One panel per ``(title, points)``: MAE against eps, one line per mechanism, log y.

    ``display`` maps a mechanism label to its legend text (one colour per text across
    panels); ``extra[panel title]`` adds dashed black lines (e.g. PipelineDP) to that panel.
    """
    plt = _pyplot()
    texts = list(dict.fromkeys(display(p.mechanism) for _, points in panels for p in points))
    colours = {text: f"C{i % 10}" for i, text in enumerate(texts)}
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.2 * rows), squeeze=False)
    for ax, (panel, points) in zip(axes.flat, panels, strict=False):
        for label in dict.fromkeys(p.mechanism for p in points):
            line = sorted((p.epsilon, p.mae) for p in points if p.mechanism == label)
            text = display(label)
            ax.plot(*zip(*line, strict=True), marker="o", ms=3, color=colours[text], label=text)
        for label, line in (extra or {}).get(panel, {}).items():
            if line:
                ax.plot(*zip(*sorted(line), strict=True), "k--", marker="x", label=label)
        _decorate(ax, panel, r"$\epsilon$", "MAE")
        _log_y(ax)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    legend: dict[str, Any] = {}
    for ax in list(axes.flat)[: len(panels)]:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(text, handle)
    fig.suptitle(title)
    fig.tight_layout()
    fig.legend(
        list(legend.values()),
        list(legend),
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=min(4, len(legend)),
        fontsize=8,
    )
    return _save(fig, path)


def _log_y(ax: Axes) -> None:
    from matplotlib.ticker import FormatStrFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.tick_params(axis="y", which="minor", labelsize=7)


def plot_m_eps(
    epsilons: Sequence[float], lengths: Sequence[int], references: Mapping[str, int], path: Path
) -> Path:
    """003 Fig. 5: m^(eps) against eps (log x), with constant m_UB rules for reference."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.step(epsilons, lengths, where="post", label=r"$m^{(\epsilon)}$ (eq. 13)")
    for i, (label, value) in enumerate(references.items()):
        ax.axhline(value, ls=":", color=f"C{i + 1}", label=f"{label} = {value}")
    _decorate(ax, r"$m^{(\epsilon)}$ for the ITMS counts", r"$\epsilon$", r"$m_{UB}$")
    ax.set_xscale("log")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_worst_case(points: Sequence[WorstCasePoint], path: Path) -> Path:
    """001 Fig. 1: worst-case error against eps, one panel per collection, log-log."""
    plt = _pyplot()
    collections = list(dict.fromkeys(p.collection for p in points))
    fig, axes = plt.subplots(1, len(collections), figsize=(5.2 * len(collections), 4))
    for ax, name in zip(list(getattr(axes, "flat", [axes])), collections, strict=True):
        rows = sorted((p for p in points if p.collection == name), key=lambda p: p.epsilon)
        eps = [p.epsilon for p in rows]
        ax.plot(eps, [p.e_opt for p in rows], "o-", ms=3, label="worst-case-optimal (Thm III.1)")
        ax.plot(eps, [p.e_akmv for p in rows], "s-", ms=3, label="AKMV (Monte Carlo)")
        sample = rows[0]
        _decorate(
            ax, f"{name} (L={sample.vehicles}, sum m={sample.readings})", r"$\epsilon$", "error"
        )
        ax.set(xscale="log", yscale="log")
        ax.legend(fontsize=8)
    fig.suptitle("Worst-case error on the all-U dataset (001 Sec. IV-C)")
    fig.tight_layout()
    return _save(fig, path)


def _decorate(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)


def _save(fig: Figure, path: Path) -> Path:
    plt = _pyplot()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
