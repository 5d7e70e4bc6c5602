"""`stream-dp experiment NAME --out DIR`: reproducible experiments of the papers.

The options are declared here, so that the command line is built without importing the
experiments (numpy, numba, the mechanisms); an experiment's module is imported when it runs,
and knows nothing of the command line.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
from pathlib import Path

from stream_dp.commands.shared import CliError, parse_int_option, plain_text, require_extra
from stream_dp.experiments.run_sizes import DEFAULT_RUNS, QUICK_RUNS

CLIP_USER_DESCRIPTION = (
    "Reproduce Sec. VI of the composition paper on its synthetic generator (12 cells, 4095"
    " users, Geo(0.01) counts, one heavy hitter per cell scaled by 1+gamma, gamma in 3, 6, 9;"
    " 10 epsilons from 0.1 to 1). Writes privacy_loss_gamma*.png (P = mean K*eps against"
    " G*eps), worst_case_error_gamma*.png (error after the pseudo-user step against the"
    " original E) and clip_user.csv with every plotted number. Same seed, same CSV."
)


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
    clip.add_argument("--seed", default="0", metavar="N", help="seed (default 0)")
    clip.add_argument(
        "--quick", action="store_true", help="reduced size: 255 users, 4 epsilons, 3 draws"
    )
    clip.set_defaults(run=run_clip_user)

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
    means.add_argument("--seed", default="0", metavar="N", help="seed (default 0)")
    means.add_argument(
        "--quick",
        action="store_true",
        help="reduced size: 200 runs, 3 epsilons, lambda = 3, 3 AIS cells",
    )
    means.set_defaults(run=run_mean_estimators)


def run_clip_user(args: argparse.Namespace) -> int:
    """``experiment clip-user``: its CSV and plots in ``--out``, one summary line per point."""
    require_extra("matplotlib", "experiments")
    import numpy as np

    from stream_dp.experiments import clip_user as exp

    seed = parse_int_option("seed", args.seed, minimum=0)
    draws = 3 if args.quick else 10
    if args.draws is not None:
        draws = parse_int_option("draws", args.draws, minimum=1)
    config = (exp.Config.quick if args.quick else exp.Config)(draws=draws, seed=seed)
    _make_folder(args.out)
    points = exp.run_experiment(config)
    csv_path = args.out / exp.CSV_NAME
    exp.write_csv(points, csv_path)
    for path in [csv_path, *exp.plot(points, args.out, q=config.q)]:
        print(f"wrote {path}")
    for p in points:
        print(
            f"gamma {p.gamma:g} eps {p.epsilon:.3f}: P {p.privacy_loss:.3f} vs G*eps"
            f" {p.original_loss:.3f}; E {np.mean(p.error_original):.2f}"
            f" -> {np.mean(p.error_after):.2f}"
        )
    return 0


def run_mean_estimators(args: argparse.Namespace) -> int:
    """``experiment mean-estimators``: its CSVs and plots in ``--out``, then a summary."""
    require_extra("matplotlib", "experiments")
    from stream_dp.experiments import mean_estimators as exp
    from stream_dp.experiments.mean_estimators_output import summary, write_outputs

    seed = parse_int_option("seed", args.seed, minimum=0)
    runs = None if args.runs is None else parse_int_option("runs", args.runs, minimum=2)
    if args.quick:
        config = exp.Config.quick(seed=seed, runs=runs)
    elif runs is None:
        config = exp.Config(seed=seed)
    else:
        pipelinedp_runs = min(runs, exp.PIPELINEDP_RUNS)
        config = exp.Config(seed=seed, runs=runs, pipelinedp_runs=pipelinedp_runs)
    _make_folder(args.out)
    results = exp.run_experiment(config)
    for path in write_outputs(results, args.out):
        print(f"wrote {path}")
    print(f"total: {sum(results.seconds.values()):.1f} s")
    for line in summary(results, config.epsilons[len(config.epsilons) // 2]):
        print(line)
    return 0


def _make_folder(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create {out}: {exc.strerror or exc}") from None


def _docstring(module: str) -> str:
    """A module's docstring, read from its source without importing it."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    return ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or ""
