"""Wire the dashboard into an aiohttp application: the routes, and a follower of the
releases topic feeding them (started with the application, or at the first request)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import web

from stream_dp.config import Settings
from stream_dp.dashboard.follower import RETRY_SECONDS, follow_releases
from stream_dp.dashboard.routes import PageConfig, ReleaseFeed, add_dashboard_routes
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.web.basemap import basemap_of

log = logging.getLogger(__name__)


def page_config(settings: Settings, source: str, live: bool) -> PageConfig:
    return PageConfig(
        upper=settings.upper,
        source=source,
        live=live,
        basemap=basemap_of(settings.map_tiles, settings.map_tiles_attribution),
        settings=settings.info_labels(),
    )


def add_dashboard(
    app: web.Application,
    settings: Settings,
    conn: KafkaConnection | None,
    feed: ReleaseFeed,
    *,
    source: str,
    lazy: bool,
) -> None:
    """Serve ``feed`` on ``app``; with ``conn``, keep it filled from the releases topic
    (``lazy``: only once someone opens the dashboard, so a worker pays nothing otherwise)."""
    stop = asyncio.Event()
    task: asyncio.Task[None] | None = None

    async def follow_forever() -> None:
        assert conn is not None
        while not stop.is_set():
            try:
                await follow_releases(conn, settings.topic_releases, feed.add, stop)
            except Exception as exc:  # the broker went away: the page keeps what it has
                log.warning("following %s failed (%s); retrying", settings.topic_releases, exc)
                await asyncio.sleep(RETRY_SECONDS)

    async def start_following() -> None:
        nonlocal task
        if conn is not None and task is None:
            task = asyncio.create_task(follow_forever())

    async def on_startup(app: web.Application) -> None:
        await start_following()

    async def on_cleanup(app: web.Application) -> None:
        stop.set()
        if task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, 5.0)

    if not lazy:
        app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    add_dashboard_routes(
        app,
        feed,
        page_config(settings, source, live=conn is not None),
        on_first_request=start_following if lazy else None,
    )
