"""Start-up of ``stream-dp plan`` on a 33,000-row occupancy whose busiest vehicle is in 14
cells (G = 14): writes that occupancy CSV (seeded), to be timed as a whole process.

    python benchmarks/plan_startup.py /tmp/occupancy.csv
    stream-dp plan /tmp/occupancy.csv --epsilon 1 --fixed-cells   # time this, start-up included

Vehicle ``v`` occupies ``1 + v % 14`` distinct cells of 2,000 (so G1 = 14), drawn uniformly;
counts are ``Geo(0.05)`` readings. Vehicles are added until the file has exactly ``rows``
(cell, vehicle) rows. The file is generated, never committed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ROWS = 33_000
G = 14
CELLS = 2_000


def occupancy_rows(
    rows: int = ROWS, g: int = G, n_cells: int = CELLS, seed: int = 0
) -> list[tuple[str, str, int]]:
    """``rows`` (cell, vehicle, count) triples, at most ``g`` distinct cells per vehicle."""
    rng = np.random.default_rng(seed)
    out: list[tuple[str, str, int]] = []
    vehicle = 0
    while len(out) < rows:
        k = min(1 + vehicle % g, rows - len(out))
        cells = rng.choice(n_cells, size=k, replace=False)
        counts = rng.geometric(0.05, size=k)
        out.extend(
            (f"cell{c:05d}", f"vehicle{vehicle:06d}", int(n))
            for c, n in zip(cells.tolist(), counts.tolist(), strict=True)
        )
        vehicle += 1
    return out


def write_occupancy_csv(path: Path, rows: int = ROWS, g: int = G, seed: int = 0) -> Path:
    """The occupancy as ``cell,vehicle,count`` CSV at ``path``."""
    lines = ["cell,vehicle,count"]
    lines += [f"{c},{v},{n}" for c, v, n in occupancy_rows(rows, g, seed=seed)]
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="CSV file to write")
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(write_occupancy_csv(args.out, args.rows, seed=args.seed))


if __name__ == "__main__":
    main()
