"""`stream-dp release FILE --out releases.jsonl`: the service's engine offline, no Kafka.

For backfills, audits and tests: the same windowing, CLIP-USER, pseudo-user step and
noise as the service, with input partitions emulated by Kafka's default partitioner.

Input: CSV with a header naming the columns vehicle_id, ts, lat, lon, speed (other
columns are ignored), JSON Lines with those keys (.jsonl or .ndjson), either gzipped
(.gz), or a tracktable .traj file (speeds derived from consecutive fixes). ts is epoch
seconds or an ISO 8601 / RFC 3339 time (naive = UTC); speed is in the units of U (km/h).

A bad reading (unparseable, missing field, out of range) is skipped, counted by reason and
written to the rejects file as {"line": N, "reason": CODE, "detail": TEXT}; the codes are
the dead-letter topic's (docs/configuration.md, "Rejected readings"). With --strict the
whole input is checked first and the first bad row stops the run (exit 2) before any noise
is drawn. Every output is checked before the input is read: an option naming a directory or
a path that cannot be written stops the run at once, leaving nothing behind.

--out is written whole or not at all: to a temporary file beside it, renamed over it only
when the run completes, so a failed or interrupted run leaves an existing --out as it was.
Each run draws fresh noise: releasing the same readings again spends their budget again,
so an existing non-empty --out is replaced only with --overwrite.

A window whose release computation raises is written as a failed window summary (as the
service publishes it), reported on stderr in one line, and the replay goes on; the exit
status is 1 when any window failed, after everything else is written.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from stream_dp.commands.basemap_options import BASEMAP_SETTINGS
from stream_dp.commands.clock_options import CLOCK_SETTINGS
from stream_dp.commands.profile import period_words, promise_line
from stream_dp.commands.shared import CliError, cannot_read, check_writable, plain_text
from stream_dp.config import (
    BUDGET_PLANNERS,
    RESOLUTION_CHOICES,
    TARGET_AT_UPPER,
    ConfigError,
    Settings,
    load_settings,
)
from stream_dp.dp.secret_accounting import COUNT_STEPS
from stream_dp.options.setting_options import default_text
from stream_dp.secret_routes import SECRET_ROUTES
from stream_dp.windows.readings import InvalidReading, parse_timestamp

if TYPE_CHECKING:
    from stream_dp.engine import OfflineEngine
    from stream_dp.windows.reject_reasons import Reject


class FixedCells(argparse.Action):
    """``--fixed-cells``: T none, and B none unless B is given (fixed cells give the budget no
    per-cell epsilon to pace; the settings refuse T none alone, and B given beside fixed
    cells: :func:`settings_from_args`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:  # fmt: skip
        namespace.target_mean_error, namespace.fixed_cells = "none", True


def add_release_options(
    parser: argparse.ArgumentParser, defaults: Mapping[str, object] | None = None
) -> None:
    """Options shared with the other commands that run the release (serve, demo).

    The defaults shown are the settings' (the budget profile), each on its own; ``defaults``
    are a command's own where they differ (the demo's).
    """
    from stream_dp.dp.mechanism_specs import MEAN_MECHANISM_NAMES

    settings = {name: field.default for name, field in Settings.model_fields.items()}
    shown = {**settings, **(defaults or {})}

    def default(name: str) -> str:
        return default_text(name, shown[name])

    group = parser.add_argument_group(
        "release parameters (override STREAM_DP_* settings; 'none' unsets an optional one)"
    )
    for name, kind, text in _NUMERIC_OPTIONS:
        option = "--" + name.replace("_", "-")
        # Read as text: Settings checks the value (finite, in range), as for a variable.
        metavar = "N" if kind is int else "X"
        group.add_argument(option, metavar=metavar, help=f"{text} (default {default(name)})")
    group.add_argument(
        "--fixed-cells",
        action=FixedCells,
        nargs=0,
        help="release fixed cells at --resolution instead of adaptive cells, at a fixed "
        "--epsilon per cell without a vehicle budget (the same as --target-mean-error none)",
    )
    group.add_argument(
        "--fixed-epsilon",
        dest="vehicle_budget",
        action="store_const",
        const="none",
        help="a fixed --epsilon per cell instead of the vehicle budget's (the same as "
        "--vehicle-budget none)",
    )
    group.add_argument(
        "--no-pseudo-user",
        dest="pseudo_user",
        action="store_false",
        default=None,
        help="skip the pseudo-user cap step",
    )
    group.add_argument(
        "--accounting",
        metavar="{basic,pld}",
        help=f"per-vehicle accounting: basic or pld (default {default('accounting')})",
    )
    group.add_argument(
        "--privacy-model",
        choices=("public-occupancy", "secret-routes"),
        metavar="{public-occupancy,secret-routes}",
        help="what is public: the occupancy (fixed routes) or nothing about a vehicle "
        f"(docs/math.md §14) (default {default('privacy_model')})",
    )
    group.add_argument(
        "--budget-planner",
        choices=BUDGET_PLANNERS,
        metavar="{" + ",".join(BUDGET_PLANNERS) + "}",
        help="with a vehicle budget: auto (the optimiser up to --optimiser-max-pairs pooled "
        f"pairs, else the rules), rules or optimiser (§13.5) (default {default('budget_planner')})",
    )
    group.add_argument(
        "--resolution-choice",
        choices=RESOLUTION_CHOICES,
        metavar="{" + ",".join(RESOLUTION_CHOICES) + "}",
        help="secret-routes with --coarse-resolution: both levels everywhere, or the fine "
        "level only where the coarse noisy counts ask for it (docs/math.md §14.10) "
        f"(default {default('resolution_choice')})",
    )
    group.add_argument(
        "--mean-mechanism",
        choices=MEAN_MECHANISM_NAMES,
        metavar="NAME",
        help=f"per-cell mean mechanism, one of: {', '.join(MEAN_MECHANISM_NAMES)} "
        f"(default {default('mean_mechanism')})",
    )


#: (setting, type, help) of the numeric release options, in the order of the help.
_NUMERIC_OPTIONS: tuple[tuple[str, type, str], ...] = (
    ("epsilon", float, "per-cell budget"),
    ("upper", float, "public upper bound U of a reading"),
    ("resolution", int, "H3 resolution"),
    ("window_seconds", int, "window length"),
    ("grace_seconds", float, "watermark grace"),
    (
        "max_future_seconds",
        float,
        "serve: readings stamped more than this ahead of the wall clock are invalid; "
        "the offline release ignores the clock",
    ),
    ("error_bound", float, "error bound E* for CLIP-USER"),
    ("min_vehicles", int, "release cells with >= N vehicles"),
    ("top_cells", int, "release only the N busiest cells"),
    ("delta", float, "delta for (eps, delta) mechanisms"),
    ("prefix_limit", int, "C: stored readings per pair"),
    ("partitions", int, "input partitions"),
    ("variance_share", float, "share of epsilon for the variance; 0: the mean gets all"),
    ("target_mean_error", float, "T: adaptive cells, each with mean_error <= T; none: fixed"),
    ("coarsest_resolution", int, "R0: coarsest resolution of adaptive cells"),
    ("accounting_delta", float, "delta of the pld accounting"),
    ("vehicle_budget", float, "B: each vehicle's epsilon over any budget period"),
    ("vehicle_budget_burst", float, "pacing: the most a vehicle spends at once (unset: B/4)"),
    ("max_span_hours", int, "with a vehicle budget: windows a cell may pool"),
    (
        "optimiser_max_pairs",
        int,
        "with budget planner auto: the most pooled pairs a window the optimiser plans",
    ),
    ("budget_period_seconds", int, "the rolling budget period"),
    ("contribution_cells", int, "secret-routes: L0, the most cells a vehicle adds to a window"),
    ("count_share", float, "secret-routes: share of a cell's epsilon for the vehicle count"),
    ("coarse_resolution", int, "secret-routes: also release the cells' parents at this resolution"),
)


def release_option_names() -> list[str]:
    """The settings the numeric release options set, in the order of the help."""
    return [name for name, _, _ in _NUMERIC_OPTIONS]


def settings_from_args(args: argparse.Namespace, **extra: object) -> Settings:
    keys = (
        "epsilon", "upper", "resolution", "window_seconds", "grace_seconds", "error_bound",
        "max_future_seconds", "pseudo_user", "min_vehicles", "top_cells", "mean_mechanism",
        "delta", "prefix_limit", "partitions", "variance_share", "target_mean_error",
        "coarsest_resolution", "accounting", "accounting_delta", "vehicle_budget",
        "vehicle_budget_burst", "max_span_hours", "budget_period_seconds", "privacy_model",
        "budget_planner", "optimiser_max_pairs", "contribution_cells", "count_share",
        "coarse_resolution", "resolution_choice",
    )  # fmt: skip
    values = {k: getattr(args, k, None) for k in (*keys, *BASEMAP_SETTINGS, *CLOCK_SETTINGS)}
    if getattr(args, "fixed_cells", False) and values["vehicle_budget"] is None:
        values["vehicle_budget"] = "none"  # --fixed-cells: no budget, unless one is given
    flags = {k for k, v in values.items() if v is not None}
    values.update(extra)
    from stream_dp.release.params import checked_settings

    try:
        settings = load_settings(flags=flags, **values)
        # A setting nobody set (e.g. --delta that cummings needs) is named by its option too.
        unset = set(keys) - {"pseudo_user"} - settings.model_fields_set
        return checked_settings(settings, flags | unset)  # the spec too
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def register(sub: argparse._SubParsersAction) -> None:
    from stream_dp.windows.reject_reasons import RejectReason

    parser = sub.add_parser(
        "release",
        help="run the release offline on a readings file (no Kafka)",
        description=plain_text(__doc__),
        epilog=textwrap.fill(
            "reject reasons (docs/configuration.md, Rejected readings): " + ", ".join(RejectReason),
            88,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "file",
        type=Path,
        metavar="FILE",
        help="readings: CSV (header vehicle_id,ts,lat,lon,speed), JSONL with those keys, "
        ".gz of either, or .traj",
    )
    parser.add_argument(
        "--out", type=Path, required=True, metavar="FILE", help="output JSONL of records"
    )
    parser.add_argument(
        "--rejects",
        type=Path,
        metavar="FILE",
        help="JSONL of skipped readings: line, reason, detail (default --out with the "
        "suffix .rejects.jsonl)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="check every reading first; exit 2 on the first bad one, releasing nothing",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a non-empty --out (a re-run draws fresh noise: budget spent again)",
    )
    parser.add_argument(
        "--ledger-out",
        type=Path,
        metavar="FILE",
        help="JSONL of every vehicle's loss over the run {vehicle_id, loss, loss_pld}: an "
        "audit file for the operator that names vehicles, never to publish (default none: "
        "not written)",
    )
    for flag, dest, words in (("--from", "span_from", "first"), ("--to", "span_to", "end")):
        parser.add_argument(
            flag, dest=dest, metavar="TIME",
            help=f"secret-routes (required): the released span's {words} window start, epoch "
            "seconds or RFC 3339, a multiple of --window-seconds; every window in [--from, "
            "--to) is released, readings outside are dropped (default none)",
        )  # fmt: skip
    parser.add_argument(
        "--show-exact-counts",
        action="store_true",
        help="secret-routes: also print the exact reading counts (accepted, rejected, late) on "
        "stderr; they are data, not protected by noise: for the operator only",
    )
    add_release_options(parser)
    parser.set_defaults(run=run)


def released_span(args: argparse.Namespace, settings: Settings) -> tuple[int, int] | None:
    """Secret routes' public span ``[--from, --to)`` (docs/math.md §14.5): required there,
    refused under public occupancy."""
    given = {"--from": getattr(args, "span_from", None), "--to": getattr(args, "span_to", None)}
    if settings.privacy_model != SECRET_ROUTES:
        for flag, value in given.items():
            if value is not None:
                raise CliError(f"{flag}: only with --privacy-model secret-routes")
        return None
    bounds = []
    for flag, value in given.items():
        if value is None:
            raise CliError(f"{flag}: required under secret-routes (the released span is public)")
        try:
            moment = parse_timestamp(float(value) if _is_number(value) else value)
        except InvalidReading:
            raise CliError(f"{flag}: must be epoch seconds or RFC 3339, got {value!r}") from None
        if moment % settings.window_seconds:
            raise CliError(f"{flag}: must be a multiple of --window-seconds "
                           f"({settings.window_seconds}), got {value!r}")  # fmt: skip
        bounds.append(int(moment))
    if bounds[0] >= bounds[1]:
        raise CliError("--to: must be after --from")
    return bounds[0], bounds[1]


def refuse_ledger_out(args: argparse.Namespace, settings: Settings) -> None:
    """``--ledger-out`` has nothing to write under secret-routes: every vehicle loses the
    same, stated in every window summary."""
    if settings.privacy_model == SECRET_ROUTES and getattr(args, "ledger_out", None):
        raise CliError("--ledger-out: not under secret-routes (every vehicle loses the same, "
                       "stated in every window summary)")  # fmt: skip


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def rejects_path(out: Path) -> Path:
    """The default rejects file: beside ``out``, its suffix replaced by ``.rejects.jsonl``."""
    return out.with_name(f"{out.stem if out.suffix else out.name}.rejects.jsonl")


def _check_paths(args: argparse.Namespace) -> Path:
    """The rejects path, after refusing outputs that would clobber something."""
    if not args.file.is_file():
        raise cannot_read("FILE", args.file)
    rejects = args.rejects or rejects_path(args.out)
    resolved = {args.file.resolve(), args.out.resolve(), rejects.resolve()}
    if len(resolved) < 3:
        raise CliError("FILE, --out and --rejects must be three different files")
    for label, path in (("--out", args.out), ("--rejects", rejects)):
        check_writable(label, path)
    ledger_out = getattr(args, "ledger_out", None)
    if ledger_out is not None:
        if ledger_out.resolve() in resolved:
            raise CliError("--ledger-out: must differ from FILE, --out and --rejects")
        check_writable("--ledger-out", ledger_out)
    if not args.overwrite and args.out.is_file() and args.out.stat().st_size > 0:
        raise CliError(
            f"--out: {args.out} already holds releases; a re-run draws fresh noise for the "
            "same windows and spends their budget again (--overwrite to replace it)"
        )
    return rejects


def run(args: argparse.Namespace) -> int:
    from stream_dp.commands.atomic_output import atomic_output
    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.engine import OfflineEngine
    from stream_dp.fault_injection import crash_point_counted, error_point_counted
    from stream_dp.release.window import failure_line
    from stream_dp.sources import LineTally, SourceError, numbered_readings

    settings = settings_from_args(args)
    refuse_ledger_out(args, settings)
    span = released_span(args, settings)
    rejects = _check_paths(args)
    if settings.keep_freed_memory:
        from stream_dp.allocator import keep_freed_memory

        keep_freed_memory()
    from stream_dp.release.run_losses import RunLosses

    engine = OfflineEngine(settings, LaplaceNoise(), span=span)
    run_losses = RunLosses(engine.params)
    windows = cells = failed = 0
    blank = LineTally()  # blank lines: skipped, counted
    try:
        if args.strict:  # before any noise is drawn
            bad = engine.first_reject(numbered_readings(args.file))
            if bad is not None:
                raise CliError(f"{args.file}:{bad.line}: {bad.reason}: {bad.detail}")
        print(_promise(engine), file=sys.stderr)  # the run starts releasing
        with atomic_output(args.out) as out, atomic_output(rejects) as rejected:

            def write_reject(reject: Reject) -> None:
                rejected.write(orjson.dumps(reject.as_json()) + b"\n")

            numbered = numbered_readings(args.file, blank)
            readings = engine.feed_numbered(numbered, on_reject=write_reject)
            for releases in (readings, engine.finish(release_held=True)):
                for release in releases:
                    windows += 1
                    cells += len(release.cells)
                    run_losses.add(release)
                    for record in release.records:
                        out.write(orjson.dumps(record) + b"\n")
                    if release.failed:
                        failed += 1
                        print(failure_line(release, "continuing"), file=sys.stderr)
                    error_point_counted("release-written-error")
                    crash_point_counted("release-written-kill")
    except SourceError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        where = exc.filename2 or exc.filename or args.out  # a rename names its target second
        raise CliError(f"cannot write {where}: {exc.strerror}") from None
    _print_losses(engine, run_losses, cells)
    released = f"released {windows - failed} windows, {cells} cell records, {failed} windows failed"
    if engine.secret is None or args.show_exact_counts:
        _print_counts(engine, rejects, blank.blank, released, args.out)
    else:  # secret routes: the exact counts are data (docs/math.md §14.7)
        print(f"{released} -> {args.out} (exact reading counts not shown under secret-routes: "
              f"--show-exact-counts; rejected readings -> {rejects})", file=sys.stderr)  # fmt: skip
    if args.ledger_out is not None:
        try:
            with atomic_output(args.ledger_out) as audit:
                for row in run_losses.rows():
                    audit.write(orjson.dumps(row) + b"\n")
        except OSError as exc:
            raise CliError(
                f"--ledger-out: cannot write {args.ledger_out}: {exc.strerror}"
            ) from None
    return 1 if failed else 0


def _print_counts(engine: OfflineEngine, rejects: Path, blank: int, released: str,
                  out: Path) -> None:  # fmt: skip
    """The run's exact reading counts on stderr (under secret-routes marked: not protected)."""
    counts = engine.counts
    note = "" if engine.secret is None else "; exact, not protected: operator only"
    if counts.invalid:
        by_reason = ", ".join(f"{r} {n}" for r, n in sorted(counts.invalid_reasons.items()))
        print(f"skipped {counts.invalid} bad readings ({by_reason}) -> {rejects}", file=sys.stderr)
    if blank:
        print(f"skipped {blank} blank lines", file=sys.stderr)
    print(
        f"{released} -> {out} (readings accepted {counts.accepted}, rejected {counts.invalid}, "
        f"late {counts.late}{note})",
        file=sys.stderr,
    )


def _print_losses(engine: OfflineEngine, run_losses: object, cells: int) -> None:
    """The run's losses (the busiest vehicle's, or secret-routes' loss of every vehicle) and
    why no cell was released, if none was."""
    settings = engine.settings
    if engine.secret is None:
        print(_busiest_line(run_losses, settings), file=sys.stderr)
        if not cells:
            print(no_cell_line(settings, engine.counts.accepted), file=sys.stderr)
        return
    print(f"every vehicle's loss: {_promise(engine)}", file=sys.stderr)
    if not cells:
        threshold = engine.secret.params.threshold / COUNT_STEPS
        print(f"released no cell: none reached the noisy threshold of {threshold:.0f} "
              "vehicles; longer windows, a coarser --resolution or a denser fleet release some",
              file=sys.stderr)  # fmt: skip


def _promise(engine: OfflineEngine) -> str:
    """The run's promise: the public-occupancy profile's line, or secret-routes' (epsilon,
    delta) per period, the same for every vehicle (docs/math.md §14.5)."""
    if engine.secret is None:
        return promise_line(engine.settings)
    params = engine.secret.params
    budget = params.budget
    return (
        f"promise (secret-routes): every vehicle loses at most epsilon "
        f"{budget.period_epsilon(budget.windows):.2f} at delta {budget.delta:g} per "
        f"{period_words(budget.windows * params.window_seconds)} "
        f"(epsilon {budget.window_epsilon:.3f} per window, L0 {params.contribution_cells} "
        f"cells at each of {len(params.resolutions)} levels), U {params.upper:g}"
    )


def _busiest_line(run_losses: object, settings: Settings) -> str:
    """The busiest vehicle's loss over the run (no vehicle id) beside the promise."""
    from stream_dp.release.run_losses import RunLosses

    assert isinstance(run_losses, RunLosses)
    basic, pld = run_losses.busiest()
    pld_text = "n/a" if pld is None else f"{pld:.2f}"
    return (
        f"busiest vehicle's loss over the run: epsilon {basic:.2f} (basic), {pld_text} "
        f"(PLD at delta {settings.accounting_delta:g}); {promise_line(settings)}"
    )


def no_cell_line(settings: Settings, readings: int) -> str:
    """Why a run released no cell, in one line: the target (set, or the default share of U)
    and the resolutions it was sought at, or the fixed cells, and the readings accepted."""
    target = settings.target_mean_error
    if target is None:
        cells = f"no fixed cell at resolution {settings.resolution} was released"
        hint = "a smaller --min-vehicles or a coarser --resolution"
    else:
        share, upper = TARGET_AT_UPPER
        how = (
            "as set"
            if "target_mean_error" in settings.model_fields_set
            else f"the default, {share:g}/{upper:g} of U {settings.upper:g}"
        )
        within = "" if settings.vehicle_budget is None else " within the vehicle budget"
        cells = (
            f"no cell met the target mean error T {target:g} ({how}) at resolutions "
            f"{settings.resolution} to {settings.coarsest_resolution}{within}"
        )
        hint = "a larger --target-mean-error or a coarser --coarsest-resolution"
    return (
        f"released no cell: {cells} with the {readings:,} readings accepted "
        f"(min_vehicles {settings.min_vehicles}); {hint} or more readings per cell release some"
    )
