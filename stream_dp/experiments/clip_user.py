"""Sec. VI of the composition paper: CLIP-USER and the pseudo-user step on synthetic data.

For each heavy-hitter factor ``gamma`` and each of ``draws`` occupancy arrays of the paper's
generator (``paper_synthetic_occupancy``), run CLIP-USER and the pseudo-user step for every
``epsilon`` of a log grid. Plot the estimated privacy loss ``P = mean_i K_i * eps`` against
``G1 * eps`` (Figs 3-5) and the mean worst-case error after the pseudo-user step against the
mean original ``E`` (Figs 6-8); write every plotted number to ``clip_user.csv``.

Unlike the paper's implementation we do not exempt the grid ``argmin_g E_g`` from clipping:
the halting rule already keeps every cell's error at most ``E``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from stream_dp.dp.clip_user import clip_user
from stream_dp.dp.pseudo_user import pseudo_user_step
from stream_dp.dp.synthetic import paper_synthetic_occupancy

if TYPE_CHECKING:
    from matplotlib.figure import Figure

UPPER = 65.0
Q = 0.01
CSV_NAME = "clip_user.csv"


@dataclass(frozen=True)
class Config:
    """Size of the experiment (the defaults are the paper's)."""

    gammas: tuple[float, ...] = (3.0, 6.0, 9.0)
    epsilons: tuple[float, ...] = tuple(float(e) for e in np.geomspace(0.1, 1.0, 10))
    draws: int = 10
    seed: int = 0
    n_cells: int = 12
    n_bits: int = 12
    q: float = Q
    upper: float = UPPER

    @classmethod
    def quick(cls, draws: int = 3, seed: int = 0) -> Config:
        """A reduced size for tests: 255 users, 4 epsilons."""
        return cls(
            epsilons=tuple(float(e) for e in np.geomspace(0.1, 1.0, 4)),
            draws=draws,
            seed=seed,
            n_bits=8,
        )


@dataclass
class Point:
    """All draws of one ``(gamma, epsilon)``."""

    gamma: float
    epsilon: float
    g1: list[int] = field(default_factory=list)
    k: list[int] = field(default_factory=list)
    error_original: list[float] = field(default_factory=list)
    error_after: list[float] = field(default_factory=list)

    @property
    def privacy_loss(self) -> float:
        """``P_hat = mean_i K_i * eps``."""
        return float(np.mean(self.k)) * self.epsilon

    @property
    def original_loss(self) -> float:
        """``G1 * eps`` (the generator's first user occupies every cell, so G1 = G)."""
        return float(np.mean(self.g1)) * self.epsilon


def run_experiment(config: Config) -> list[Point]:
    """Every ``(gamma, epsilon)`` point, gamma-major; draw ``i`` of ``gamma`` index ``j`` uses
    the generator seeded by ``[seed, j, i]`` (the same arrays for every epsilon)."""
    points: list[Point] = []
    for j, gamma in enumerate(config.gammas):
        row = [Point(gamma, eps) for eps in config.epsilons]
        for draw in range(config.draws):
            rng = np.random.default_rng([config.seed, j, draw])
            occupancy = paper_synthetic_occupancy(
                rng, gamma, q=config.q, n_cells=config.n_cells, n_bits=config.n_bits
            )
            for point in row:
                clip = clip_user(occupancy, config.upper, point.epsilon)
                capped = pseudo_user_step(clip, config.upper, point.epsilon)
                point.g1.append(int(clip.g1))
                point.k.append(int(clip.k))
                point.error_original.append(float(clip.error_bound))
                point.error_after.append(float(np.max(capped.error)))
        points.extend(row)
    return points


def write_csv(points: list[Point], path: Path) -> None:
    """One row per ``(gamma, epsilon)``: the plotted numbers and the per-draw K."""
    draws = len(points[0].k) if points else 0
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["gamma", "epsilon", "p_hat", "g1_epsilon", "error_original", "error_after"]
            + [f"k_draw_{i + 1}" for i in range(draws)]
        )
        for p in points:
            writer.writerow(
                [
                    repr(p.gamma),
                    repr(p.epsilon),
                    repr(p.privacy_loss),
                    repr(p.original_loss),
                    repr(float(np.mean(p.error_original))),
                    repr(float(np.mean(p.error_after))),
                ]
                + p.k
            )


def plot(points: list[Point], out: Path, q: float = Q) -> list[Path]:
    """Two PNGs per gamma (Figs 3-5 and 6-8 of the paper); returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    written: list[Path] = []
    for gamma in dict.fromkeys(p.gamma for p in points):
        row = [p for p in points if p.gamma == gamma]
        eps = [p.epsilon for p in row]
        tag = f"{gamma:g}"

        fig, ax = plt.subplots(figsize=(5.5, 4))
        ax.plot(eps, [p.original_loss for p in row], "o--", label=r"$G\epsilon$ (no clipping)")
        ax.plot(eps, [p.privacy_loss for p in row], "s-", label=r"$\hat P_\epsilon$ (CLIP-USER)")
        ax.set(xscale="log", xlabel=r"$\epsilon$", ylabel="privacy loss per window")
        ax.set_title(rf"Privacy loss, $\gamma={tag}$, $q={q:g}$")
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
        written.append(_save(fig, out / f"privacy_loss_gamma{tag}.png"))

        fig, ax = plt.subplots(figsize=(5.5, 4))
        original = [float(np.mean(p.error_original)) for p in row]
        after = [float(np.mean(p.error_after)) for p in row]
        ax.plot(original, original, "o--", label=r"$E_\epsilon$ (original)")
        ax.plot(original, after, "s-", label=r"$\hat{\bar E}_\epsilon$ (after pseudo-user)")
        ax.set(xscale="log", yscale="log", xlabel=r"original worst-case error $E_\epsilon$")
        ax.set_ylabel("worst-case error")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(rf"Worst-case error, $\gamma={tag}$, $q={q:g}$")
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
        written.append(_save(fig, out / f"worst_case_error_gamma{tag}.png"))
    return written


def _save(fig: Figure, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
