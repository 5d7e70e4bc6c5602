"""Readings for the panel (``benchmarks/panel.py``) from raw files: SUMO floating-car data and
aircraft point files, in the project's reading fields (``vehicle_id, ts, lat, lon, speed``,
speed in km/h; ``stream_dp/sources/``).

- :func:`fcd_readings` streams a SUMO ``--fcd-output`` file (plain or gzipped XML) and maps each
  vehicle's x/y metres to latitude/longitude around an origin with a local equirectangular
  projection (north = +y, east = +x), its speed from m/s to km/h; a trip id ``NAME~k`` is the
  vehicle ``NAME`` (one vehicle's several trips).
- :func:`aircraft_readings` reads a tracktable point CSV (``object_id, timestamp, lon, lat,
  ...``) and derives each fix's speed from the great-circle distance to the same flight's
  previous fix (the first fix takes the following segment's speed, as ``sources/traj.py``).
- :func:`surveillance_readings` reads a gzipped JSON list of ADS-B state vectors (the
  ``traffic`` wheel's sample collections: ``icao24, timestamp`` in ms, ``latitude,
  longitude, groundspeed`` in knots, ...); the transponder address is the vehicle, a state
  with no position or speed is skipped.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from stream_dp.sources.traj import EARTH_RADIUS_KM, haversine_km

EARTH_RADIUS_M = 1000.0 * EARTH_RADIUS_KM
MS_TO_KMH = 3.6
KNOT_TO_KMH = 1.852
TRIP_SEPARATOR = "~"


def _open(path: str | Path) -> IO[bytes]:
    path = Path(path)
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def to_lat_lon(x: float, y: float, origin: tuple[float, float]) -> tuple[float, float]:
    """Latitude and longitude (degrees) of the point ``x`` m east and ``y`` m north of
    ``origin`` (lat, lon), local equirectangular projection."""
    lat0, lon0 = origin
    lat = lat0 + math.degrees(y / EARTH_RADIUS_M)
    lon = lon0 + math.degrees(x / (EARTH_RADIUS_M * math.cos(math.radians(lat0))))
    return lat, lon


def fcd_readings(
    path: str | Path, origin: tuple[float, float], day_start: float
) -> Iterator[dict[str, Any]]:
    """The readings of a SUMO FCD file, in time order: ``ts`` = ``day_start`` + the step's
    time; elements are cleared as they are read (the file may hold millions)."""
    with _open(path) as stream:
        time = 0.0
        for event, element in ET.iterparse(stream, events=("start", "end")):
            if event == "start":
                if element.tag == "timestep":
                    time = float(element.get("time", "0"))
                continue
            if element.tag == "vehicle":
                lat, lon = to_lat_lon(float(element.get("x")), float(element.get("y")), origin)
                yield {
                    "vehicle_id": element.get("id").split(TRIP_SEPARATOR)[0],
                    "ts": day_start + time,
                    "lat": lat,
                    "lon": lon,
                    "speed": MS_TO_KMH * float(element.get("speed")),
                }
            elif element.tag == "timestep":
                element.clear()


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()


def aircraft_fixes(path: str | Path) -> dict[str, list[tuple[float, float, float]]]:
    """Each object's fixes (ts, lat, lon) in time order, from a point CSV whose first four
    fields are ``object_id, timestamp, longitude, latitude`` (``#`` lines skipped; rows without
    a position skipped; a fix not after the previous one dropped)."""
    flights: dict[str, list[tuple[float, float, float]]] = {}
    with Path(path).open(newline="", encoding="utf-8") as stream:
        for row in csv.reader(stream):
            if not row or row[0].startswith("#") or row[0] == "object_id" or len(row) < 4:
                continue
            try:
                fix = (_epoch(row[1]), float(row[3]), float(row[2]))
            except ValueError:
                continue
            flights.setdefault(row[0], []).append(fix)
    for name, fixes in flights.items():
        fixes.sort(key=lambda fix: fix[0])  # stable: a repeated time keeps the first row
        kept = [fixes[0]]
        for fix in fixes[1:]:
            if fix[0] > kept[-1][0]:
                kept.append(fix)
        flights[name] = kept
    return flights


def aircraft_readings(path: str | Path) -> list[dict[str, Any]]:
    """Readings of an aircraft point CSV (:func:`aircraft_fixes`) in time order, each fix's
    speed (km/h) the distance from the previous fix over the time between them; a flight with
    one fix has no speed and is dropped."""
    readings = []
    for name, fixes in aircraft_fixes(path).items():
        if len(fixes) < 2:
            continue
        speeds = [
            haversine_km(a[1], a[2], b[1], b[2]) / ((b[0] - a[0]) / 3600.0)
            for a, b in zip(fixes, fixes[1:], strict=False)
        ]
        for (ts, lat, lon), speed in zip(fixes, [speeds[0], *speeds], strict=True):
            readings.append({"vehicle_id": name, "ts": ts, "lat": lat, "lon": lon, "speed": speed})
    readings.sort(key=lambda r: r["ts"])
    return readings


def surveillance_readings(path: str | Path) -> list[dict[str, Any]]:
    """Readings of a gzipped JSON list of ADS-B state vectors (module docstring) in time
    order, speed in km/h."""
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        states = json.load(stream)
    readings = [
        {"vehicle_id": s["icao24"], "ts": s["timestamp"] / 1000.0, "lat": s["latitude"],
         "lon": s["longitude"], "speed": s["groundspeed"] * KNOT_TO_KMH}
        for s in states
        if None not in (s.get("icao24"), s.get("latitude"), s.get("longitude"),
                        s.get("groundspeed"))
    ]  # fmt: skip
    readings.sort(key=lambda r: r["ts"])
    return readings


def write_csv(readings: Iterator[dict[str, Any]] | list[dict[str, Any]], path: Path) -> int:
    """Write ``readings`` as a readings CSV (``stream_dp/sources/tabular.py``); their count."""
    count = 0
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["vehicle_id", "ts", "lat", "lon", "speed"])
        for r in readings:
            writer.writerow(
                [r["vehicle_id"], f"{r['ts']:.0f}", f"{r['lat']:.6f}", f"{r['lon']:.6f}",
                 f"{r['speed']:.2f}"]
            )  # fmt: skip
            count += 1
    return count
