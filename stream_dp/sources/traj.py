"""Tracktable ``.traj`` files: one trajectory per line, speeds derived from consecutive fixes.

Line layout (comma separated)::

    *T*, uuid, domain, N, 0, *P*, domain, 2, 1, 1, P, [P x (name, type)],
    N x (object_id, timestamp, lon, lat, [P property values])

so a line has ``11 + 2P + N (4 + P)`` fields; point properties are read past and ignored.
Timestamps (``2020-12-01 11:31:39``) are UTC. The vehicle id is the object id (the MMSI for AIS).

Speed (km/h) of a fix = haversine distance from the previous fix of the same trajectory divided
by the time between them. The first fix takes the speed of the segment that follows it, so every
position is kept; a trajectory left with one fix has no speed and is dropped. A fix whose time is
not after the previous kept fix is skipped as a duplicate. Speeds are not clamped here.
"""

from __future__ import annotations

import math
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from stream_dp.sources import (
    LineTally,
    Numbered,
    SourceError,
    is_utf8,
    not_utf8_error,
    text_lines,
)
from stream_dp.windows.reject_reasons import RejectReason

EARTH_RADIUS_KM = 6371.0088  # IUGG mean Earth radius
HEADER_FIELDS = 11
POINT_FIELDS = 4


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in km between two points given in degrees."""
    phi1, phi2 = math.radians(lat1), math.radians(lat2)
    dphi = phi2 - phi1
    dlmb = math.radians(lon2 - lon1)
    a = math.sin(dphi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(dlmb / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(a)))


def _epoch(stamp: str) -> float:
    moment = datetime.fromisoformat(stamp)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _count(fields: list[str], index: int, what: str) -> int:
    try:
        value = int(fields[index])
    except ValueError:
        raise ValueError(
            f"{what} (field {index + 1}) is not an integer: {fields[index]!r}"
        ) from None
    if value < 0:
        raise ValueError(f"{what} (field {index + 1}) is negative: {value}")
    return value


def _fixes(fields: list[str]) -> list[tuple[str, float, float, float]]:
    """``(object_id, ts, lat, lon)`` of each point of a split line; ``ValueError`` if malformed."""
    if len(fields) < HEADER_FIELDS or fields[0] != "*T*" or fields[5] != "*P*":
        raise ValueError("not a tracktable trajectory line (expected '*T*' ... '*P*' header)")
    n_points = _count(fields, 3, "point count")
    if _count(fields, 4, "trajectory property count") != 0:
        raise ValueError("trajectory properties are not supported")
    if fields[7:10] != ["2", "1", "1"]:
        raise ValueError(
            f"unsupported point layout {fields[7:10]} (expected 2 coordinates, id, time)"
        )
    n_props = _count(fields, 10, "point property count")
    start = HEADER_FIELDS + 2 * n_props
    width = POINT_FIELDS + n_props
    expected = start + n_points * width
    if len(fields) != expected:
        raise ValueError(
            f"{len(fields)} fields, expected {expected} for {n_points} points "
            f"({HEADER_FIELDS} header + {2 * n_props} property names + {width} per point)"
        )
    fixes = []
    for offset in range(start, expected, width):
        object_id, stamp, lon, lat = fields[offset : offset + POINT_FIELDS]
        object_id = object_id.strip()
        if not object_id:
            raise ValueError(f"empty object id at field {offset + 1}")
        lon_value, lat_value = float(lon), float(lat)
        if not (math.isfinite(lon_value) and math.isfinite(lat_value)):
            raise ValueError(f"non-finite coordinates at field {offset + 3}")
        fixes.append((object_id, _epoch(stamp), lat_value, lon_value))
    return fixes


def trajectory_readings(fixes: list[tuple[str, float, float, float]]) -> list[dict]:
    """Readings with derived speeds for one trajectory's ``(object_id, ts, lat, lon)`` fixes."""
    kept: list[tuple[str, float, float, float]] = []
    for fix in fixes:
        if kept and fix[1] <= kept[-1][1]:
            continue  # duplicate or out-of-order fix: no positive time delta
        kept.append(fix)
    if len(kept) < 2:
        return []
    speeds = [
        haversine_km(a[2], a[3], b[2], b[3]) / ((b[1] - a[1]) / 3600.0)
        for a, b in zip(kept, kept[1:], strict=False)
    ]
    speeds.insert(0, speeds[0])
    return [
        {"vehicle_id": vid, "ts": ts, "lat": lat, "lon": lon, "speed": speed}
        for (vid, ts, lat, lon), speed in zip(kept, speeds, strict=True)
    ]


def numbered_traj(path: str | Path, tally: LineTally | None = None) -> list[Numbered]:
    """Every bad line of a ``.traj`` (or ``.traj.gz``) file as a :class:`SourceError`, in
    file order, then its readings with their trajectory's line, sorted by
    ``(ts, vehicle_id)``; blank lines are counted in ``tally``."""
    path = Path(path)
    tally = LineTally() if tally is None else tally
    bad: list[Numbered] = []
    readings: list[tuple[int, dict]] = []
    with closing(text_lines(path)) as lines:
        for line_number, line in enumerate(lines, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                tally.blank += 1
                continue
            if not is_utf8(line):
                bad.append((line_number, not_utf8_error(path, line_number)))
                continue
            try:
                fixes = _fixes(line.split(","))
                if len({fix[0] for fix in fixes}) > 1:
                    raise ValueError("trajectory mixes several object ids")
            except ValueError as exc:
                error = SourceError(path, line_number, str(exc), RejectReason.MALFORMED_ROW)
                bad.append((line_number, error))
                continue
            readings.extend((line_number, r) for r in trajectory_readings(fixes))
    readings.sort(key=lambda item: (item[1]["ts"], item[1]["vehicle_id"]))
    return [*bad, *readings]


def read_traj(path: str | Path) -> list[dict]:
    """All readings of a ``.traj`` (or ``.traj.gz``) file, sorted by ``(ts, vehicle_id)``;
    raises the first bad line's :class:`SourceError`."""
    numbered = numbered_traj(path)
    if numbered and isinstance(numbered[0][1], SourceError):
        raise numbered[0][1]
    return [reading for _line, reading in numbered]  # type: ignore[misc]
