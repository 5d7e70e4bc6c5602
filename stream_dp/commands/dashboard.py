"""`stream-dp dashboard`: the live map, served from its own subscriber of the releases topic.

Reads the releases topic (``STREAM_DP_TOPIC_RELEASES``) from its beginning without a
consumer group, so any number of dashboards run beside the workers without affecting
them; duplicates (re-published windows) are dropped by ``release_id``. With
``--releases-file`` it serves the records of a ``stream-dp release --out`` file instead
(no Kafka).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stream_dp.commands.basemap_options import add_basemap_options, basemap_values
from stream_dp.commands.shared import (
    CliError,
    add_bootstrap_option,
    parse_int_option,
    plain_text,
)
from stream_dp.config import ConfigError, load_settings

if TYPE_CHECKING:
    from stream_dp.config import Settings
    from stream_dp.dashboard.routes import ReleaseFeed
    from stream_dp.kafka.connection import KafkaConnection


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "dashboard", help="serve the live map of releases", description=plain_text(__doc__)
    )
    add_bootstrap_option(parser)
    parser.add_argument("--web-port", metavar="N", help="HTTP port, 0: a free one (default 8000)")
    parser.add_argument("--web-host", metavar="HOST", help="HTTP bind address (default 127.0.0.1)")
    parser.add_argument(
        "--upper",
        type=float,
        metavar="X",
        help="U of records that state none, older ones (default 65)",
    )
    parser.add_argument(
        "--max-windows", default="336", metavar="N", help="windows kept in memory (default 336)"
    )
    parser.add_argument(
        "--releases-file",
        type=Path,
        metavar="FILE",
        help="serve this releases JSONL file instead of Kafka (default none: the topic)",
    )
    add_basemap_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from stream_dp.dashboard.follower import read_releases_file
    from stream_dp.dashboard.routes import ReleaseFeed
    from stream_dp.dashboard.store import ReleaseStore
    from stream_dp.worker.connection_settings import connection_from_settings

    max_windows = parse_int_option("max-windows", args.max_windows, 1)
    web_port = None if args.web_port is None else parse_int_option("web-port", args.web_port, 0)
    basemap = basemap_values(args)
    try:
        settings = load_settings(
            flags={name for name, value in basemap.items() if value is not None},
            **basemap,
            kafka_bootstrap=args.bootstrap,
            web_port=web_port,
            web_host=args.web_host,
            upper=args.upper,
        )
        conn = None if args.releases_file else connection_from_settings(settings)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    feed = ReleaseFeed(ReleaseStore(max_windows))
    if args.releases_file is not None:
        try:
            feed.store.add(read_releases_file(args.releases_file))
        except (OSError, ValueError) as exc:
            raise CliError(f"--releases-file: {exc}") from None
    asyncio.run(_serve(settings, conn, feed))
    return 0


async def _serve(settings: Settings, conn: KafkaConnection | None, feed: ReleaseFeed) -> None:
    from aiohttp import web

    from stream_dp.dashboard.app import add_dashboard

    app = web.Application()
    add_dashboard(app, settings, conn, feed, source="dashboard", lazy=False)

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, settings.web_host, settings.web_port)
    await site.start()
    host, port = runner.addresses[0][:2]
    where = "file" if conn is None else settings.topic_releases
    print(f"dashboard http://{host}:{port}/dashboard ({where})", file=sys.stderr, flush=True)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopped.set)
    try:
        await stopped.wait()
    finally:
        await runner.cleanup()
