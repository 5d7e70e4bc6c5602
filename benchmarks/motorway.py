"""A simulated motorway for the panel's fast movers (``benchmarks/panel.py``), built with the
SUMO helpers of ``benchmarks/city.py`` and written as a readings CSV into the gitignored
``benchmarks/data/``.

- Network: a straight corridor of ``--km`` km (64) heading north-east, three lanes each way at
  130 km/h, a junction every 8 km with a one-lane ramp pair at 80 km/h (lower priority than
  the carriageway); nodes and edges written as plain XML and joined by ``netconvert``.
- Demand: ``--vehicles`` trips between the corridor's access points (its two ends, weighted
  :data:`END_WEIGHT` times a ramp, as they stand for the rest of the network, and the ramps);
  the departures a day's: :data:`PEAK_SHARE` of them normal around 07:30 (sd 30 min), the
  rest uniform over 05:00-21:00 (with the default 2,000, 853 vehicles enter in 07:00-08:00,
  about 50 an hour outside the peak). The day outlasts the peak by more than the profile's
  spans of up to 8 h: a morning alone released nothing (its readings were still carried when
  the input ended). Cars and :data:`TRUCK_SHARE` trucks (80 km/h), drawn by sumo.
- ``sumo`` car following until 22:00 (23 s for the panel's day; ``--meso``: its mesoscopic
  model) with floating-car data every 1 s (``city.simulate``'s period), converted to readings
  by ``panel_data.fcd_readings``. At 130 km/h a vehicle crosses a resolution-8 cell (about
  0.9 km) in about 25 s, so it leaves about 25 readings there and hundreds in the coarser
  cells the profile merges up to.

Seeded (``--seed``: the trips, duarouter and sumo), so a run gives the same file (the network,
trips and routes already in the folder are reused). The panel's motorway: 1,889,611 readings of
2,000 vehicles in 17 hours (median 882 per vehicle; per vehicle, cell and hour a median of 23 at
R8, 135 at R6, 283 at R5), speeds 104-142 km/h (10th-90th percentile), at most 175 km/h.

Run: ``python benchmarks/motorway.py [--vehicles 2000 --km 64] [--meso]``.
"""

from __future__ import annotations

import argparse
import math
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from city import DATA, DAY, run, simulate, summary, write_trips  # beside this script
from panel_data import fcd_readings, write_csv

ORIGIN = (50.9, 11.0)  # the corridor's south-west end
HEADING_DEG = 35.0  # from east, counter-clockwise
JUNCTION_EVERY_M = 8000.0
RAMP_M = 600.0
MOTORWAY_MS, RAMP_MS, TRUCK_MS = 130 / 3.6, 80 / 3.6, 80 / 3.6
MOTORWAY_LANES = 3
END_WEIGHT = 2.0
PEAK_SHARE = 0.6
TRUCK_SHARE = 0.15
START_H, END_H, PEAK_H, PEAK_SD_H = 5.0, 21.0, 7.5, 0.5


@dataclass(frozen=True)
class Corridor:
    """The corridor's plain nodes (id, x, y) and edges (id, from, to, lanes, m/s, priority),
    and its access points: per position 0..n (junction index), the edge a trip starts on and
    the edge it ends on in each direction."""

    nodes: list[tuple[str, float, float]]
    edges: list[tuple[str, str, str, int, float, int]]
    sections: int  # junctions 0..sections

    def origin_edge(self, at: int) -> str:
        """The edge a trip entering at junction ``at`` starts on: an end's carriageway or the
        junction's on-ramp."""
        if at == 0:
            return "m0e"
        if at == self.sections:
            return f"m{self.sections - 1}w"
        return f"on{at}"

    def destination_edge(self, at: int) -> str:
        """The edge a trip leaving at junction ``at`` ends on."""
        if at == 0:
            return "m0w"
        if at == self.sections:
            return f"m{self.sections - 1}e"
        return f"off{at}"


def corridor(length_m: float) -> Corridor:
    """Junctions 0..n every :data:`JUNCTION_EVERY_M` along the heading (the last at
    ``length_m``), carriageway edges ``m{i}e`` (i to i+1) and ``m{i}w`` (back), and at each
    inner junction a ramp node ``r{i}`` :data:`RAMP_M` to the side with ``on{i}``/``off{i}``."""
    n = max(1, round(length_m / JUNCTION_EVERY_M))
    step = length_m / n
    cos, sin = math.cos(math.radians(HEADING_DEG)), math.sin(math.radians(HEADING_DEG))
    nodes = [(f"j{i}", i * step * cos, i * step * sin) for i in range(n + 1)]
    edges = []
    for i in range(n):
        for name, a, b in ((f"m{i}e", i, i + 1), (f"m{i}w", i + 1, i)):
            edges.append((name, f"j{a}", f"j{b}", MOTORWAY_LANES, MOTORWAY_MS, 13))
    for i in range(1, n):
        _, x, y = nodes[i]
        nodes.append((f"r{i}", x + RAMP_M * sin, y - RAMP_M * cos))  # to the right, heading east
        edges.append((f"on{i}", f"r{i}", f"j{i}", 1, RAMP_MS, 5))
        edges.append((f"off{i}", f"j{i}", f"r{i}", 1, RAMP_MS, 5))
    return Corridor(nodes, edges, sections=n)


def network(folder: Path, length_m: float) -> tuple[Path, Corridor]:
    """The corridor (:func:`corridor`) as a sumo network, built once per folder."""
    lines = corridor(length_m)
    net = folder / "motorway.net.xml"
    if net.exists():
        return net, lines
    nodes, edges = ET.Element("nodes"), ET.Element("edges")
    for name, x, y in lines.nodes:
        ET.SubElement(nodes, "node", id=name, x=f"{x:.2f}", y=f"{y:.2f}", type="priority")
    for name, a, b, lanes, speed, priority in lines.edges:
        ET.SubElement(edges, "edge", id=name, attrib={"from": a, "to": b}, numLanes=str(lanes),
                      speed=f"{speed:.2f}", priority=str(priority))  # fmt: skip
    ET.ElementTree(nodes).write(folder / "plain.nod.xml")
    ET.ElementTree(edges).write(folder / "plain.edg.xml")
    run(["netconvert", "-n", str(folder / "plain.nod.xml"), "-e", str(folder / "plain.edg.xml"),
         "--no-turnarounds", "-o", str(net)])  # fmt: skip
    return net, lines


def access_pairs(lines: Corridor, n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """``n`` (entry, exit) junctions, distinct, each drawn with weight :data:`END_WEIGHT` at
    the two ends and 1 at a ramp."""
    weights = np.ones(lines.sections + 1)
    weights[[0, -1]] = END_WEIGHT
    weights /= weights.sum()
    pairs: list[tuple[int, int]] = []
    while len(pairs) < n:
        a, b = rng.choice(lines.sections + 1, size=2, p=weights)
        if a != b:
            pairs.append((int(a), int(b)))
    return pairs


def departures(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` departure seconds of the morning (module docstring), within START_H-END_H."""
    peak = rng.random(n) < PEAK_SHARE
    at = np.where(peak, rng.normal(PEAK_H, PEAK_SD_H, n), rng.uniform(START_H, END_H, n))
    return 3600.0 * np.clip(at, START_H, END_H)


def motorway_trips(lines: Corridor, n: int,
                   rng: np.random.Generator) -> list[tuple[float, str, str, str]]:  # fmt: skip
    """(depart s, trip id, from edge, to edge) of ``n`` vehicles, one trip each."""
    times = departures(n, rng)
    return [
        (float(t), f"m{k}", lines.origin_edge(a), lines.destination_edge(b))
        for k, (t, (a, b)) in enumerate(zip(times, access_pairs(lines, n, rng), strict=True))
    ]


def add_vehicle_types(trips: Path) -> None:
    """Cars and :data:`TRUCK_SHARE` trucks as sumo's default type (a distribution it draws
    from with its seed)."""
    tree = ET.parse(trips)
    mix = ET.Element("vTypeDistribution", id="DEFAULT_VEHTYPE")
    ET.SubElement(mix, "vType", id="car", vClass="passenger", probability=f"{1 - TRUCK_SHARE}")
    ET.SubElement(mix, "vType", id="truck", vClass="truck", maxSpeed=f"{TRUCK_MS:.2f}",
                  probability=f"{TRUCK_SHARE}")  # fmt: skip
    tree.getroot().insert(0, mix)
    tree.write(trips)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--km", type=float, default=64.0, help="corridor length")
    parser.add_argument("--vehicles", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--meso", action="store_true", help="sumo's mesoscopic model (faster)")
    parser.add_argument("--out", type=Path, help="readings CSV (default: in benchmarks/data/)")
    args = parser.parse_args()
    if args.km <= 0 or args.vehicles <= 0:
        parser.error("--km and --vehicles must be positive")
    name = f"motorway_{args.km:g}_{args.vehicles}{'_meso' if args.meso else ''}"
    folder = DATA / name
    folder.mkdir(parents=True, exist_ok=True)
    out = args.out or DATA / f"{name}.csv"
    rng = np.random.default_rng(args.seed)
    net, lines = network(folder, 1000.0 * args.km)
    trips = motorway_trips(lines, args.vehicles, rng)
    write_trips(trips, folder / "demand.trips.xml")
    add_vehicle_types(folder / "demand.trips.xml")
    end = 3600.0 * (END_H + 1)
    fcd = simulate(net, folder / "demand.trips.xml", folder, args.seed, end, args.meso, period=1)
    count = write_csv(fcd_readings(fcd, ORIGIN, DAY), out)
    print(summary(out, count, len(trips)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
