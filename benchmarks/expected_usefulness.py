"""The usefulness figures of a vehicle-budget row in expectation over the noise, exactly.

Under a vehicle budget the cells, their ε, caps and spans and every vehicle's loss are a
function of the occupancy and the ledger alone, so only the noise differs between runs of
``benchmarks/usefulness.py``. This script releases the AIS week once without noise (the
noise-free means) and computes, per record, the probability that the noisy mean is useful
(``|bias + L| <= 6.5``) and that its ``mean_error`` holds (``|bias + L| <= mean_error``), with
``L`` the record's Laplace noise of scale ``U cap / (S ε_μ)`` (the mean's ε,
``ε (1 − variance_share)``) and ``bias`` the noise-free mean
against the truth ``usefulness.py`` scores with (every reading of the record's cell and span).

Run: ``python benchmarks/expected_usefulness.py [--set max_span_hours=8 --set ...]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import usefulness as u  # noqa: E402

from stream_dp.dp.noise import LaplaceNoise  # noqa: E402

B14 = f"vehicle budget B {14:g} per 7 days (T 10, span 9 h)"


class NoNoise(LaplaceNoise):
    """The release's values as they are (an experiment's tool: never for a release)."""

    def release_each(self, values: Any, sensitivities: Any, epsilons: Any) -> np.ndarray:
        vals = np.array(values, dtype=np.float64)
        ok = np.isfinite(vals) & np.isfinite(np.broadcast_to(sensitivities, vals.shape))
        ok &= np.isfinite(np.broadcast_to(epsilons, vals.shape))
        vals[~ok] = np.nan
        return vals


def laplace_within(shift: np.ndarray, scale: np.ndarray, half_width: Any) -> np.ndarray:
    """``P(|shift + L| <= half_width)`` for ``L`` ~ Laplace(0, ``scale``)."""

    def cdf(x: np.ndarray) -> np.ndarray:
        return np.where(x < 0, 0.5 * np.exp(x / scale), 1.0 - 0.5 * np.exp(-x / scale))

    return cdf(half_width - shift) - cdf(-half_width - shift)


def expected(row: dict[str, Any], truth: u.Truth) -> dict[str, Any]:
    """The row's expected useful coverage, holds and finer share; its deterministic
    staleness (noise-free), records and busiest vehicle."""
    from stream_dp.engine import OfflineEngine
    from stream_dp.release.run_losses import RunLosses
    from stream_dp.sources.sample import load_sample

    settings = u.settings_of(row)
    engine = OfflineEngine(settings, NoNoise())
    records: list[dict[str, Any]] = []
    losses = RunLosses(engine.params)
    for batch in (engine.feed(load_sample()), engine.finish()):
        for release in batch:
            records.extend(release.cells)
            losses.add(release)
    finest, coarsest = settings.resolution, settings.coarsest_resolution or settings.resolution
    n = len(records)
    means = np.array([r["mean"] for r in records], dtype=np.float64)
    covering = truth.covered_spans(records, finest)
    hit = covering >= 0
    counts = np.bincount(covering[hit], minlength=n)
    sums = np.bincount(covering[hit], weights=truth.value[hit], minlength=n)
    bias = means - sums / np.maximum(counts, 1)
    epsilon = np.array([r["epsilon"] for r in records], dtype=np.float64)
    cap = np.array([r["cap"] for r in records], dtype=np.float64)
    used = np.array([r["n_readings_used"] for r in records], dtype=np.float64)
    scale = u.UPPER * cap / (used * epsilon * (1.0 - settings.variance_share))  # the mean's ε
    bars = np.array([r["mean_error"] for r in records], dtype=np.float64)
    useful = laplace_within(bias, scale, u.USEFUL) * counts
    finer = np.array([int(r["resolution"]) > coarsest for r in records], dtype=bool)
    noise_free = u.score(truth, records, means, finest, coarsest, None)
    return {
        "records": n,
        "coverage": float(useful.sum() / len(truth.readings)),
        "noise_free_coverage": noise_free["coverage"],
        "holds": float(laplace_within(bias, scale, bars).mean()) if n else float("nan"),
        "finer": float(useful[finer].sum() / useful.sum()) if useful.sum() else 0.0,
        "staleness": noise_free["staleness"],
        "busiest": losses.busiest()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the B 14 row to change (JSON value)")  # fmt: skip
    args = parser.parse_args()
    row = dict(u.ROWS[B14])
    for item in args.set:
        key, _, value = item.partition("=")
        row[key] = json.loads(value)
    out = expected(row, u.Truth())
    print(
        f"records {out['records']}, expected useful coverage {out['coverage']:.1%} "
        f"(noise-free {out['noise_free_coverage']:.1%}), expected mean_error holds "
        f"{out['holds']:.1%}, expected finer than R0 {out['finer']:.1%}, staleness "
        f"{out['staleness']:.2f} h, busiest {out['busiest']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
