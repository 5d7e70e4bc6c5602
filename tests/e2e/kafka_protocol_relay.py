"""Test-only loopback Kafka relay that lets kcat (librdkafka 2.0.2) talk to Tansu 0.6.0.

Why it exists (measured with kcat 1.7.1 / librdkafka 2.0.2 against Tansu 0.6.0): kcat
sends ApiVersionsRequest v3 and fails with "Protocol read buffer underflow for ApiVersion
v3 at 274/279 ... expected 216172782113783806 bytes > 5 remaining bytes". Tansu's
response is correct per the protocol spec; it ends with this top-level tag buffer::

    04                          4 tagged fields
    00 01 01                    tag 0 SupportedFeatures, 1 byte: empty compact array
    01 08 ff ff ff ff ff ff ff ff   tag 1 FinalizedFeaturesEpoch, 8 bytes: int64 -1
    02 01 01                    tag 2 FinalizedFeatures, 1 byte: empty compact array
    03 01 00                    tag 3 ZkMigrationReady, 1 byte: false

librdkafka before v2.2.0 skips ``taglen - 1`` bytes per unknown tagged field instead of
``taglen`` (its ``rd_kafka_buf_skip_tags``; fixed by confluentinc/librdkafka#4278, "Fix
a bug that happens when skipping tags, causing buffer underflow"). It therefore reads the
tag-1 length byte ``08`` as a tag id and the epoch bytes ``ff x 8`` plus ``02`` as one
varint length, 3 * 2**56 - 1, and gives up with the error above: exactly the measured
numbers (offsets exclude the 4-byte correlation id).

What it rewrites: only the body of ApiVersions (api key 18) v3+ responses with error code
0, whose trailing top-level tag buffer is replaced by ``00`` (no tagged fields) and the
frame length adjusted. Every other byte in both directions is forwarded unchanged. All
four fields are optional, and the values Tansu sends are their spec defaults (empty, -1,
empty, false), so the rewritten response says the same thing; each rewrite is recorded in
:attr:`KafkaProtocolRelay.rewrites` so tests can check that. To know which responses
answer ApiVersions, the relay keeps, per connection, the api key and version of every
request by correlation id (request header v1/v2 starts with api_key int16, api_version
int16, correlation_id int32; every response header starts with correlation_id).

Start the broker with ``--advertised-listener-url`` set to the relay's address so that the
connections a client opens after Metadata also go through the relay.

This is for tests only: production code never uses it. Against Apache Kafka kcat needs no
relay (there the KIP-584 tags hold a non-negative epoch, so librdkafka's mis-parse stays
within the frame and the unread remainder is ignored), nor with librdkafka >= 2.2.0.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Self

LOOPBACK = "127.0.0.1"
API_VERSIONS = 18
FIRST_FLEXIBLE_API_VERSIONS = 3
#: Spec defaults of the ApiVersions v3 response tagged fields, as encoded on the wire.
API_VERSIONS_TAG_DEFAULTS = {
    0: b"\x01",  # SupportedFeatures: empty COMPACT_ARRAY
    1: struct.pack(">q", -1),  # FinalizedFeaturesEpoch
    2: b"\x01",  # FinalizedFeatures: empty COMPACT_ARRAY
    3: b"\x00",  # ZkMigrationReady: false
}
_EMPTY_TAG_BUFFER = b"\x00"


def read_uvarint(buf: bytes, offset: int) -> tuple[int, int]:
    """Decode an UNSIGNED_VARINT at ``offset``; return (value, next offset)."""
    value = shift = 0
    while True:
        if offset >= len(buf):
            raise ValueError("truncated unsigned varint")
        byte = buf[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
        if shift > 63:
            raise ValueError("unsigned varint longer than 64 bits")


def read_tag_buffer(buf: bytes, offset: int) -> tuple[dict[int, bytes], int]:
    """Decode a TAG_BUFFER at ``offset``; return ({tag: data}, next offset)."""
    count, offset = read_uvarint(buf, offset)
    tags: dict[int, bytes] = {}
    for _ in range(count):
        tag, offset = read_uvarint(buf, offset)
        size, offset = read_uvarint(buf, offset)
        if offset + size > len(buf):
            raise ValueError(f"tagged field {tag} overruns the frame")
        tags[tag] = buf[offset : offset + size]
        offset += size
    return tags, offset


def api_versions_tags_offset(payload: bytes) -> int | None:
    """Offset of the top-level tag buffer in an ApiVersions v3+ response payload.

    ``payload`` is the frame without its int32 length: response header v0 (ApiVersions
    responses never use the flexible header), then error_code int16, api_keys
    COMPACT_ARRAY of {api_key, min_version, max_version int16, TAG_BUFFER},
    throttle_time_ms int32, TAG_BUFFER. Returns None when error_code is not 0 (brokers
    then answer in the v0 layout). Raises ValueError on a malformed body.
    """
    if len(payload) < 6:
        raise ValueError("ApiVersions response shorter than its header")
    (error_code,) = struct.unpack_from(">h", payload, 4)
    if error_code != 0:
        return None
    count_plus_one, offset = read_uvarint(payload, 6)
    for _ in range(max(count_plus_one - 1, 0)):
        offset += 6
        _, offset = read_tag_buffer(payload, offset)
    offset += 4  # throttle_time_ms
    if offset > len(payload):
        raise ValueError("ApiVersions response truncated before its tag buffer")
    return offset


@dataclass(frozen=True)
class Rewrite:
    """One rewritten ApiVersions response: what was dropped."""

    correlation_id: int
    api_version: int
    dropped_tags: dict[int, bytes]

    @property
    def only_defaults(self) -> bool:
        """Whether every dropped field held its spec default (so nothing was lost)."""
        return all(API_VERSIONS_TAG_DEFAULTS.get(t) == d for t, d in self.dropped_tags.items())


def strip_api_versions_tags(payload: bytes) -> tuple[bytes, dict[int, bytes]]:
    """Replace the top-level tag buffer of an ApiVersions v3+ response by an empty one.

    Returns (new payload, dropped {tag: data}); the payload is returned unchanged, with
    ``{}``, when it has an error code or no top-level tagged fields.
    """
    start = api_versions_tags_offset(payload)
    if start is None:
        return payload, {}
    tags, end = read_tag_buffer(payload, start)
    if end != len(payload):
        raise ValueError(f"{len(payload) - end} unexpected bytes after the tag buffer")
    if not tags:
        return payload, {}
    return payload[:start] + _EMPTY_TAG_BUFFER, tags


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next size-prefixed Kafka frame without its length, or None at end of stream."""
    try:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class KafkaProtocolRelay:
    """A loopback TCP relay for Kafka frames, running its own event loop in a thread.

    Use as ``with KafkaProtocolRelay(host, port) as relay: ... relay.bootstrap`` or call
    :meth:`start` / :meth:`stop`. ``port=0`` binds a free port, known after start. The
    relay connects to the upstream broker per client connection, so it may be started
    before the broker (to learn the port to advertise).
    """

    def __init__(
        self, upstream_host: str, upstream_port: int, *, host: str = LOOPBACK, port: int = 0
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host
        self.port = port
        self.rewrites: list[Rewrite] = []
        self.unparsed: list[str] = []  # ApiVersions responses forwarded unchanged, and why
        self.connections = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopped: asyncio.Event | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> Self:
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve(ready, failure))
            finally:
                loop.close()
                ready.set()

        self._thread = threading.Thread(target=run, name="kafka-protocol-relay", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or failure:
            self.stop()
            raise RuntimeError(f"relay did not start: {failure[0] if failure else 'timeout'}")
        return self

    async def _serve(self, ready: threading.Event, failure: list[BaseException]) -> None:
        self._stopped = asyncio.Event()
        try:
            self._server = await asyncio.start_server(self._accept, self.host, self.port)
        except OSError as exc:
            failure.append(exc)
            return
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        await self._stopped.wait()
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def stop(self, timeout: float = 10.0) -> None:
        """Close the listener and every relayed connection; safe to repeat."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stopped.set)
        thread.join(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter):
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        upstream_w: asyncio.StreamWriter | None = None
        try:
            upstream_r, upstream_w = await asyncio.open_connection(*self.upstream)
            requests: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
            pumps = [
                asyncio.create_task(self._pump_requests(client_r, upstream_w, requests)),
                asyncio.create_task(self._pump_responses(upstream_r, client_w, requests)),
            ]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        except OSError:
            pass  # upstream unreachable or a connection reset: just close both sides
        finally:
            for writer in (client_w, upstream_w):
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(OSError, asyncio.CancelledError):
                        await writer.wait_closed()
            self._tasks.discard(task)

    async def _pump_requests(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        requests: dict[int, tuple[int, int]],
    ) -> None:
        while (payload := await _read_frame(reader)) is not None:
            if len(payload) >= 8:
                api_key, api_version, correlation_id = struct.unpack_from(">hhi", payload)
                # Produce with acks=0 gets no response; its entry just stays until close.
                requests[correlation_id] = (api_key, api_version)
            writer.write(_frame(payload))
            await writer.drain()

    async def _pump_responses(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        requests: dict[int, tuple[int, int]],
    ) -> None:
        while (payload := await _read_frame(reader)) is not None:
            if len(payload) >= 4:
                (correlation_id,) = struct.unpack_from(">i", payload)
                api_key, api_version = requests.pop(correlation_id, (-1, -1))
                if api_key == API_VERSIONS and api_version >= FIRST_FLEXIBLE_API_VERSIONS:
                    payload = self._rewrite(payload, correlation_id, api_version)
            writer.write(_frame(payload))
            await writer.drain()

    def _rewrite(self, payload: bytes, correlation_id: int, api_version: int) -> bytes:
        try:
            new_payload, dropped = strip_api_versions_tags(payload)
        except ValueError as exc:
            self.unparsed.append(f"correlation id {correlation_id}: {exc}")
            return payload
        if dropped:
            self.rewrites.append(Rewrite(correlation_id, api_version, dropped))
        return new_payload
