"""The one generator of synthetic vehicle readings used by the tests and the benchmarks."""

from __future__ import annotations

import random
from typing import Any

HOUR = 3600
#: An hour boundary near 2023-11-14, the default start of generated readings.
START = 1_700_000_000 // HOUR * HOUR
#: South-west corner (lat, lon) of the box around New York the vehicles are placed in.
NEW_YORK = (40.70, -74.02)


def vehicle_readings(
    count: int,
    *,
    vehicles: int = 20,
    interval: float = 12.0,
    start: float = START,
    seed: int = 1,
    spread: float = 0.08,
    speeds: tuple[float, float] = (0.0, 65.0),
    lanes: bool = False,
    corner: tuple[float, float] = NEW_YORK,
    round_robin: bool = False,
) -> list[dict[str, Any]]:
    """``count`` readings in event-time order, one every ``interval`` seconds from ``start``.

    Each comes from a vehicle ``veh-<v>`` drawn uniformly among ``vehicles`` (in turn with
    ``round_robin``), at a uniform
    position in a ``spread``-degree box at ``corner`` (with ``lanes``, the box of vehicle
    ``v`` is shifted by ``0.01 * (v % 5, v % 3)`` degrees, so vehicles keep to their own
    few cells), with a speed uniform in ``speeds`` (a range past [0, U] exercises clamping).
    Seeded: the same arguments give the same readings.
    """
    rng = random.Random(seed)
    lat0, lon0 = corner
    out = []
    for i in range(count):
        v = i % vehicles if round_robin else rng.randrange(vehicles)
        lat, lon = (lat0 + 0.01 * (v % 5), lon0 + 0.01 * (v % 3)) if lanes else (lat0, lon0)
        out.append(
            {
                "vehicle_id": f"veh-{v}",
                "ts": start + i * interval,
                "lat": lat + rng.uniform(0, spread),
                "lon": lon + rng.uniform(0, spread),
                "speed": rng.uniform(*speeds),
            }
        )
    return out


def hourly_readings(
    vehicles: int, hours: int, per_hour: int, *, start: float = START, seed: int = 1, **kwargs: Any
) -> list[dict[str, Any]]:
    """:func:`vehicle_readings` spread evenly over ``hours`` whole hours, ``per_hour`` each."""
    return vehicle_readings(
        hours * per_hour, vehicles=vehicles, interval=HOUR / per_hour, start=start, seed=seed,
        **kwargs,
    )  # fmt: skip


def unclamped_readings(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` readings of 20 vehicles, 3 s apart from a time that is no hour boundary,
    with speeds in [-5, 90]: some outside [0, U], for the clamping and the range checks."""
    return vehicle_readings(
        count, interval=3, start=1_700_000_000, seed=seed, spread=0.05, speeds=(-5.0, 90.0),
        corner=(40.7, -74.0),
    )  # fmt: skip


def synthetic_readings(
    n_vehicles: int, hours: int, per_hour: int, start: float = START, seed: int = 1
) -> list[dict[str, Any]]:
    """Vehicles keeping to a few H3 res-7 cells of New York each, in event-time order."""
    return hourly_readings(
        n_vehicles, hours, per_hour, start=start, seed=seed, spread=0.02, speeds=(0.0, 80.0),
        lanes=True,
    )  # fmt: skip


def depot_readings(start: float = START, seed: int = 2) -> list[dict[str, Any]]:
    """Issue 21's depot: in hour 1 one cell holds 8 buses reporting every 30 s (100-121
    readings each) among 20 cars with 3 readings each; then three ordinary hours of the same
    28 vehicles moving around (:func:`synthetic_readings`). In event-time order."""
    rng = random.Random(seed)
    depot: list[dict[str, Any]] = []
    counts = [100 + 3 * b for b in range(8)]  # 100, 103, ..., 121
    vehicles = [(f"bus-{b}", n) for b, n in enumerate(counts)]
    vehicles += [(f"car-{c}", 3) for c in range(20)]
    for vehicle, n in vehicles:
        for i in range(n):
            depot.append(
                {
                    "vehicle_id": vehicle,
                    "ts": start + i * (HOUR / n) + rng.uniform(0, 1),
                    "lat": 40.7128 + rng.uniform(0, 1e-4),
                    "lon": -74.0060 + rng.uniform(0, 1e-4),
                    "speed": rng.uniform(0, 10),
                }
            )
    depot.sort(key=lambda r: r["ts"])
    names = [v for v, _ in vehicles]
    later = synthetic_readings(len(names), hours=3, per_hour=400, start=start + HOUR, seed=seed)
    for reading in later:
        reading["vehicle_id"] = names[int(reading["vehicle_id"].split("-")[1])]
    return depot + later
