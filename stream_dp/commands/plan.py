"""`stream-dp plan OCCUPANCY.csv`: what the release would do to one window's occupancy;
`stream-dp plan --privacy-model secret-routes`: what a cell would cost and give there."""

from __future__ import annotations

import argparse
import json
from typing import Any

from stream_dp.commands.shared import CliError, collector_paused, require_public_occupancy
from stream_dp.config import ConfigError, load_settings
from stream_dp.options.setting_options import setting_default, setting_metavar
from stream_dp.secret_routes import PUBLIC_OCCUPANCY, SECRET_ROUTES
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.plan import DEFAULT_COUNTS, format_outlook, outlook

DESCRIPTION = """\
Run the release's own stages (adaptive cells, selection, CLIP-USER, the pseudo-user step,
the error bars and the withholding) on a public occupancy array with the release's settings
(the options below and the STREAM_DP_* settings), and report the privacy loss per window
before and after (G1*eps -> K*eps), the error bound E, the suppressed (cell, vehicle) pairs,
the worst-case error and the mean's error bar of each cell: the K and error bars `release`
gives that window. With a vehicle budget (--vehicle-budget) it runs the release's budget
mode as for a vehicle's first window (no ledger: each vehicle's room is the burst) and
reports each cell's own epsilon, the vehicles that sit out and the largest per-vehicle loss.
Nothing is released and no noise is drawn: the planner only reads the
occupancy, which the privacy model treats as public.
The input is a CSV (or .csv.gz) with a header containing cell, vehicle and count, in any
order; other columns are ignored and repeated (cell, vehicle) rows are summed. The output
names vehicle ids (suppressed pairs): it is an operator tool, do not publish it.
With --privacy-model secret-routes no occupancy is read (none is public there): the plan
reports, from the settings alone, the threshold a cell's noisy vehicle count must reach, the
epsilon and delta each window costs every vehicle, and over a table of vehicle counts n the
chance a cell of n vehicles is shown and its 95 % error bar (docs/math.md §14).
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "plan",
        help="what CLIP-USER would do to an occupancy CSV (G1 -> K, errors per cell)",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "occupancy",
        metavar="OCCUPANCY.csv",
        nargs="?",
        help="CSV or .csv.gz with cell,vehicle,count (public-occupancy only)",
    )
    parser.add_argument(
        "--privacy-model",
        choices=(PUBLIC_OCCUPANCY, SECRET_ROUTES),
        help=f"the model planned (default {setting_default('privacy_model')})",
    )
    parser.add_argument(
        "--vehicles",
        metavar="TEXT",
        help="secret-routes: the vehicle counts of the table, comma-separated (default "
        f"{','.join(map(str, DEFAULT_COUNTS))})",
    )
    parser.add_argument(
        "--epsilon", metavar="X", help=f"per-cell budget (default {setting_default('epsilon')})"
    )
    parser.add_argument(
        "--upper",
        metavar="X",
        help=f"public upper bound U of a reading (default {setting_default('upper')})",
    )
    parser.add_argument(
        "--error-bound",
        metavar="X",
        help="worst-case error bound E per cell (default the largest initial cell error)",
    )
    parser.add_argument(
        "--no-pseudo-user",
        action="store_true",
        help="skip the pseudo-user step (caps = each cell's largest kept count)",
    )
    for option, text in _SETTINGS_OPTIONS:  # checked by the settings, as in ``release``
        name = option[2:].replace("-", "_")
        parser.add_argument(
            option,
            metavar=setting_metavar(name),
            help=f"{text} (default {setting_default(name)})",
        )
    parser.add_argument(
        "--fixed-cells",
        action="store_true",
        help="plan fixed cells at --resolution instead of adaptive cells, without a vehicle "
        "budget (--target-mean-error none --fixed-epsilon); needed when the occupancy's cells "
        "are not H3 cells",
    )
    parser.add_argument(
        "--fixed-epsilon",
        action="store_true",
        help="plan a fixed --epsilon per cell instead of the vehicle budget's (the same as "
        "--vehicle-budget none)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (includes suppressed [cell, vehicle] pairs)",
    )
    parser.set_defaults(run=run)


#: Release settings the plan takes as options (the others: STREAM_DP_* or the config file).
_SETTINGS_OPTIONS: tuple[tuple[str, str], ...] = (
    ("--variance-share", "share of epsilon for the variance"),
    ("--target-mean-error", "T: adaptive cells, each with mean_error <= T (none: fixed cells)"),
    ("--coarsest-resolution", "R0: coarsest resolution of adaptive cells"),
    ("--resolution", "H3 resolution of the occupancy's cells"),
    ("--min-vehicles", "release cells with >= N vehicles"),
    ("--top-cells", "release only the N busiest cells"),
    ("--prefix-limit", "C: stored readings per pair"),
    ("--vehicle-budget", "B: each vehicle's epsilon over any budget period (the plan: no "
     "ledger, each vehicle's room is the burst)"),
    ("--vehicle-budget-burst", "pacing: the most a vehicle spends at once (unset: B/4)"),
    ("--max-span-hours", "with a vehicle budget: windows a cell may pool"),
    ("--budget-planner", "with a vehicle budget: auto (the optimiser up to "
     "--optimiser-max-pairs pooled cell-vehicle pairs a window, else the rules), rules or "
     "optimiser (docs/math.md §13.5)"),
    ("--optimiser-max-pairs", "with budget planner auto: the most pooled pairs a window the "
     "optimiser plans"),
    ("--budget-period-seconds", "the rolling budget period"),
)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    with collector_paused():  # a plan is one short computation (start-up included)
        if _privacy_model(args) == SECRET_ROUTES:
            return _plan_secret_routes(args)
        if args.occupancy is None:
            raise CliError(
                "plan: OCCUPANCY.csv is required (but with --privacy-model secret-routes)"
            )
        return _plan(args)


def _privacy_model(args: argparse.Namespace) -> str:
    """``--privacy-model``, else the settings' (``STREAM_DP_PRIVACY_MODEL``, the file), read
    with the other options over them (an option may lift what the file alone refuses)."""
    if args.privacy_model is not None:
        return str(args.privacy_model)
    values, flags = _release_values(args)
    try:
        return load_settings(flags=flags, **values).privacy_model
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def _plan_secret_routes(args: argparse.Namespace) -> int:
    """The secret-routes outlook: public parameters only, no file read (docs/math.md §14)."""
    if args.occupancy is not None:
        raise CliError("plan --privacy-model secret-routes reads no occupancy: drop OCCUPANCY.csv")
    values = {"upper": args.upper, "epsilon": args.epsilon, "error_bound": args.error_bound}
    flags = {name for name, value in values.items() if value is not None}
    for option, _ in _SETTINGS_OPTIONS:
        name = option[2:].replace("-", "_")
        values[name] = getattr(args, name)
        if values[name] is not None:
            flags.add(name)
    counts = tuple(_vehicle_counts(args.vehicles))
    try:
        settings = load_settings(flags=flags, privacy_model=SECRET_ROUTES, **values)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    params = SecretRoutesParams.from_settings(settings)
    print(format_outlook(params, outlook(params, counts)))
    return 0


def _vehicle_counts(text: str | None) -> list[int]:
    """``--vehicles``: positive integers, comma-separated (None: the defaults)."""
    if text is None:
        return list(DEFAULT_COUNTS)
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise CliError(f"invalid --vehicles: positive integers, comma-separated, got {text!r}")
    return counts


def _plan(args: argparse.Namespace) -> int:
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
        given = {"epsilon": args.epsilon, "upper": args.upper, "error_bound": args.error_bound}
        numbers = {  # the settings' (as in ``release``) where not given
            name: None if text is None else parse_positive(name.replace("_", "-"), text)
            for name, text in given.items()
        }
        params = _params(args, **numbers)
        occupancy = read_occupancy_csv(args.occupancy)
        plan = build_plan(occupancy, params)
    except (PlanInputError, OccupancyFileError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(plan_to_json(plan), allow_nan=False))
    else:
        print(format_plan(plan, args.occupancy))
    return 0


def _release_values(args: argparse.Namespace) -> tuple[dict[str, object], set[str]]:
    """The release settings' options (:data:`_SETTINGS_OPTIONS`) as settings values, and the
    names of those given."""
    values: dict[str, object] = {}
    for option, _ in _SETTINGS_OPTIONS:
        name = option[2:].replace("-", "_")
        values[name] = getattr(args, name)
    return values, {name for name, value in values.items() if value is not None}


def _params(args: argparse.Namespace, **values: object) -> Any:
    """The release's parameters of these options over the settings (as ``release`` has them)."""
    from stream_dp.config import ConfigError, load_settings
    from stream_dp.release.params import ReleaseParams, checked_settings

    more, flags = _release_values(args)
    values.update(more)
    flags |= {"epsilon", "upper", "error_bound"}
    if args.fixed_cells:  # no budget either, unless one is given (then refused beside it)
        values["target_mean_error"] = "none"
        values["vehicle_budget"] = values.get("vehicle_budget") or "none"
        flags.update(("target_mean_error", "vehicle_budget"))
    if args.fixed_epsilon:
        values["vehicle_budget"] = "none"
        flags.add("vehicle_budget")
    if args.no_pseudo_user:
        values["pseudo_user"] = False
    try:
        settings = load_settings(flags=flags, **values)
        require_public_occupancy(settings, "plan")
        return ReleaseParams.from_settings(checked_settings(settings, flags))
    except ConfigError as exc:
        raise CliError(str(exc)) from None
