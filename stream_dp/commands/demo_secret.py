"""`stream-dp demo --privacy-model secret-routes`: what the demo replays and prints there.

The bundled AIS week has a few dozen vessels an hour spread over many cells, far below what
a cell needs under secret routes (its noisy vehicle count must pass the threshold T of
docs/math.md §14.4: about 150 vehicles at the budget profile's B 14 per 7 days, one cell a
vehicle, hourly windows; ``stream-dp plan --privacy-model secret-routes`` shows it). So this demo
replays a dense synthetic city instead: ``DENSE_VEHICLES`` cars driving inside a 2 km square
of Midtown Manhattan, each reporting every ten minutes (seeded: the data, never the noise).
Its readings are in the past, so the worker runs on a declared replay clock
(:func:`replay_clock`, docs/math.md §14.7) unless ``--clock-start`` gives one.
"""

from __future__ import annotations

import random
from typing import Any

from stream_dp.config import Settings
from stream_dp.dp.secret_accounting import COUNT_STEPS
from stream_dp.secret_routes.params import SecretRoutesParams

HOUR = 3600
#: Cars in the synthetic city, and where it lies (south-west corner, side in degrees).
DENSE_VEHICLES = 3000
CITY_CORNER = (40.748, -73.995)
CITY_SIDE = 0.018
#: Readings per car and hour, and the hours replayed without ``--hours``.
READINGS_PER_HOUR = 6
DEFAULT_HOURS = 4
#: 2026-01-05 07:00 UTC, a Monday morning.
CITY_START = 1_767_596_400


#: Real seconds per window of the demo's replay clock.
SECONDS_PER_WINDOW = 10.0


def replay_clock(window_seconds: int, hours: int | None, rate: float | None) -> dict[str, float]:
    """The declared replay clock of the demo (docs/math.md §14.7): from the city's first
    window, a window every :data:`SECONDS_PER_WINDOW` s; with ``--rate`` at most half the
    pace the readings are produced at, so no window closes before its readings are sent."""
    speed = window_seconds / SECONDS_PER_WINDOW
    if rate is not None:
        hours = hours or DEFAULT_HOURS
        produced_in = hours * DENSE_VEHICLES * READINGS_PER_HOUR / rate
        speed = min(speed, hours * HOUR / (2 * produced_in))
    start = CITY_START // window_seconds * window_seconds
    return {"clock_start": float(start), "clock_speed": speed}


def dense_city_readings(hours: int, seed: int = 7) -> list[dict[str, Any]]:
    """``hours`` hours of :data:`DENSE_VEHICLES` cars, each at a uniform position in the
    city's square at each of its readings, a speed of 10-50 km/h; in event-time order."""
    rng = random.Random(seed)
    lat0, lon0 = CITY_CORNER
    step = HOUR / READINGS_PER_HOUR
    out = []
    for k in range(hours * READINGS_PER_HOUR):
        for v in range(DENSE_VEHICLES):
            out.append(
                {
                    "vehicle_id": f"car-{v}",
                    "ts": CITY_START + k * step + rng.uniform(0, step),
                    "lat": lat0 + rng.uniform(0, CITY_SIDE),
                    "lon": lon0 + rng.uniform(0, CITY_SIDE),
                    "speed": rng.uniform(10.0, 50.0),
                }
            )
    out.sort(key=lambda r: r["ts"])
    return out


def sample_line(readings: list[dict[str, Any]], hours: int) -> str:
    """What is replayed, and why not the AIS week."""
    return (
        f"sample: {len(readings):,} readings of {DENSE_VEHICLES:,} cars, {hours} hourly windows "
        "(a dense synthetic city, 2 km of Midtown; the AIS week has too few vessels per cell "
        "for secret-routes' threshold)"
    )


def threshold_line(settings: Settings) -> str:
    """The threshold and the epsilon each window costs every vehicle (public parameters)."""
    params = SecretRoutesParams.from_settings(settings)
    budget = params.budget
    return (
        f"secret-routes: a cell is shown when its noisy vehicle count reaches "
        f"{params.threshold / COUNT_STEPS:.1f}; each window costs every car epsilon "
        f"{budget.window_epsilon:.3g} (delta {budget.selection_delta:.2g}), "
        f"{budget.windows} windows per period"
    )


HEADER = (
    f"{'window (UTC)':<17} {'cells':>5} {'eps window':>10} {'eps period':>10}  "
    "busiest cell: noisy cars, mean km/h [95 % interval]"
)


def window_line(record: dict[str, Any], cells: list[dict[str, Any]]) -> str:
    """One window's row: its cells, every car's epsilon, the busiest cell by noisy count."""
    when = record["window_start"][:16].replace("T", " ")
    head = f"{when:<17} {record['cells_released']:>5} {record['epsilon_window']:>10.3g} "
    head += f"{record['epsilon_period']:>10.3g}  "
    if record.get("status") == "failed":
        return head + f"release failed ({record.get('error', 'error')}); charged"
    busiest = max(cells, key=lambda r: r["n_vehicles_noisy"], default=None)
    if busiest is None:
        return head + "-"
    return head + (
        f"{busiest['n_vehicles_noisy']:.0f} cars, {busiest['mean']:.1f} "
        f"[{busiest['mean_low']:.1f}, {busiest['mean_high']:.1f}]"
    )


def summary_lines(summaries: list[dict[str, Any]]) -> list[str]:
    """What the replay released and what every car lost (the same for all, §14.5)."""
    if not summaries:
        return ["No window was released."]
    last = summaries[-1]
    cells = sum(s["cells_released"] for s in summaries)
    return [
        f"\n{len(summaries)} windows released once each, {cells} cell records "
        "(privacy_model secret-routes: noisy counts, cells chosen by the noise).",
        f"Every car, whether it drove or not, lost epsilon {last['epsilon_period']:.3g} "
        f"(delta {last['delta_period']:.2g}) over these {last['windows_in_period']} windows "
        f"of its epsilon {last['vehicle_budget']:g} per period.",
    ]
