"""`stream-dp release FILE --out releases.jsonl`: the service's engine offline, no Kafka.

For backfills, audits and tests: the same windowing, CLIP-USER, pseudo-user step and
noise as the service, with input partitions emulated by Kafka's default partitioner.
A window whose release computation raises is written as a failed window summary (as the
service publishes it), reported on stderr in one line, and the replay goes on; the exit
status is 1 when any window failed, after everything else is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

import orjson

from stream_dp.cli import CliError, cannot_read, plain_text
from stream_dp.config import COARSEST_RESOLUTION_STEPS, ConfigError, Settings, load_settings


def add_release_options(
    parser: argparse.ArgumentParser, defaults: Mapping[str, object] | None = None
) -> None:
    """Options shared with the other commands that run the release (serve, demo).

    ``defaults`` are the command's own defaults where they differ from the settings' (the
    demo's), shown in the help as what the command really uses.
    """
    from stream_dp.dp.mechanism_names import MEAN_MECHANISM_NAMES

    shown = {name: field.default for name, field in Settings.model_fields.items()}
    shown.update(defaults or {})

    def default(name: str) -> str:
        value = shown[name]
        if name == "coarsest_resolution" and value is None:
            return f"max(0, resolution - {COARSEST_RESOLUTION_STEPS})"
        return (
            "unset" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
        )

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
        dest="target_mean_error",
        action="store_const",
        const="none",
        help="release fixed cells at --resolution instead of adaptive cells (the same as "
        "--target-mean-error none)",
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
)


def settings_from_args(args: argparse.Namespace, **extra: object) -> Settings:
    keys = (
        "epsilon", "upper", "resolution", "window_seconds", "grace_seconds", "error_bound",
        "max_future_seconds", "pseudo_user", "min_vehicles", "top_cells", "mean_mechanism",
        "delta", "prefix_limit", "partitions", "variance_share", "target_mean_error",
        "coarsest_resolution", "accounting", "accounting_delta",
    )  # fmt: skip
    values = {k: getattr(args, k, None) for k in keys}
    flags = {k for k, v in values.items() if v is not None}
    values.update(extra)
    try:
        return load_settings(flags=flags, **values)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "release",
        help="run the release offline on a readings file (no Kafka)",
        description=plain_text(__doc__),
    )
    parser.add_argument("file", type=Path, help="readings: CSV, JSONL, .gz of either, or .traj")
    parser.add_argument("--out", type=Path, required=True, help="output JSONL of records")
    add_release_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.engine import OfflineEngine
    from stream_dp.release.outcome import failure_line
    from stream_dp.sources import SourceError, iter_readings

    settings = settings_from_args(args)
    if not args.file.is_file():
        raise cannot_read("FILE", args.file)
    if settings.keep_freed_memory:
        from stream_dp.allocator import keep_freed_memory

        keep_freed_memory()
    engine = OfflineEngine(settings, LaplaceNoise())
    windows = cells = failed = 0
    try:
        with args.out.open("wb") as out:
            for releases in (engine.feed(iter_readings(args.file)), engine.finish()):
                for release in releases:
                    windows += 1
                    cells += len(release.cells)
                    for record in release.records:
                        out.write(orjson.dumps(record) + b"\n")
                    if release.failed:
                        failed += 1
                        print(failure_line(release, "continuing"), file=sys.stderr)
    except SourceError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"--out: cannot write {args.out}: {exc.strerror}") from None
    counts = engine.counts
    print(
        f"released {windows - failed} windows, {cells} cell records, {failed} windows failed "
        f"-> {args.out} (readings accepted {counts.accepted}, invalid {counts.invalid}, "
        f"late {counts.late})",
        file=sys.stderr,
    )
    return 1 if failed else 0
