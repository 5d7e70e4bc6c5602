"""`stream-dp produce FILE`: replay a file of readings into the readings topic."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import operator
import os
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stream_dp.commands.shared import CliError, add_bootstrap_option, cannot_read
from stream_dp.sources import SourceError, numbered_readings
from stream_dp.sources.skipped import SkippedRows, first_bad_row, strict_line

if TYPE_CHECKING:
    from stream_dp.kafka.connection import KafkaConnection
    from stream_dp.producer import ProduceStats

DEFAULT_TOPIC = "stream-dp.readings"
DEFAULT_PARTITIONS = 4
BOOTSTRAP_ENV = "STREAM_DP_KAFKA_BOOTSTRAP"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "produce",
        help="replay a file of readings (CSV, JSONL, .gz, .traj) into the readings topic",
        description=(
            "Replay readings with their event times, keyed by vehicle_id (CSV and JSONL in "
            "file order, .traj sorted by time); each message carries up to --batch-size "
            "readings of one vehicle (a JSON array, or an object for one). A row that is not "
            "a reading (docs/configuration.md, Rejected readings) is skipped and counted by "
            "reason in the summary; --strict stops at the first one before anything is sent. "
            "Readings out of range are sent: the service dead-letters them."
        ),
    )
    parser.add_argument(
        "file", metavar="FILE", help="readings file: CSV, JSONL, either gzipped, or .traj"
    )
    parser.add_argument(
        "--topic",
        default=DEFAULT_TOPIC,
        metavar="NAME",
        help=f"the topic (default {DEFAULT_TOPIC})",
    )
    broker = parser.add_mutually_exclusive_group()
    add_bootstrap_option(broker)
    broker.add_argument(
        "--embedded",
        action="store_true",
        help="start an embedded Tansu broker for this run only (for trials and benchmarks)",
    )
    parser.add_argument(
        "--rate", type=float, metavar="X", help="readings per second (default unthrottled)"
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=100,
        metavar="N",
        help="max readings per message (default 100)",
    )
    parser.add_argument(
        "--max-delay",
        type=float,
        default=120.0,
        metavar="X",
        help="max event-time seconds a reading waits for its group to fill; keep it well "
        "below the service's lateness grace (default 120)",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        metavar="N",
        help="partitions if the topic is created; an existing topic is used as it is "
        f"(default {DEFAULT_PARTITIONS})",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="check every row first; exit 2 on the first bad one, sending nothing",
    )
    parser.set_defaults(run=run)


def _check(args: argparse.Namespace) -> None:
    if args.rate is not None and not args.rate > 0:
        raise CliError(f"--rate must be > 0 readings/s, got {args.rate:g}")
    if args.batch_size < 1:
        raise CliError(f"--batch-size must be >= 1, got {args.batch_size}")
    if not args.max_delay >= 0:
        raise CliError(f"--max-delay must be >= 0 seconds, got {args.max_delay:g}")
    if args.partitions is not None and args.partitions < 1:
        raise CliError(f"--partitions must be >= 1, got {args.partitions}")
    if not Path(args.file).is_file():
        raise cannot_read("FILE", args.file)
    if not args.topic:
        raise CliError("--topic must not be empty")


def _iter_readings(
    path: str, skipped: SkippedRows | None = None
) -> tuple[Iterator[dict[str, Any]], int | None]:
    """The file's readings, and their number when known without reading on (a ``.traj``
    file is parsed and sorted here, whole; CSV and JSON Lines are streamed). A bad row is
    skipped and counted in ``skipped``; a file that cannot be read on is a bad FILE."""
    skipped = SkippedRows() if skipped is None else skipped
    try:
        numbered = numbered_readings(path, skipped.lines)
    except SourceError as exc:
        raise CliError(f"FILE: {exc}") from exc

    def reported() -> Iterator[dict[str, Any]]:
        try:
            yield from skipped.readings(numbered)
        except SourceError as exc:
            raise CliError(f"FILE: {exc}") from exc

    known = operator.length_hint(numbered, -1)  # a list's iterator knows its length
    return reported(), known if known >= 0 else None


def _check_rows(path: str) -> None:
    """``--strict``: the whole file read first; the first bad row stops the run, nothing sent."""
    try:
        bad = first_bad_row(numbered_readings(path))
    except SourceError as exc:
        raise CliError(f"FILE: {exc}") from exc
    if bad is not None:
        raise CliError(strict_line(bad))


def _count_lines(path: str) -> int | None:
    """The readings a JSON Lines or CSV file (either gzipped) holds, for the progress bar:
    its non-blank lines, minus the header for CSV; one read through. A quoted CSV field
    spanning lines makes it an overcount. ``None`` for other files or a read error."""
    name = Path(path).name.lower().removesuffix(".gz")
    if not name.endswith((".csv", ".jsonl", ".ndjson")):
        return None
    try:
        gzipped = path.lower().endswith(".gz")
        with gzip.open(path) if gzipped else open(path, "rb") as stream:
            lines = sum(1 for line in stream if line.strip())  # gunzipped as open_text does
    except (OSError, EOFError, zlib.error):
        return None  # reading the readings reports the problem
    return max(lines - 1, 0) if name.endswith(".csv") else lines


def run(args: argparse.Namespace) -> int:
    _check(args)
    from aiokafka.errors import KafkaError

    from stream_dp.kafka.connection import KafkaConnection
    from stream_dp.kafka.embedded_broker import EmbeddedBroker
    from stream_dp.kafka.topics import TopicError

    if args.strict:
        _check_rows(args.file)
    skipped = SkippedRows()
    readings, total = _iter_readings(args.file, skipped)
    if total is None and not args.quiet:
        total = _count_lines(args.file)

    with contextlib.ExitStack() as stack:
        if args.embedded:
            broker = stack.enter_context(EmbeddedBroker())
            conn = KafkaConnection(broker.bootstrap, embedded=True)
        else:
            if not (args.bootstrap or os.environ.get(BOOTSTRAP_ENV)):
                raise CliError(f"--bootstrap: no bootstrap server (or set {BOOTSTRAP_ENV})")
            try:
                conn = KafkaConnection.from_env(bootstrap=args.bootstrap)
            except ValueError as exc:
                raise CliError(f"--bootstrap: {exc}") from exc
        try:
            stats = asyncio.run(_produce(conn, args, readings, total))
        except TopicError as exc:
            raise CliError(f"--topic: {exc}") from exc
        except KafkaError as exc:
            print(
                f"stream-dp produce: error: Kafka at {conn.bootstrap_servers}: {exc}",
                file=sys.stderr,
            )
            return 1
    print(stats.summary(args.topic))
    if (summary := skipped.summary()) is not None:
        print(summary, file=sys.stderr)
    return 0


async def _produce(
    conn: KafkaConnection,
    args: argparse.Namespace,
    readings: Iterator[dict[str, Any]],
    total: int | None = None,
) -> ProduceStats:
    from stream_dp.kafka.topics import TopicSpec, ensure_topics
    from stream_dp.producer import TerminalProgress, produce_readings

    spec = TopicSpec(args.topic, args.partitions or DEFAULT_PARTITIONS)
    await ensure_topics(conn, [spec], strict_partitions=args.partitions is not None)
    progress = TerminalProgress(sys.stderr, enabled=not args.quiet, total=total)
    try:
        stats = await produce_readings(
            conn,
            args.topic,
            readings,
            batch_size=args.batch_size,
            rate=args.rate,
            progress=progress,
            max_delay=args.max_delay,
        )
        progress(stats, final=True)
    finally:
        progress.close()
    return stats
