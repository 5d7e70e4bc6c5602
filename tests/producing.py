"""Helpers of the replay producer's tests (unit and integration)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from stream_dp import cli
from tests.support.readings import vehicle_readings


def three_vehicles(count: int) -> list[dict[str, Any]]:
    """Interleaved readings of three vehicles, one per second, in event-time order."""
    return vehicle_readings(count, vehicles=3, interval=1.0, start=1_700_000_000, round_robin=True)


def produce_cli(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    """``stream-dp produce ARGV`` in process (the command line builds that parser alone)."""
    return cli.main(["produce", *argv])


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True
