"""An experiment, not a setting: hold a cell while most of its vehicles stay in it.

Run: ``python benchmarks/hold_while_staying.py [--only NAME ...] [--runs 5] [--stay 0.5]
[--gate K | --gate span] [--runs-detail] [--quick]``.

The hindsight bound (``hindsight.py``) releases nearly all of the AIS week's useful readings in
8-hour spans: a vessel that stays in a cell pays once for the span instead of once an hour.
This script releases each panel data set with the default planner as it is and with one
change: the release price (``release.vehicle_budget.plan.epsilon_ceiling``, docs/math.md
§13.3) of a cell is 0 (the cell waits) while at least ``--stay`` of its vehicles were in the
same cell the window before and its span is shorter than ``max_span_hours``; with ``--gate K``
only if the cell, released now with every reading kept, would cost more than ``K`` windows'
refill (``K · B · W / P``); with ``--gate span`` more than the burst spread over the windows
of the longest span (``burst / max_span_hours``: released every window of such a span, the
cell would cost its vehicles more than one burst), a gate of settings alone, with no
constant chosen.
Each run's records and error-bar misses are printed below the table (``--runs-detail``).
Everything it reads is public: the occupancy of this window and
the one before, the configuration, the rooms. Scored as ``panel.py`` scores (median
(worst) over seeded runs; every run asserts no vehicle past B). Results and why the change
is not in the code: benchmarks/README.md, "Tried and not adopted: hold a cell while its
vehicles stay".
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from panel import PANEL, DataSet, one_run, profile_row  # noqa: E402
from planner_replay import occupancy_history  # noqa: E402
from usefulness import Truth, settings_of  # noqa: E402

from stream_dp.release.vehicle_budget import optimiser, plan  # noqa: E402

#: Per (cell name, window start) its vehicles' readings: the occupancy the hold reads.
History = dict[tuple[str, int], dict[str, int]]
#: ``--gate span``: the gate at the burst spread over the longest span (module docstring).
SPAN_GATE = "span"
Gate = float | str | None


def staying(history: History, stay: float, gate: Gate = None) -> Any:
    """``plan.epsilon_ceiling`` with a price of 0 for each cell of at least ``stay`` vehicles
    that were in it the window before (``history``), its span under the span limit; with a
    ``gate``, only for a cell whose ε now with every reading kept passes
    :func:`gate_epsilon`."""
    price = plan.epsilon_ceiling

    def ceiling(params: Any, rooms: Any, occupancy: Any, span_start: Any, due: Any = (),
                exponent: float = plan.SHARE_EXPONENT) -> Any:  # fmt: skip
        out = price(params, rooms, occupancy, span_start, due, exponent=exponent)
        if out is None:  # no release price (the input's last window): nothing waits
            return None
        out = out.copy()
        step, now = params.window_seconds, rooms.window_start
        windows = (now - span_start) // step + 1
        margin: np.ndarray | None = None  # computed once some cell stays
        for g, name in enumerate(occupancy.cells):
            before = history.get((name, now - step), {})
            if windows[g] >= params.max_span_hours or not before:
                continue
            read = occupancy.vehicle_index[occupancy.cell_start[g] : occupancy.cell_start[g + 1]]
            stayed = sum(occupancy.vehicles[v] in before for v in read.tolist())
            if not len(read) or stayed < stay * len(read):
                continue
            if margin is None:
                margin = _gate_margin(params, occupancy, gate)
            if margin[g] > 0.0:
                out[g] = 0.0
        return out

    return ceiling


def gate_epsilon(params: Any, gate: float | str) -> float:
    """The ε a staying cell's ε must pass for it to wait: ``gate`` windows' refill
    (``K · B · W / P``), or with :data:`SPAN_GATE` the burst spread over the windows of the
    longest span (``max_span_hours`` counts windows)."""
    mode = plan.budget_mode(params)
    if gate == SPAN_GATE:
        return mode.burst / params.max_span_hours
    return float(gate) * mode.budget * params.window_seconds / params.ledger_period_seconds


def _gate_margin(params: Any, occupancy: Any, gate: Gate) -> np.ndarray:
    """Per cell, by how much its ε with every reading kept (a plan with unlimited rooms: no
    sit-outs) passes :func:`gate_epsilon` (positive: the gate lets it wait; all 1 without
    a gate; +inf where no ε within the burst meets T)."""
    if gate is None:
        return np.ones(len(occupancy.cells))
    unlimited = np.full(len(occupancy.vehicles), np.inf)
    epsilon = plan._plan(params, occupancy, unlimited, None, None).epsilon
    return epsilon - gate_epsilon(params, gate)  # +inf (no ε meets T) waits too


@contextmanager
def hold_while_staying(history: History, stay: float, gate: Gate = None) -> Iterator[None]:
    """The release price replaced by :func:`staying`'s where the planners read it."""
    kept = plan.epsilon_ceiling, optimiser.epsilon_ceiling
    plan.epsilon_ceiling = optimiser.epsilon_ceiling = staying(history, stay, gate)
    try:
        yield
    finally:
        plan.epsilon_ceiling, optimiser.epsilon_ceiling = kept


def history_of(readings: list[dict[str, Any]], row: dict[str, Any]) -> History:
    """The occupancy of every cell (R0 … R) and window of ``readings`` under settings ``row``."""
    settings = settings_of(row)
    coarsest = settings.coarsest_resolution
    return occupancy_history(readings, settings.resolution,
                             settings.resolution if coarsest is None else coarsest,
                             settings.window_seconds)  # fmt: skip


def compare(
    data: DataSet, runs: int, stay: float, quick: bool = False, gate: Gate = None
) -> dict[str, list[dict[str, Any]]]:
    """``runs`` seeded releases of ``data`` (the panel's file; ``quick``: its quick one) as
    main releases it and with the hold."""
    readings = data.readings(quick)
    truth, row = Truth(readings, upper=data.upper), profile_row(data)
    history = history_of(readings, row)
    out: dict[str, list[dict[str, Any]]] = {"main": [], "hold": []}
    for seed in range(runs):
        out["main"].append(one_run(truth, row, seed, data.period_seconds))
        with hold_while_staying(history, stay, gate):
            out["hold"].append(one_run(truth, row, seed, data.period_seconds))
        for label in out:
            assert out[label][-1]["loss"] <= data.budget + 1e-9, f"{data.name}: past B"
    return out


def _summary(runs: list[dict[str, Any]]) -> str:
    cover = [100 * r["coverage"] for r in runs]
    stale = [r["staleness"] for r in runs if not np.isnan(r["staleness"])]
    finer = [100 * r["finer"] for r in runs if not np.isnan(r["finer"])]
    return (f"{statistics.median(cover):.1f} ({min(cover):.1f}) "
            f"| {statistics.median(stale) if stale else float('nan'):.1f} "
            f"| {statistics.median(finer) if finer else float('nan'):.1f}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a data set's name (repeatable)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stay", type=float, default=0.5,
                        help="share of a cell's vehicles in it the window before")  # fmt: skip
    parser.add_argument("--gate", type=_gate, default=None,
                        help="hold only cells costing more than K windows' refill, or (span) "
                             "than the burst over the longest span")  # fmt: skip
    parser.add_argument("--runs-detail", action="store_true",
                        help="each run's useful %%, records and error-bar misses")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="the panel's quick files")
    args = parser.parse_args()
    print("| data set | main: useful % median (worst) | staleness h | finer % | hold while "
          "they stay: useful % | staleness h | finer % |\n" + "|---" * 7 + "|")  # fmt: skip
    for data in PANEL:
        if args.only and data.name not in args.only:
            continue
        got = compare(data, args.runs, args.stay, args.quick, args.gate)
        print(f"| {data.name} | {_summary(got['main'])} | {_summary(got['hold'])} |", flush=True)
        for label in got if args.runs_detail else ():
            runs = "; ".join(f"{100 * r['coverage']:.1f} % in {r['records']} records, "
                             f"{r['misses']} missed" for r in got[label])  # fmt: skip
            print(f"  {data.name}, {label}: {runs}", flush=True)
    return 0


def _gate(text: str) -> float | str:
    return SPAN_GATE if text == SPAN_GATE else float(text)


if __name__ == "__main__":
    raise SystemExit(main())
