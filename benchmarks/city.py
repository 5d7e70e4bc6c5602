"""A simulated city for the panel (``benchmarks/panel.py``), built with Debian's ``sumo`` and
``sumo-tools`` (``SUMO_HOME=/usr/share/sumo``), written as a readings CSV into the gitignored
``benchmarks/data/``.

- Network: ``netgenerate`` grid of ``--grid N`` x N junctions 400 m apart (10 km x 10 km at
  26), local streets of one lane at 30 km/h, every fifth street an arterial of two lanes at
  60 km/h; ``netconvert --tls.guess`` puts traffic lights where an arterial meets a street
  (the incoming speeds sum past the threshold there, not at two local streets).
- Demand: ``randomTrips.py`` origin-destination pairs (length-weighted, >= 2 km apart); each
  commuter drives out in the morning peak (normal around 08:00, sd 1 h) and back on the
  reverse edges in the evening peak (around 17:30, sd 1.2 h); other vehicles make one trip in
  the day (normal around 13:00, sd 4 h); ``duarouter`` routes them.
- ``sumo --fcd-output`` every 10 s (``--device.fcd.period``), converted to readings around
  Berlin (``panel_data.fcd_readings``): a commuter's two trips are one vehicle. ``--meso``:
  sumo's mesoscopic model (queues per 100 m segment; the panel's city: 2 minutes, where car
  following had simulated only the day's first 8 hours in 16 minutes on 2 shared cores).
- ``--fleet``: a newcomer's small fleet instead, 200 vans on the same streets for 6 hours
  (09:00-15:00), each making a trip every 30 minutes.

Seeded (``--seed``: randomTrips, duarouter, sumo and the departure times), so a run gives the
same file (the network, trips and routes already in the folder are reused). Prints the counts
and the time each step took. The panel's city: 1,952,750 readings of 20,000 vehicles in 25
hours, about 8 minutes with ``--meso`` (duarouter 5 of them).

Run: ``python benchmarks/city.py [--commuters 14000 --others 6000 --grid 26] [--meso]
[--fleet]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from panel_data import TRIP_SEPARATOR, fcd_readings, write_csv  # beside this script

SUMO_HOME = "/usr/share/sumo"
DATA = Path(__file__).parent / "data"
BERLIN = (52.47, 13.33)  # the grid's south-west corner
DAY = datetime(2026, 6, 1, tzinfo=UTC).timestamp()
SPACING_M = 400.0
ARTERIAL_EVERY = 5
LOCAL_MS, ARTERIAL_MS = 30 / 3.6, 60 / 3.6


def run(args: list[str]) -> None:
    """Run one tool quietly; its stderr if it fails."""
    start = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, env=_env())
    if done.returncode:
        sys.exit(f"{args[0]} failed: {done.stderr[-2000:]}")
    print(f"  {Path(args[0]).name if args[0] != sys.executable else args[1]}: "
          f"{time.monotonic() - start:.0f} s", flush=True)  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "SUMO_HOME": os.environ.get("SUMO_HOME", SUMO_HOME)}


def network(folder: Path, grid: int, seed: int) -> Path:
    """The grid with its arterials and traffic lights (module docstring)."""
    net = folder / "city.net.xml"
    if net.exists():  # seeded: the same network
        return net
    plain = folder / "plain"
    run(["netgenerate", "--grid", "--grid.number", str(grid), "--grid.length", str(SPACING_M),
         "--default.lanenumber", "1", "--default.speed", f"{LOCAL_MS:.2f}", "--seed", str(seed),
         "-o", str(folder / "grid.net.xml"), "--plain-output-prefix", str(plain)])  # fmt: skip
    nodes = {
        n.get("id"): (float(n.get("x")), float(n.get("y")))
        for n in ET.parse(f"{plain}.nod.xml").getroot().iter("node")
    }
    edges = ET.parse(f"{plain}.edg.xml")
    for edge in edges.getroot().iter("edge"):
        (x1, y1), (x2, _) = nodes[edge.get("from")], nodes[edge.get("to")]
        line = x1 / SPACING_M if x1 == x2 else y1 / SPACING_M
        if round(line) % ARTERIAL_EVERY == 0:
            edge.set("numLanes", "2")
            edge.set("speed", f"{ARTERIAL_MS:.2f}")
    edges.write(f"{plain}.edg.xml")
    threshold = (2 * ARTERIAL_MS + 2 * LOCAL_MS + 4 * LOCAL_MS) / 2  # between the two sums
    run(["netconvert", "-n", f"{plain}.nod.xml", "-e", f"{plain}.edg.xml", "--tls.guess",
         "--tls.guess.threshold", f"{threshold:.1f}", "-o", str(net)])  # fmt: skip
    lights = sum(
        1 for j in ET.parse(net).getroot().iter("junction") if j.get("type") == "traffic_light"
    )
    print(f"  {len(nodes)} junctions, {lights} with traffic lights", flush=True)
    return net


def od_pairs(net: Path, folder: Path, n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` origin-destination edge pairs from randomTrips.py (module docstring)."""
    trips = folder / "od.trips.xml"
    if not trips.exists():
        run([sys.executable, f"{SUMO_HOME}/tools/randomTrips.py", "-n", str(net), "-o", str(trips),
             "-b", "0", "-e", str(n), "-p", "1", "-l", "--min-distance", "2000",
             "--seed", str(seed), "--fringe-factor", "1"])  # fmt: skip
    return [(t.get("from"), t.get("to")) for t in ET.parse(trips).getroot().iter("trip")]


def reverse_edges(net: Path) -> dict[str, str]:
    """Each street edge's opposite edge (same junctions, other way)."""
    by_ends = {}
    for edge in ET.parse(net).getroot().iter("edge"):
        if edge.get("function") != "internal":
            by_ends[(edge.get("from"), edge.get("to"))] = edge.get("id")
    return {e: by_ends[(b, a)] for (a, b), e in by_ends.items() if (b, a) in by_ends}


def city_trips(pairs: list[tuple[str, str]], rev: dict[str, str], commuters: int,
               rng: np.random.Generator) -> list[tuple[float, str, str, str]]:  # fmt: skip
    """(depart s, trip id, from, to): commuters out and back, the rest once (docstring)."""
    trips = []
    for i, (a, b) in enumerate(pairs):
        if i < commuters:
            out = float(np.clip(rng.normal(8 * 3600, 3600), 4 * 3600, 12 * 3600))
            back = float(np.clip(rng.normal(17.5 * 3600, 1.2 * 3600), out + 4 * 3600, 23.5 * 3600))
            trips.append((out, f"c{i}{TRIP_SEPARATOR}1", a, b))
            if a in rev and b in rev:
                trips.append((back, f"c{i}{TRIP_SEPARATOR}2", rev[b], rev[a]))
        else:
            depart = float(np.clip(rng.normal(13 * 3600, 4 * 3600), 0, 23.75 * 3600))
            trips.append((depart, f"o{i}", a, b))
    return trips


def fleet_trips(pairs: list[tuple[str, str]], vans: int,
                rng: np.random.Generator) -> list[tuple[float, str, str, str]]:  # fmt: skip
    """A trip every 30 minutes from 09:00 to 15:00 for each of ``vans`` vans."""
    per_van = 12
    trips = []
    for v in range(vans):
        offset = float(rng.uniform(0, 1800))
        for k in range(per_van):
            a, b = pairs[v * per_van + k]
            trips.append((9 * 3600 + offset + 1800 * k, f"f{v}{TRIP_SEPARATOR}{k}", a, b))
    return trips


def write_trips(trips: list[tuple[float, str, str, str]], path: Path) -> None:
    root = ET.Element("routes")
    for depart, name, a, b in sorted(trips):
        ET.SubElement(root, "trip", id=name, depart=f"{depart:.0f}", attrib={"from": a, "to": b},
                      departLane="best", departSpeed="max")  # fmt: skip
    ET.ElementTree(root).write(path)


def simulate(net: Path, trips: Path, folder: Path, seed: int, end: float, meso: bool,
             period: float = 10.0) -> Path:  # fmt: skip
    """duarouter, then sumo (``meso``: its mesoscopic model, queues per 100 m segment instead
    of car following; positions at segment resolution) with floating-car data every
    ``period`` s until ``end`` (s)."""
    routes, fcd = folder / "routes.rou.xml", folder / f"fcd{'_meso' if meso else ''}.xml.gz"
    if not routes.exists():
        run(["duarouter", "-n", str(net), "--route-files", str(trips), "-o", str(routes),
             "--seed", str(seed), "--ignore-errors", "--no-warnings", "--no-step-log"])  # fmt: skip
    run(["sumo", "-n", str(net), "-r", str(routes), "--fcd-output", str(fcd),
         "--device.fcd.period", f"{period:g}", "--fcd-output.attributes", "x,y,speed",
         "--seed", str(seed),
         "--end", f"{end:.0f}", "--no-step-log", "--no-warnings", "--time-to-teleport", "300",
         "--ignore-route-errors", *(["--mesosim"] if meso else [])])  # fmt: skip
    return fcd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=int, default=26, help="junctions per side, 400 m apart")
    parser.add_argument("--commuters", type=int, default=14000)
    parser.add_argument("--others", type=int, default=6000)
    parser.add_argument("--fleet", action="store_true", help="200 vans for 6 hours instead")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--meso", action="store_true", help="sumo's mesoscopic model (faster)")
    parser.add_argument("--out", type=Path, help="readings CSV (default: in benchmarks/data/)")
    args = parser.parse_args()
    name = "fleet" if args.fleet else f"city_{args.grid}_{args.commuters}_{args.others}"
    folder = DATA / name
    name += "_meso" if args.meso else ""
    folder.mkdir(parents=True, exist_ok=True)
    out = args.out or DATA / f"{name}.csv"
    rng = np.random.default_rng(args.seed)
    net = network(folder, args.grid, args.seed)
    vans = 200
    n = vans * 12 if args.fleet else args.commuters + args.others
    pairs = od_pairs(net, folder, n, args.seed)
    trips = fleet_trips(pairs, vans, rng) if args.fleet else city_trips(
        pairs, reverse_edges(net), args.commuters, rng)  # fmt: skip
    write_trips(trips, folder / "demand.trips.xml")
    last = max(depart for depart, *_ in trips)
    fcd = simulate(net, folder / "demand.trips.xml", folder, args.seed, last + 2 * 3600, args.meso)
    count = write_csv(fcd_readings(fcd, BERLIN, DAY), out)
    print(summary(out, count, len(trips)), flush=True)
    return 0


def summary(path: Path, count: int, trips: int) -> str:
    """Vehicles, readings and hours of the written file."""
    data = np.loadtxt(path, delimiter=",", skiprows=1, usecols=1)
    with path.open() as f:
        next(f)
        vehicles = len({line.split(",", 1)[0] for line in f})
    hours = len(np.unique((data // 3600).astype(np.int64)))
    return f"{path}: {count:,} readings, {vehicles:,} vehicles ({trips:,} trips), {hours} hours"


if __name__ == "__main__":
    sys.exit(main())
