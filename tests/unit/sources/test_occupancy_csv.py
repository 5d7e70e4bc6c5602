"""The occupancy CSV's column-wise read gives what the row-by-row parser gives, and leaves
every file it does not accept to that parser (whose messages ``test_plan.py`` checks)."""

from __future__ import annotations

import io
import random
from pathlib import Path

import numpy as np
import pytest

from stream_dp.dp.occupancy import Occupancy
from stream_dp.sources.occupancy_csv import _parse_rows, _read_columns, read_occupancy_csv

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "occupancy.csv"


def _random_text(seed: int) -> str:
    """Shuffled columns, an extra column, repeated pairs, CRLF or LF endings."""
    rng = random.Random(seed)
    order = rng.sample(["cell", " Vehicle ", "COUNT", "hour"], 4)
    lines = [",".join(order)]
    for _ in range(rng.randint(1, 60)):
        values = {
            "cell": f"c{rng.randint(0, 5)}",
            " Vehicle ": f" v{rng.randint(0, 9)}",
            "COUNT": str(rng.choice([1, 2, 7, 40, 10**11])).zfill(rng.choice([1, 3])),
            "hour": rng.choice(["", "9", "x y"]),
        }
        lines.append(",".join(values[name] for name in order))
    return rng.choice(["\n", "\r\n"]).join(lines) + rng.choice(["", "\n"])


def _same(a: Occupancy, b: Occupancy) -> bool:
    return (
        a.cells == b.cells
        and a.vehicles == b.vehicles
        and all(
            np.array_equal(getattr(a, name), getattr(b, name))
            and getattr(a, name).dtype == getattr(b, name).dtype
            for name in ("cell_index", "vehicle_index", "count")
        )
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_column_wise_read_equals_the_row_by_row_parser(seed: int) -> None:
    text = EXAMPLE.read_text() if seed == 0 else _random_text(seed)
    columns = _read_columns(text)
    assert columns is not None  # the fast path took it
    exact = Occupancy.from_triples(_parse_rows(io.StringIO(text, newline=""), "f"))
    assert _same(Occupancy.from_arrays(*columns), exact)


@pytest.mark.parametrize(
    "text",
    [
        'cell,vehicle,count\n"a",b,1\n',  # quoted: the csv module's rules
        "cell,vehicle,count\na,b,1\rc,d,1\n",  # a lone carriage return ends a row
        "cell,vehicle,count\na,b,0\n",
        "cell,vehicle,count\na,b,1\n\nc,d,1\n",  # a blank row (skipped by the exact parser)
        "cell,vehicle,count\na,b,1\n ,,\nc,d,1\n",
        "cell,vehicle,count\na,b,\u0663\n",  # a digit, not an ASCII one
        "cell,vehicle,count\na,b,+1\n",
        "cell,vehicle,count\na,b,1000000000000\n",  # 13 digits: MAX_COUNT checked per row
        "cell,vehicle,count\na,b\x00,1\n",
        "cell,vehicle,count\na,,1\n",
        "cell,vehicle,count\na,b,1,2\n",
        "cell,vehicle\na,b\n",
        "cell,vehicle,count\n",
    ],
)
def test_what_the_column_wise_read_does_not_accept_goes_to_the_exact_parser(text: str) -> None:
    assert _read_columns(text) is None


def test_a_quoted_file_is_read_by_the_exact_parser(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('cell,vehicle,count,note\n"c,1",v,2,"two\nlines"\nc2,v,3,\n')
    occupancy = read_occupancy_csv(path)
    assert occupancy.cells == ("c,1", "c2") and occupancy.count.tolist() == [2, 3]
