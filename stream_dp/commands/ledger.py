"""`stream-dp ledger export|import|init`: back up and restore the release log.

The release log holds the privacy ledger (every vehicle's losses) and which windows were
released; a broker that loses it would let a worker start every vehicle's loss from zero and
release windows again. ``export FILE`` copies the release log (with its snapshots) to a file
(JSON lines after a header: app id, topic names, record count, SHA-256 checksum);
``import FILE`` writes it back, in order and at the same offsets, into an empty release log
(after a broker was lost) and checks it reads back identical; ``init`` starts a first, empty
ledger on a new deployment, for workers run with ``require_existing_ledger``. Settings (topic
names, app id, connection) are the worker's: environment and ``STREAM_DP_CONFIG_FILE``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from stream_dp.commands.shared import (
    CliError,
    add_bootstrap_option,
    cannot_read,
    plain_text,
    settings_with_bootstrap,
)
from stream_dp.config import Settings

if TYPE_CHECKING:
    from stream_dp.kafka.connection import KafkaConnection


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "ledger", help="back up and restore the release log (the privacy ledger)",
        description=plain_text(__doc__),
    )  # fmt: skip
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="copy the release log to FILE")
    export.add_argument("file", metavar="FILE", help="the backup file (replaced atomically)")
    restore = actions.add_parser("import", help="write FILE back into an empty release log")
    restore.add_argument("file", metavar="FILE", help="a file written by `ledger export`")
    restore.add_argument(
        "--resume",
        action="store_true",
        help="complete an interrupted import: the log may already hold the file's first records",
    )
    actions.add_parser("init", help="start a first, empty ledger on an empty release log")
    for action in (export, restore, actions.choices["init"]):
        add_bootstrap_option(action)
        action.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_with_bootstrap(args.bootstrap, needed_by="needs --bootstrap")
    from aiokafka.errors import KafkaError

    from stream_dp.worker.ledger_file import LedgerFileError

    try:
        if args.action == "export":
            return _export(settings, Path(args.file))
        if args.action == "import":
            return _import(settings, Path(args.file), args.resume)
        return _init(settings)
    except LedgerFileError as exc:
        raise CliError(f"{args.file}: {exc}") from None
    except (KafkaError, TimeoutError) as exc:
        raise CliError(f"Kafka at {settings.kafka_bootstrap}: {exc}") from None


def _connection(settings: Settings) -> KafkaConnection:
    from stream_dp.worker.connection_settings import connection_from_settings

    return connection_from_settings(settings)


def _export(settings: Settings, path: Path) -> int:
    from stream_dp.worker.ledger_backup import backed_up_topics, export_ledger
    from stream_dp.worker.ledger_file import write_ledger_file

    if not path.parent.is_dir():
        raise CliError(f"cannot write {path}: no directory {path.parent}")
    conn = _connection(settings)
    _require_topic(conn, settings.topic_release_log)
    records = asyncio.run(export_ledger(conn, settings))
    header = write_ledger_file(path, settings.app_id, backed_up_topics(settings), records)
    print(
        f"exported {header.records} records of {settings.topic_release_log} to {path} "
        f"(sha256 {header.sha256})"
    )
    return 0


def _import(settings: Settings, path: Path, resume: bool) -> int:
    from stream_dp.kafka.service_topics import ensure_service_topics_async
    from stream_dp.worker.ledger_backup import LedgerError, import_ledger
    from stream_dp.worker.ledger_file import RELEASE_LOG, read_ledger_file

    try:
        header, records = read_ledger_file(path)
    except OSError as exc:
        raise cannot_read("ledger file", path, exc) from None
    if header.app_id != settings.app_id:
        raise CliError(
            f"{path} is the ledger of app id {header.app_id!r}, this deployment's is "
            f"{settings.app_id!r} (set STREAM_DP_APP_ID)"
        )
    if set(header.topics) != {RELEASE_LOG}:
        raise CliError(f"{path}: holds topics {sorted(header.topics)}, expected {RELEASE_LOG}")
    conn = _connection(settings)

    async def restore() -> tuple[int, bool]:
        await ensure_service_topics_async(settings, conn)
        return await import_ledger(conn, settings, records, resume=resume)

    try:
        written, snapshot = asyncio.run(restore())
    except LedgerError as exc:
        raise CliError(str(exc)) from None
    print(
        f"imported {written} records into {settings.topic_release_log} "
        f"({len(records) - written} were there already)"
        + (", then a snapshot pointing at the new broker's topics" if snapshot else "")
        + f"; it reads back as {path}"
    )
    return 0


def _init(settings: Settings) -> int:
    from stream_dp.kafka.service_topics import ensure_service_topics_async
    from stream_dp.worker.ledger_backup import LedgerError, init_ledger

    conn = _connection(settings)

    async def start() -> None:
        await ensure_service_topics_async(settings, conn)
        await init_ledger(conn, settings)

    try:
        asyncio.run(start())
    except LedgerError as exc:
        raise CliError(str(exc)) from None
    print(f"started an empty ledger in {settings.topic_release_log}")
    return 0


def _require_topic(conn: KafkaConnection, topic: str) -> None:
    from stream_dp.kafka.topics import existing_topics

    if topic not in asyncio.run(existing_topics(conn)):
        raise CliError(f"the broker has no topic {topic}: nothing to export")
