"""HTTP pages of a worker: ``/metrics``, ``/healthz``, ``/readyz``, ``/api/releases`` (the
latest released records this worker published), and the live map ``/dashboard`` (the
routes of :mod:`stream_dp.dashboard`, fed by a follower of the releases topic that starts
when the dashboard is first opened).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import faust
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from stream_dp.dashboard.app import add_dashboard
from stream_dp.dashboard.routes import ReleaseFeed

if TYPE_CHECKING:
    from stream_dp.worker.runtime import WorkerRuntime


def register_pages(app: faust.App, runtime: WorkerRuntime) -> None:
    @app.page("/metrics")
    async def metrics(web: Any, request: Any) -> Any:
        runtime.metrics.ready.set(1 if runtime.ready else 0)
        body = generate_latest(runtime.metrics.registry)
        return web.bytes(body, content_type=CONTENT_TYPE_LATEST.split(";")[0])

    @app.page("/healthz")
    async def healthz(web: Any, request: Any) -> Any:
        reason = runtime.fatal()
        if reason:
            return web.json({"status": "failed", "reason": reason}, status=503)
        return web.json({"status": "ok"})

    @app.page("/readyz")
    async def readyz(web: Any, request: Any) -> Any:
        if runtime.ready and not runtime.failed:
            return web.json({"status": "ready"})
        health = runtime.health
        if health is not None and not health.reachable(time.monotonic()):
            return web.json({"status": "broker unreachable"}, status=503)
        return web.json({"status": "recovering"}, status=503)

    @app.page("/api/releases")
    async def releases(web: Any, request: Any) -> Any:
        recent = list(runtime.releaser.recent) if runtime.releaser is not None else []
        return web.json(
            {
                "leader": bool(runtime.releaser and runtime.releaser.leader),
                "settings": runtime.settings.info_labels(),
                "records": recent[-100:],
            }
        )

    # Faust's web server is aiohttp: the dashboard's routes go straight on its application.
    add_dashboard(
        app.web.web_app,
        runtime.settings,
        runtime.conn,
        ReleaseFeed(),
        source="worker",
        lazy=True,
    )
