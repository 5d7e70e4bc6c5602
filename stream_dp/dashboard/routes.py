"""The dashboard's HTTP routes (aiohttp), served by a worker and by ``stream-dp dashboard``.

- ``GET /dashboard``: the map page; ``GET /dashboard/static/{name}``: its script, style and
  the vendored Leaflet (the browser loads nothing from elsewhere but the basemap's tiles);
- ``GET /api/dashboard/config``: colour scale, the U of records that state none and its
  units, the basemap's tile URL template and credit (HTML) if any, whether the releases are
  followed live;
- ``GET /api/dashboard/windows``: the released windows with their summaries and budget;
- ``GET /api/dashboard/windows/{start}``: one window's released cells with their hexagons;
- ``GET /api/dashboard/events``: server-sent events, one ``windows`` event (the index)
  whenever a record arrives, so an open page shows a new window without a reload.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson
from aiohttp import web

from stream_dp.dashboard.colour_scale import UNITS, VIRIDIS_STOPS
from stream_dp.dashboard.store import ReleaseStore
from stream_dp.web.basemap import Basemap

#: Served files: URL name -> (path under stream_dp/web, content type).
STATIC_FILES = {
    "dashboard.js": ("dashboard.js", "text/javascript"),
    "dashboard.css": ("dashboard.css", "text/css"),
    "leaflet/leaflet.js": ("vendor/leaflet/leaflet.js", "text/javascript"),
    "leaflet/leaflet.css": ("vendor/leaflet/leaflet.css", "text/css"),
    "leaflet/LICENSE": ("vendor/leaflet/LICENSE", "text/plain"),
    "leaflet/images/layers.png": ("vendor/leaflet/images/layers.png", "image/png"),
    "leaflet/images/layers-2x.png": ("vendor/leaflet/images/layers-2x.png", "image/png"),
}
HEARTBEAT_SECONDS = 15.0
COALESCE_SECONDS = 0.1  # records of one window arrive in a burst: one event for the burst


@dataclass(frozen=True)
class PageConfig:
    """What the page needs besides the releases (all public configuration)."""

    #: U of records that state none (each window is coloured by its own records' U).
    upper: float
    source: str  # "worker" or "dashboard"
    #: Following the releases topic (False: a releases file, nothing new will arrive).
    live: bool = True
    basemap: Basemap | None = None
    settings: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "upper": self.upper,
            "units": UNITS,
            "colour_stops": list(VIRIDIS_STOPS),
            "tile_url": self.basemap.url if self.basemap else None,
            "tile_attribution": self.basemap.attribution_html if self.basemap else "",
            "source": self.source,
            "live": self.live,
            "settings": self.settings or {},
        }


class ReleaseFeed:
    """A :class:`ReleaseStore` plus a wake-up for the open event streams."""

    def __init__(self, store: ReleaseStore | None = None) -> None:
        self.store = store if store is not None else ReleaseStore()
        self._changed = asyncio.Event()
        self.closing = False

    def add(self, records: list[Any]) -> None:
        if self.store.add(records):
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def change_signal(self) -> asyncio.Event:
        """An event set at the next change: take it before reading the store."""
        return self._changed

    def close(self) -> None:
        """End every open event stream (the server is shutting down)."""
        self.closing = True
        self._wake()


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(data),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def add_dashboard_routes(
    app: web.Application,
    feed: ReleaseFeed,
    config: PageConfig,
    on_first_request: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Add the dashboard's routes to ``app`` (before it starts); ``on_first_request`` runs
    once, before the first dashboard request is answered (e.g. to start following the
    releases topic only when someone looks)."""
    web_root = resources.files("stream_dp.web")
    started: asyncio.Future[None] | None = None

    async def ensure_started() -> None:
        nonlocal started
        if on_first_request is None:
            return
        if started is None:
            started = asyncio.ensure_future(on_first_request())
        await asyncio.shield(started)

    async def page(request: web.Request) -> web.StreamResponse:
        await ensure_started()
        html = web_root.joinpath("dashboard.html").read_bytes()
        return web.Response(body=html, content_type="text/html", charset="utf-8")

    async def static(request: web.Request) -> web.StreamResponse:
        found = STATIC_FILES.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound()
        path, content_type = found
        body = web_root.joinpath(path).read_bytes()
        return web.Response(body=body, content_type=content_type)

    async def page_config(request: web.Request) -> web.StreamResponse:
        return _json(config.to_json())

    async def windows(request: web.Request) -> web.StreamResponse:
        await ensure_started()
        return _json({"windows": feed.store.index()})

    async def window_cells(request: web.Request) -> web.StreamResponse:
        await ensure_started()
        start = request.match_info["start"]
        cells = feed.store.cells(start)
        if cells is None:
            return _json({"error": f"no released window starts at {start}"}, status=404)
        return _json({"window_start": start, "cells": cells})

    async def events(request: web.Request) -> web.StreamResponse:
        await ensure_started()
        return await stream_window_index(request, feed)

    async def on_shutdown(app: web.Application) -> None:
        feed.close()

    app.on_shutdown.append(on_shutdown)
    app.router.add_get("/dashboard", page)
    app.router.add_get("/dashboard/static/{name:.+}", static)
    app.router.add_get("/api/dashboard/config", page_config)
    app.router.add_get("/api/dashboard/windows", windows)
    app.router.add_get("/api/dashboard/windows/{start}", window_cells)
    app.router.add_get("/api/dashboard/events", events)


async def stream_window_index(request: web.Request, feed: ReleaseFeed) -> web.StreamResponse:
    """Server-sent events: the window index whenever it changes, a keep-alive otherwise."""
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    sent = -1
    try:
        while not feed.closing:
            changed = feed.change_signal()
            if feed.store.version != sent:
                sent = feed.store.version
                data = orjson.dumps({"windows": feed.store.index()})
                await response.write(b"event: windows\ndata: " + data + b"\n\n")
            else:
                await response.write(b": keep-alive\n\n")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), HEARTBEAT_SECONDS)
            await asyncio.sleep(COALESCE_SECONDS)
    except ConnectionResetError:
        pass  # the page went away
    return response
