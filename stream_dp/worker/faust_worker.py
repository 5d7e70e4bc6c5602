"""The Faust worker of ``stream-dp serve``: its HTTP address logged once, when the pages are
served, and the signal that stopped it remembered (SIGINT then ends the command as Ctrl-C
ends every other: exit status 130, one final line)."""

from __future__ import annotations

import logging
from typing import Any

import faust

log = logging.getLogger(__name__)


class ServiceWorker(faust.Worker):
    """A :class:`faust.Worker` that logs ``web_url`` once started and records a SIGINT."""

    def __init__(self, app: faust.App, *, web_url: str, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.web_url = web_url
        self.interrupted = False

    async def on_startup_finished(self) -> None:
        """Faust calls this once, after its web server started (not again on a restart)."""
        await super().on_startup_finished()
        log.info("HTTP: %s (/metrics, /healthz, /readyz, /dashboard)", self.web_url)

    def _on_sigint(self) -> None:
        self.interrupted = True
        super()._on_sigint()
