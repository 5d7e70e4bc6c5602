"""A stand-in tile server on 127.0.0.1: ``GET /{z}/{x}/{y}.png`` answers one pale 256 px PNG
tile and records the path, so a test sees which tiles a browser asked for (no real tile
server is ever contacted)."""

from __future__ import annotations

import re
import struct
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TILE_PATH = re.compile(r"/(\d+)/(\d+)/(\d+)\.png")
TILE_SIZE = 256


FILL, EDGE = (226, 232, 220), (170, 180, 165)


def tile_png() -> bytes:
    """A square RGB PNG of ``FILL`` with a one-pixel ``EDGE`` on its top and left sides (so
    the tiles of a screenshot show as a grid)."""
    line = bytes(EDGE) * TILE_SIZE
    inner = bytes(EDGE) + bytes(FILL) * (TILE_SIZE - 1)
    raw = b"".join(b"\x00" + (line if row == 0 else inner) for row in range(TILE_SIZE))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", TILE_SIZE, TILE_SIZE, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


@dataclass
class TileStub:
    port: int
    requests: list[str] = field(default_factory=list)

    @property
    def template(self) -> str:
        return f"http://127.0.0.1:{self.port}/{{z}}/{{x}}/{{y}}.png"

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


@contextmanager
def serve_tiles() -> Iterator[TileStub]:
    """The stub, running on a free loopback port until the block ends."""
    png = tile_png()
    lock = threading.Lock()
    stub = TileStub(0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            with lock:
                stub.requests.append(self.path)
            if TILE_PATH.fullmatch(self.path) is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(png)))
            self.end_headers()
            self.wfile.write(png)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stub.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
