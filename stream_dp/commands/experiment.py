"""`stream-dp experiment NAME --out DIR`: reproducible experiments of the papers.

The options are declared here, so that the command line is built without importing the
experiments (numpy, numba, the mechanisms); an experiment's module is imported when it runs.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
from pathlib import Path

from stream_dp.cli import plain_text

CLIP_USER_DESCRIPTION = (
    "Reproduce Sec. VI of the composition paper on its synthetic generator (12 cells, 4095"
    " users, Geo(0.01) counts, one heavy hitter per cell scaled by 1+gamma, gamma in 3, 6, 9;"
    " 10 epsilons from 0.1 to 1). Writes privacy_loss_gamma*.png (P = mean K*eps against"
    " G*eps), worst_case_error_gamma*.png (error after the pseudo-user step against the"
    " original E) and clip_user.csv with every plotted number. Same seed, same CSV."
)
#: Releases per point of ``mean-estimators``: the papers' count, and with ``--quick``.
DEFAULT_RUNS = 10_000  # ~1 h on 2 cores (--runs 1000: ~7 min)
QUICK_RUNS = 200


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("experiment", help="reproduce the papers' experiments (plots + CSV)")
    names = parser.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    clip = names.add_parser(
        "clip-user",
        help="Sec. VI of the composition paper: privacy loss and error of CLIP-USER",
        description=CLIP_USER_DESCRIPTION,
    )
    clip.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder")
    clip.add_argument(
        "--draws", metavar="N", help="occupancy draws per gamma (default 10; 3 with --quick)"
    )
    clip.add_argument("--seed", default="0", metavar="S", help="seed (default 0)")
    clip.add_argument(
        "--quick", action="store_true", help="reduced size: 255 users, 4 epsilons, 3 draws"
    )
    clip.set_defaults(run=_runner("stream_dp.experiments.clip_user"))

    module = "stream_dp.experiments.mean_estimators"
    means = names.add_parser(
        "mean-estimators",
        help="003 Figs 1-5, 001 worst-case errors, AIS hexagon-hours: MAE of every mean mechanism",
        description=plain_text(_docstring(module)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    means.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder")
    means.add_argument(
        "--runs",
        metavar="N",
        help=f"releases per point (default {DEFAULT_RUNS}; {QUICK_RUNS} with --quick; "
        "as in the papers; --runs 1000 takes ~7 min)",
    )
    means.add_argument("--seed", default="0", metavar="S", help="seed (default 0)")
    means.add_argument(
        "--quick",
        action="store_true",
        help="reduced size: 200 runs, 3 epsilons, lambda = 3, 3 AIS cells",
    )
    means.set_defaults(run=_runner(module))


def _runner(module: str):
    """``run(args)`` of the experiment's module, imported only when it runs."""

    def run(args: argparse.Namespace) -> int:
        return importlib.import_module(module).run(args)

    return run


def _docstring(module: str) -> str:
    """A module's docstring, read from its source without importing it."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    return ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or ""
