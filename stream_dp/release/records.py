"""A window's records: the release ids, the common fields, the released or failed window."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stream_dp.config import Settings
from stream_dp.dp.budget_ledger import WindowLoss

#: Version 2 (issue 21): every window summary has ``status``, ``released`` or ``failed``.
SCHEMA_VERSION = 2


#: ``status`` of a window summary: its cells were released / its release computation failed.
RELEASED, FAILED = "released", "failed"


RELEASE_NAMESPACE = uuid.UUID("6f1e2a4c-5b0d-4e7a-9c3f-2d8b1a7e4c90")


_NAMESPACE_BYTES = RELEASE_NAMESPACE.bytes


def rfc3339(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def release_id(app_id: str, window_start: int, resolution: int, cell: str) -> str:
    """Stable id of one (window, cell) release: a re-publication carries the same id.

    ``uuid5(RELEASE_NAMESPACE, "app|window|resolution|cell")`` (RFC 4122 name-based, SHA-1),
    formatted directly: ``uuid.uuid5`` costs several times more, 2,000 times per window."""
    return release_ids(app_id, window_start, resolution, [cell])[0]


def release_ids(app_id: str, window_start: int, resolution: int, cells: list[str]) -> list[str]:
    """:func:`release_id` of each cell of one window (the common prefix hashed once)."""
    prefix = hashlib.sha1(_NAMESPACE_BYTES + f"{app_id}|{window_start}|{resolution}|".encode())
    out = []
    for cell in cells:
        sha = prefix.copy()
        sha.update(cell.encode())
        digest = bytearray(sha.digest()[:16])
        digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
        digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
        h = digest.hex()
        out.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return out


@dataclass(frozen=True)
class WindowRelease:
    """The records of one window: one per released cell, then the window summary."""

    window_start: int
    cells: list[dict[str, Any]]
    summary: dict[str, Any]
    #: Cells each vehicle was counted in (for the budget ledger; never published).
    loss: WindowLoss | None = None
    #: A failed window's ``file:line in function`` of the error (for its log line; not stored).
    error_site: str | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        return [*self.cells, self.summary]

    @property
    def failed(self) -> bool:
        """The window's release computation failed: only its summary is published."""
        return self.summary.get("status") == FAILED

    def to_json_obj(self) -> dict[str, Any]:
        return {"window_start": self.window_start, "cells": self.cells, "summary": self.summary}

    @classmethod
    def from_json_obj(cls, obj: dict[str, Any]) -> WindowRelease:
        return cls(int(obj["window_start"]), list(obj["cells"]), dict(obj["summary"]))


def window_base(settings: Settings, window_start: int) -> dict[str, Any]:
    """The fields every record of the window carries."""
    return {
        "schema_version": SCHEMA_VERSION,
        "window_start": rfc3339(window_start),
        "window_end": rfc3339(window_start + settings.window_seconds),
        "resolution": settings.resolution,
        "epsilon": settings.epsilon,
    }
