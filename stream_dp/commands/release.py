"""`stream-dp release FILE --out releases.jsonl`: the service's engine offline, no Kafka.

For backfills, audits and tests: the same windowing, CLIP-USER, pseudo-user step and
noise as the service, with input partitions emulated by Kafka's default partitioner.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from stream_dp.cli import CliError
from stream_dp.config import ConfigError, Settings, load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.engine import OfflineEngine


def add_release_options(parser: argparse.ArgumentParser) -> None:
    """Options shared with the other commands that run the release (serve, demo)."""
    group = parser.add_argument_group("release parameters (override STREAM_DP_* settings)")
    group.add_argument("--epsilon", type=float, help="per-cell budget (default 1.0)")
    group.add_argument("--upper", type=float, help="public upper bound U (default 65)")
    group.add_argument("--resolution", type=int, help="H3 resolution (default 8)")
    group.add_argument("--window-seconds", type=int, help="window length (default 3600)")
    group.add_argument("--grace-seconds", type=float, help="watermark grace (default 600)")
    group.add_argument(
        "--max-future-seconds",
        type=float,
        help="serve: readings stamped more than this ahead of the wall clock are invalid "
        "(default 3600; the offline release ignores the clock)",
    )
    group.add_argument("--error-bound", type=float, help="error bound E* for CLIP-USER")
    group.add_argument(
        "--no-pseudo-user",
        dest="pseudo_user",
        action="store_false",
        default=None,
        help="skip the pseudo-user cap step",
    )
    group.add_argument("--min-vehicles", type=int, help="release cells with >= N vehicles")
    group.add_argument("--top-cells", type=int, help="release only the N busiest cells")
    group.add_argument("--mean-mechanism", help="per-cell mean mechanism (default clip)")
    group.add_argument("--delta", type=float, help="delta for (eps, delta) mechanisms")
    group.add_argument("--prefix-limit", type=int, help="C: stored readings per pair")
    group.add_argument("--partitions", type=int, help="input partitions (default 4)")
    group.add_argument(
        "--variance-share", type=float, help="share of epsilon for the variance (default 0.5)"
    )
    group.add_argument(
        "--target-mean-error", type=float, help="T: adaptive cells with mean_error <= T"
    )
    group.add_argument(
        "--coarsest-resolution", type=int, help="R0: coarsest resolution of adaptive cells"
    )
    group.add_argument("--accounting", help="per-vehicle accounting: basic (default) or pld")
    group.add_argument("--accounting-delta", type=float, help="delta of pld (default 1e-6)")


def settings_from_args(args: argparse.Namespace, **extra: object) -> Settings:
    keys = (
        "epsilon", "upper", "resolution", "window_seconds", "grace_seconds", "error_bound",
        "max_future_seconds", "pseudo_user", "min_vehicles", "top_cells", "mean_mechanism",
        "delta", "prefix_limit", "partitions", "variance_share", "target_mean_error",
        "coarsest_resolution", "accounting", "accounting_delta",
    )  # fmt: skip
    values = {k: getattr(args, k, None) for k in keys}
    values.update(extra)
    try:
        return load_settings(**values)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "release",
        help="run the release offline on a readings file (no Kafka)",
        description=__doc__,
    )
    parser.add_argument("file", type=Path, help="readings: CSV, JSONL, .gz of either, or .traj")
    parser.add_argument("--out", type=Path, required=True, help="output JSONL of records")
    add_release_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from stream_dp.sources import SourceError, iter_readings

    settings = settings_from_args(args)
    if not args.file.is_file():
        raise CliError(f"FILE: cannot read {args.file}")
    if settings.keep_freed_memory:
        from stream_dp.allocator import keep_freed_memory

        keep_freed_memory()
    engine = OfflineEngine(settings, LaplaceNoise())
    windows = cells = 0
    try:
        with args.out.open("wb") as out:
            for releases in (engine.feed(iter_readings(args.file)), engine.finish()):
                for release in releases:
                    windows += 1
                    cells += len(release.cells)
                    for record in release.records:
                        out.write(orjson.dumps(record) + b"\n")
    except SourceError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"--out: cannot write {args.out}: {exc.strerror}") from None
    counts = engine.counts
    print(
        f"released {windows} windows, {cells} cell records -> {args.out} "
        f"(readings accepted {counts.accepted}, invalid {counts.invalid}, late {counts.late})",
        file=sys.stderr,
    )
    return 0
