"""`stream-dp plan OCCUPANCY.csv`: what CLIP-USER would do to one window's occupancy."""

from __future__ import annotations

import argparse
import json

from stream_dp.commands.shared import CliError

DESCRIPTION = """\
Run CLIP-USER and the pseudo-user step on a public occupancy array and report the privacy
loss per window before and after (G1*eps -> K*eps), the error bound E, the suppressed
(cell, vehicle) pairs and the worst-case error of each cell. Nothing is released and no noise
is drawn: the planner only reads the occupancy, which the privacy model treats as public.
The input is a CSV (or .csv.gz) with a header containing cell, vehicle and count, in any
order; other columns are ignored and repeated (cell, vehicle) rows are summed. The output
names vehicle ids (suppressed pairs): it is an operator tool, do not publish it.
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "plan",
        help="what CLIP-USER would do to an occupancy CSV (G1 -> K, errors per cell)",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "occupancy", metavar="OCCUPANCY.csv", help="CSV or .csv.gz with cell,vehicle,count"
    )
    parser.add_argument(
        "--epsilon", required=True, metavar="EPS", help="privacy budget per released cell (> 0)"
    )
    parser.add_argument(
        "--upper", default="65", metavar="U", help="public upper bound of a reading (default 65)"
    )
    parser.add_argument(
        "--error-bound",
        metavar="E",
        help="worst-case error bound E per cell (default: the largest initial cell error)",
    )
    parser.add_argument(
        "--no-pseudo-user",
        action="store_true",
        help="skip the pseudo-user step (caps = each cell's largest kept count)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (includes suppressed [cell, vehicle] pairs)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Imported here so that `stream-dp --help` does not pay for the numerics.
    from stream_dp.planning import (
        PlanInputError,
        build_plan,
        format_plan,
        parse_positive,
        plan_to_json,
    )
    from stream_dp.sources.occupancy_csv import OccupancyFileError, read_occupancy_csv

    try:
        epsilon = parse_positive("epsilon", args.epsilon)
        upper = parse_positive("upper", args.upper)
        bound = (
            None if args.error_bound is None else parse_positive("error-bound", args.error_bound)
        )
        occupancy = read_occupancy_csv(args.occupancy)
        plan = build_plan(
            occupancy, upper, epsilon, error_bound=bound, pseudo_user=not args.no_pseudo_user
        )
    except (PlanInputError, OccupancyFileError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(plan_to_json(plan), allow_nan=False))
    else:
        print(format_plan(plan, args.occupancy))
    return 0
