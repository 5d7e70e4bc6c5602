"""Mean absolute error of a mechanism on a fixed dataset over repeated seeded releases.

003 Sec. IV-A: ``E_MAE = (1/R) sum_i |M^(i)(D) - mu(D)|`` over R independent runs of the
mechanism on one fixed dataset D, ``mu(D)`` the plain mean of its (clamped) readings. The
released value is the published one (post-processed into [0, U]) for every mechanism,
BASELINE included (003 plots ``Delta_f / eps`` for BASELINE instead; the clamp changes
that by < 1% at eps >= 0.5 here).

Every point gets its own ``RandomSource.seeded_for_tests`` seed derived from the run seed
and the point's labels, so a point does not depend on which other points are computed.
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from stream_dp.dp.mechanisms import CellData, MeanMechanism
from stream_dp.dp.randomness import RandomSource
from stream_dp.experiments.fast_samplers import prepare


def derived_seed(seed: int, *labels: object) -> int:
    """A 64-bit seed from the run seed and a point's labels (stable across runs)."""
    text = "|".join([str(seed), *(repr(label) for label in labels)])
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class Dataset:
    """One fixed dataset: per-vehicle readings in [0, U], cells built on demand.

    A cell stores whole aggregates plus only the per-vehicle prefix the mechanism needs
    (``prefix_needed``), which keeps the bound checks of a release cheap.
    """

    def __init__(self, name: str, readings: Sequence[ArrayLike], upper: float) -> None:
        self.name = name
        self.upper = float(upper)
        self.readings = [np.clip(np.asarray(r, dtype=np.float64), 0.0, upper) for r in readings]
        self.counts = np.array([r.size for r in self.readings], dtype=np.int64)
        self.true_mean = float(np.concatenate(self.readings).mean())
        self._cells: dict[int, CellData] = {}

    def cell_for(self, mechanism: MeanMechanism, epsilon: float) -> CellData:
        """The cell with the prefix ``mechanism`` needs at ``epsilon``."""
        length = int(mechanism.prefix_needed(self.counts, epsilon).max())
        if length not in self._cells:
            self._cells[length] = CellData.from_readings(self.readings, self.upper, length)
        return self._cells[length]


@dataclass(frozen=True)
class MaePoint:
    """One plotted MAE value and what it was computed from."""

    figure: str
    dataset: str
    mechanism: str
    epsilon: float
    runs: int
    mae: float
    mae_se: float
    true_mean: float
    vehicles: int
    readings: int
    m_ub: int | None
    groups: int | None
    worst_case_error: float | None


def mae_point(
    figure: str,
    dataset: Dataset,
    label: str,
    mechanism: MeanMechanism,
    epsilon: float,
    runs: int,
    seed: int,
) -> MaePoint:
    """``runs`` seeded releases of ``mechanism`` on ``dataset``; MAE and its standard error."""
    cell = dataset.cell_for(mechanism, epsilon)
    source = RandomSource.seeded_for_tests(derived_seed(seed, figure, dataset.name, label, epsilon))
    info = mechanism.release(cell, dataset.upper, epsilon, source)  # for m_UB, K, error bound
    draw = prepare(mechanism, cell, dataset.upper, epsilon)
    errors = np.abs(np.array([draw(source) for _ in range(runs)]) - dataset.true_mean)
    spread = float(errors.std(ddof=1)) if runs > 1 else math.nan
    return MaePoint(
        figure=figure,
        dataset=dataset.name,
        mechanism=label,
        epsilon=float(epsilon),
        runs=int(runs),
        mae=float(errors.mean()),
        mae_se=spread / math.sqrt(runs),
        true_mean=dataset.true_mean,
        vehicles=int(dataset.counts.size),
        readings=int(dataset.counts.sum()),
        m_ub=_int_or_none(info.parameters.get("m_ub")),
        groups=_int_or_none(info.parameters.get("groups")),
        worst_case_error=info.worst_case_error,
    )


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def write_points(points: Sequence[MaePoint], path: Path) -> None:
    """One CSV row per point (``repr`` of floats, empty cells for None)."""
    names = [f.name for f in fields(MaePoint)]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        for point in points:
            row = asdict(point)
            writer.writerow(["" if row[n] is None else _text(row[n]) for n in names])


def _text(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)
