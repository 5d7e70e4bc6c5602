"""The usefulness figures of a vehicle-budget row in expectation over the noise, exactly.

Under a vehicle budget the cells, their ε, caps and spans and every vehicle's loss are a
function of the occupancy and the ledger alone, so only the noise differs between runs of
``benchmarks/usefulness.py``. This script releases the AIS week once without noise (the
noise-free means) and computes, per record, the probability that the noisy mean is useful
(``|bias + L| <= τ``, 10 % of U: 6.5 on the week) and that its ``mean_error`` holds
(``|bias + L| <= mean_error``), with ``L`` the record's Laplace noise of scale
``U cap / (S ε_μ)`` (the mean's ε,
``ε (1 − variance_share)``) and ``bias`` the noise-free mean against the truth
``usefulness.py`` scores with: the mean of the readings the record holds (its ``n_readings``,
found by ``tests.support.membership``). The same figures against the older "cell and
span" truth (every reading of the record's cell and span not taken earlier, including
readings no record holds) are printed beside them; ``--per-record`` prints each record's
bias against both truths beside its bar.

``--data-set NAME`` releases a data set of ``panel.py``'s at its own U and profile instead,
and the records' noise draws being independent, prints the spread of its runs too: the
standard deviation of one run's coverage, the expected worst of 5 runs and the chance that
worst reaches ``--threshold`` (``hindsight.run_spread``, the same draws as the bound's).

Released as the service releases (it never sees an end: what its last window holds back
for a longer span stays unreleased), or with ``--file-end`` as ``stream-dp release`` replays
a file: the input's last window holds nothing back.

Run: ``python benchmarks/expected_usefulness.py [--per-record] [--data FILE | --data-set NAME
[--threshold F]] [--file-end] [--set K=V ...]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support/: not installed

import usefulness as u  # noqa: E402

from stream_dp.dp.error_bars import LN20  # noqa: E402
from tests.support.noise_free import NoNoise  # noqa: E402

B14 = f"vehicle budget B {14:g} per 7 days (T 10, span 8 h)"


def laplace_within(shift: np.ndarray, scale: np.ndarray, half_width: Any) -> np.ndarray:
    """``P(|shift + L| <= half_width)`` for ``L`` ~ Laplace(0, ``scale``)."""

    def cdf(x: np.ndarray) -> np.ndarray:
        return np.where(x < 0, 0.5 * np.exp(x / scale), 1.0 - 0.5 * np.exp(-x / scale))

    return cdf(half_width - shift) - cdf(-half_width - shift)


def figures(
    truth: u.Truth,
    covering: np.ndarray,
    means: np.ndarray,
    scale: np.ndarray,
    bars: np.ndarray,
    finer: np.ndarray,
) -> dict[str, Any]:
    """Expected useful coverage, holds and finer share against one truth (``covering``), with
    each record's reading count and noise-free bias."""
    counts, true_mean = u.truth_means(truth, covering, len(means))
    bias = means - true_mean
    useful = laplace_within(bias, scale, u.USEFUL_SHARE * truth.upper) * counts
    holds = laplace_within(bias, scale, bars)
    return {
        "coverage": float(useful.sum() / len(truth.readings)),
        "holds": float(holds.mean()) if len(means) else float("nan"),
        "finer": float(useful[finer].sum() / useful.sum()) if useful.sum() else 0.0,
        "counts": counts,
        "bias": bias,
        "p_holds": holds,
        "p_useful": useful / np.maximum(counts, 1),
    }


def expected(row: dict[str, Any], truth: u.Truth, file_end: bool = False) -> dict[str, Any]:
    """The row's expected useful coverage, holds and finer share (against the held readings,
    and in ``cell_and_span`` against the older truth); its deterministic staleness
    (noise-free), records, per-record figures and busiest vehicle. Released as the service
    releases, or with ``file_end`` as ``stream-dp release`` does (the input's end known)."""
    settings = u.settings_of(row)
    records, losses, members = u.release_week(settings, truth.readings, noise=NoNoise(),
                                              file_end=file_end)  # fmt: skip
    finest, coarsest = settings.resolution, settings.coarsest_resolution or settings.resolution
    means = np.array([r["mean"] for r in records], dtype=np.float64)
    epsilon = np.array([r["epsilon"] for r in records], dtype=np.float64)
    cap = np.array([r["cap"] for r in records], dtype=np.float64)
    used = np.array([r["n_readings_used"] for r in records], dtype=np.float64)
    scale = truth.upper * cap / (used * epsilon * (1.0 - settings.variance_share))  # mean's ε
    bars = np.array([r["mean_error"] for r in records], dtype=np.float64)
    finer = np.array([int(r["resolution"]) > coarsest for r in records], dtype=bool)
    held = truth.held(members, finest)
    exact = figures(truth, held, means, scale, bars, finer)
    older = figures(truth, truth.cell_and_span(records, finest), means, scale, bars, finer)
    noise_free = u.score(truth, records, means, finest, coarsest, None, held)
    return {
        **{k: exact[k] for k in ("coverage", "holds", "finer")},
        "cell_and_span": older,
        "records": records,
        "per_record": (exact, scale),
        "noise_free_coverage": noise_free["coverage"],
        "staleness": noise_free["staleness"],
        "busiest": losses.busiest()[0],
        "upper": truth.upper,
    }


def print_per_record(out: dict[str, Any]) -> None:
    """Each record: its readings and noise-free |bias| against the held readings and the
    cell-and-span truth, its bar and the bias the bar allows (``U (1 − S/M)``)."""
    exact, scale = out["per_record"]
    older = out["cell_and_span"]
    print(
        "| record | cell (res) | span | n_readings | held / cell-and-span readings "
        "| abs bias held / cell-and-span | bar | U(1-S/M) | ln20 x scale | P(holds) held / "
        "cell-and-span |\n" + "|---" * 10 + "|"
    )
    for i, r in enumerate(out["records"]):
        allowed = out["upper"] * (1 - r["n_readings_used"] / r["n_readings"])
        print(
            f"| {i} | {r['cell']} ({r['resolution']}) | {r['window_start'][5:13]} to "
            f"{r['window_end'][5:13]} | {r['n_readings']} | {exact['counts'][i]} / "
            f"{older['counts'][i]} | {abs(exact['bias'][i]):.3f} / {abs(older['bias'][i]):.3f} "
            f"| {r['mean_error']:.3f} | {allowed:.3f} | {LN20 * scale[i]:.3f} "
            f"| {exact['p_holds'][i]:.4f} / {older['p_holds'][i]:.4f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting to change (JSON value; the data set's row)")  # fmt: skip
    parser.add_argument("--per-record", action="store_true", help="print each record's bias")
    parser.add_argument("--data", help="another readings file (other_data.py's; default: the week)")
    parser.add_argument("--data-set", help="a panel data set, at its own U and profile")
    parser.add_argument("--threshold", type=float, default=0.8,
                        help="--data-set: what the worst of 5 runs is held against")  # fmt: skip
    parser.add_argument("--file-end", action="store_true",
                        help="as `stream-dp release` does: the input's end known")  # fmt: skip
    args = parser.parse_args()
    if args.data_set is None:
        row = u.with_sets(u.ROWS[B14], args.set)
        truth = u.Truth(u.readings_of(args.data))
    else:
        from panel import PANEL, profile_row

        data = {d.name: d for d in PANEL}.get(args.data_set)
        if data is None or args.data is not None:
            parser.error(f"--data-set: one of {', '.join(d.name for d in PANEL)}, without --data")
        row = u.with_sets(profile_row(data), args.set)
        truth = u.Truth(data.readings(False), upper=data.upper)
    out = expected(row, truth, args.file_end)
    older = out["cell_and_span"]
    print(
        f"records {len(out['records'])}, expected useful coverage {out['coverage']:.1%} "
        f"(noise-free {out['noise_free_coverage']:.1%}), expected mean_error holds "
        f"{out['holds']:.1%}, expected finer than R0 {out['finer']:.1%}, staleness "
        f"{out['staleness']:.2f} h, busiest {out['busiest']:.2f}; against the cell-and-span "
        f"truth: coverage {older['coverage']:.1%}, holds {older['holds']:.1%}, finer "
        f"{older['finer']:.1%}"
    )
    if args.data_set is not None:  # the spread of its runs
        from hindsight import run_spread

        exact = out["per_record"][0]
        spread = run_spread(exact["counts"].astype(np.float64), exact["p_useful"],
                            len(truth.readings), threshold=args.threshold)  # fmt: skip
        print(
            f"one run: sd {spread['sd']:.1%}; worst of 5 runs: expected "
            f"{spread['expected_worst']:.1%}, at least {args.threshold:.0%} with chance "
            f"{spread['worst_at_least']:.3f}"
        )
    if args.per_record:
        print_per_record(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
