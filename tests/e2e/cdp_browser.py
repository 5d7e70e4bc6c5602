"""Headless Chromium driven over the DevTools protocol (aiohttp's websocket client on a
background event loop), for tests that keep a page open: evaluate JavaScript in it, wait
for a condition, take a screenshot. Needs the Debian package ``chromium``.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
    # Tests reach only this machine: any other host name resolves to nothing (no tile, no
    # font, no update is ever fetched).
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
]


class CdpError(AssertionError):
    pass


class Browser:
    """One Chromium process with one page; use as a context manager."""

    def __init__(self, binary: str, width: int = 1280, height: int = 900) -> None:
        # Chromium may still write its profile while it exits: a leftover file is no failure.
        self._profile = tempfile.TemporaryDirectory(
            prefix="stream-dp-chromium-", ignore_cleanup_errors=True
        )
        command = [binary, *FLAGS, f"--window-size={width},{height}",
                   f"--user-data-dir={self._profile.name}", "about:blank"]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        try:
            self._run(self._connect(self._page_socket_url()))
        except BaseException:
            self.close()
            raise

    def _page_socket_url(self, timeout: float = 30.0) -> str:
        port_file = Path(self._profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise CdpError(f"chromium exited {self.process.returncode}")
            if port_file.is_file() and port_file.read_text().strip():
                port = int(port_file.read_text().split()[0])
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as answer:
                    targets = json.loads(answer.read())
                pages = [t for t in targets if t.get("type") == "page"]
                if pages:
                    return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.1)
        raise CdpError("chromium's DevTools endpoint did not appear")

    def _run(self, coroutine: Any, timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _connect(self, url: str) -> None:
        self._session = aiohttp.ClientSession()
        self._socket = await self._session.ws_connect(url, max_msg_size=0)
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for message in self._socket:
            data = json.loads(message.data)
            future = self._pending.pop(data.get("id", -1), None)
            if future is not None and not future.done():
                future.set_result(data)

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        ident = next(self._ids)
        future = self._loop.create_future()
        self._pending[ident] = future
        await self._socket.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        answer = await future
        if "error" in answer:
            raise CdpError(f"{method}: {answer['error']}")
        return answer["result"]

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self._run(self._call(method, params))

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited when it is a promise)."""
        result = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise CdpError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0, what: str = "") -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise CdpError(f"timed out after {timeout} s waiting for {what or expression}")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        path.write_bytes(data)
        return data

    def close(self) -> None:
        async def shut() -> None:
            if getattr(self, "_socket", None) is not None:
                await self._socket.close()
            if getattr(self, "_session", None) is not None:
                await self._session.close()

        try:
            self._run(shut(), timeout=10)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
