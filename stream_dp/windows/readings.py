"""Input readings: the wire format, validation, clamping and cell/window assignment.

A message value is one JSON reading object or a JSON array of them (many readings per
message amortise per-message cost). A reading has ``vehicle_id`` (string; an integer is
accepted and turned into its decimal string), ``ts`` (epoch seconds or RFC 3339),
``lat``, ``lon`` (degrees) and ``speed`` (km/h); other fields are ignored. Speeds are
clamped to ``[0, U]`` before anything else; non-finite values and out-of-range
coordinates make the reading invalid. Every rejection carries a code of
:class:`~stream_dp.windows.reject_reasons.RejectReason` (the dead-letter ``reason`` header,
the offline rejects file) and a detail naming the field.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import h3
import orjson
from pydantic import BaseModel, ConfigDict, Field

from stream_dp.windows.reject_reasons import RejectReason

MAX_VEHICLE_ID_LENGTH = 256
# Event times are epoch seconds in [0, LATEST_TS]: 9000-01-01T00:00:00Z leaves any window's
# end far inside the range Python's datetime can format (year 9999).
LATEST_TS = 221845392000.0


class Reading(BaseModel):
    """Documentation model of one input reading (the hot path validates without it)."""

    model_config = ConfigDict(extra="ignore")

    vehicle_id: str = Field(min_length=1, max_length=MAX_VEHICLE_ID_LENGTH)
    ts: float | str = Field(description="Epoch seconds or an RFC 3339 timestamp.")
    lat: float = Field(ge=-90, le=90)
    lon: float = Field(ge=-180, le=180)
    speed: float = Field(description="km/h; clamped to [0, U].")


class InvalidReading(ValueError):
    """Why a reading (or a whole message) was rejected; goes to the dead-letter topic.

    ``reason`` is the code of :class:`RejectReason`; ``str(exc)`` is the detail naming the
    field."""

    def __init__(self, reason: RejectReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass
class ParsedBatch:
    """Valid readings of one batch, column-wise, in arrival order."""

    vehicle: list[str] = field(default_factory=list)
    ts: list[float] = field(default_factory=list)
    cell: list[str] = field(default_factory=list)
    speed: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts)


def parse_timestamp(value: Any) -> float:
    """Epoch seconds from a number or an RFC 3339 string (naive strings are UTC)."""
    if isinstance(value, bool):
        raise InvalidReading(RejectReason.BAD_TS, "ts must be epoch seconds or RFC 3339")
    if isinstance(value, int | float):
        try:
            ts = float(value)
        except OverflowError:
            raise InvalidReading(RejectReason.BAD_TS, "ts is not finite") from None
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidReading(
                RejectReason.BAD_TS, f"ts is not RFC 3339: {value[:40]!r}"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        ts = parsed.timestamp()
    else:
        raise InvalidReading(RejectReason.BAD_TS, "ts must be epoch seconds or RFC 3339")
    if not math.isfinite(ts):
        raise InvalidReading(RejectReason.BAD_TS, "ts is not finite")
    return ts


def _require(obj: dict[str, Any], name: str) -> None:
    if name not in obj:
        raise InvalidReading(RejectReason.MISSING_FIELD, f"{name} is missing")


def _number(obj: dict[str, Any], name: str) -> float:
    _require(obj, name)
    value = obj[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidReading(RejectReason.NOT_A_NUMBER, f"{name} must be a number")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidReading(RejectReason.NOT_A_NUMBER, f"{name} is not finite") from None
    if not math.isfinite(number):
        raise InvalidReading(RejectReason.NOT_A_NUMBER, f"{name} is not finite")
    return number


def _vehicle_id(obj: dict[str, Any]) -> str:
    _require(obj, "vehicle_id")
    value = obj["vehicle_id"]
    if isinstance(value, bool):
        raise InvalidReading(RejectReason.BAD_VEHICLE_ID, "vehicle_id must be a string")
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise InvalidReading(RejectReason.BAD_VEHICLE_ID, "vehicle_id must be a non-empty string")
    if len(value) > MAX_VEHICLE_ID_LENGTH:
        raise InvalidReading(
            RejectReason.BAD_VEHICLE_ID, f"vehicle_id longer than {MAX_VEHICLE_ID_LENGTH}"
        )
    if "\x00" in value:
        raise InvalidReading(
            RejectReason.BAD_VEHICLE_ID, "vehicle_id must not contain NUL characters"
        )
    return value


def decode_message(value: bytes | None) -> list[Any]:
    """The reading objects of one message value; raises InvalidReading for bad JSON."""
    if not value:
        raise InvalidReading(RejectReason.EMPTY_MESSAGE, "empty message")
    try:
        decoded = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise InvalidReading(RejectReason.NOT_JSON, f"not JSON: {exc.msg}") from None
    if isinstance(decoded, list):
        if not decoded:
            raise InvalidReading(RejectReason.EMPTY_MESSAGE, "empty array")
        return decoded
    return [decoded]


class ReadingValidator:
    """Validates, clamps and assigns cells.

    Event times must lie in ``[0, latest_ts]``. With ``max_future_seconds`` set, the
    latest accepted time is the wall clock plus that tolerance, read again at every
    :meth:`refresh_clock` (once per batch): one reading stamped far in the future would
    otherwise move the watermark ahead and make every later true reading late."""

    def __init__(
        self,
        upper: float,
        resolution: int,
        max_future_seconds: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.upper = float(upper)
        self.resolution = resolution
        self.max_future_seconds = max_future_seconds
        self.clock = clock
        self.latest_ts = LATEST_TS
        self.refresh_clock()

    def refresh_clock(self) -> None:
        """Re-read the wall clock for the future-time limit (call once per batch)."""
        if self.max_future_seconds is not None:
            self.latest_ts = min(LATEST_TS, self.clock() + self.max_future_seconds)

    # Performance (benchmarks/ingest.py --cpu-profile): the fast path below took the in-process
    # ingest from ~159,000 to ~199,000 readings/s.
    def add(self, obj: Any, batch: ParsedBatch) -> None:
        """Append one reading to ``batch`` or raise InvalidReading.

        Most readings take the fast path: plain JSON floats, epoch seconds, a short string
        id. Anything else goes through the field-by-field checks, which name the problem."""
        if type(obj) is dict:
            vehicle = obj.get("vehicle_id")
            ts = obj.get("ts")
            lat = obj.get("lat")
            lon = obj.get("lon")
            speed = obj.get("speed")
            if (
                type(vehicle) is str
                and 0 < len(vehicle) <= MAX_VEHICLE_ID_LENGTH
                and "\x00" not in vehicle
                and (type(ts) is float or (type(ts) is int and -(2**53) < ts < 2**53))
                and type(lat) is float
                and type(lon) is float
                and (type(speed) is float or (type(speed) is int and -(2**53) < speed < 2**53))
                and 0 <= ts <= self.latest_ts  # also false for nan; inf is out of range
                and -90.0 <= lat <= 90.0
                and -180.0 <= lon <= 180.0
                and speed - speed == 0
            ):
                upper = self.upper
                batch.vehicle.append(vehicle)
                batch.ts.append(float(ts))
                batch.cell.append(h3.latlng_to_cell(lat, lon, self.resolution))
                batch.speed.append(
                    0.0 if speed < 0.0 else (upper if speed > upper else float(speed))
                )
                return
        self._add_checked(obj, batch)

    def _add_checked(self, obj: Any, batch: ParsedBatch) -> None:
        if not isinstance(obj, dict):
            raise InvalidReading(RejectReason.NOT_AN_OBJECT, "a reading must be a JSON object")
        vehicle = _vehicle_id(obj)
        _require(obj, "ts")
        ts = parse_timestamp(obj["ts"])
        if ts < 0:
            raise InvalidReading(RejectReason.TS_OUT_OF_RANGE, "ts is before 1970-01-01T00:00:00Z")
        if ts > self.latest_ts:
            if self.latest_ts < LATEST_TS:
                raise InvalidReading(
                    RejectReason.TS_IN_FUTURE,
                    f"ts is more than {self.max_future_seconds:g} s ahead of the wall clock",
                )
            raise InvalidReading(RejectReason.TS_OUT_OF_RANGE, "ts is after 9000-01-01T00:00:00Z")
        lat = _number(obj, "lat")
        lon = _number(obj, "lon")
        if not -90.0 <= lat <= 90.0:
            raise InvalidReading(RejectReason.LAT_OUT_OF_RANGE, "lat out of range [-90, 90]")
        if not -180.0 <= lon <= 180.0:
            raise InvalidReading(RejectReason.LON_OUT_OF_RANGE, "lon out of range [-180, 180]")
        speed = _number(obj, "speed")
        speed = 0.0 if speed < 0.0 else (self.upper if speed > self.upper else speed)
        batch.vehicle.append(vehicle)
        batch.ts.append(ts)
        batch.cell.append(h3.latlng_to_cell(lat, lon, self.resolution))
        batch.speed.append(speed)
