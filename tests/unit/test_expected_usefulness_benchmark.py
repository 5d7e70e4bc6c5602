"""``benchmarks/expected_usefulness.py`` on a data set of another U: τ and the noise scale are
read off the truth's U (10 % of it, ``U cap / (S ε)``), so a data set measured in other units
gives the same expectation, and the spread of its runs is drawn from each record's chance."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# The benchmarks are scripts importing their neighbours by name (``from usefulness import``).
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import expected_usefulness  # noqa: E402
import usefulness  # noqa: E402

from tests.support.readings import synthetic_readings  # noqa: E402

ROW = usefulness.ROWS[expected_usefulness.B14]


@pytest.fixture(scope="module")
def readings() -> list[dict[str, Any]]:
    return synthetic_readings(n_vehicles=60, hours=3, per_hour=1200, seed=23)


def test_a_data_set_in_other_units_at_its_own_u_expects_the_same(readings) -> None:
    # every speed, U and T times 10: the release is the same up to that factor, so each
    # record's chance within τ (10 % of U) is too; read at the week's U (65) instead, τ would
    # stay 6.5 against noise and bias ten times larger
    base = expected_usefulness.expected(ROW, usefulness.Truth(readings))
    scaled = [{**r, "speed": 10 * r["speed"]} for r in readings]
    row = {**ROW, "upper": 650.0, "target_mean_error": 10 * ROW["target_mean_error"]}
    tenfold = expected_usefulness.expected(row, usefulness.Truth(scaled, upper=650.0))
    assert len(base["records"]) == len(tenfold["records"]) >= 1
    assert 0.0 < base["coverage"] < 1.0  # a chance to compare, not a certainty
    assert tenfold["coverage"] == pytest.approx(base["coverage"], rel=1e-9)
    assert tenfold["upper"] == 650.0
    p_base = base["per_record"][0]["p_useful"]
    p_tenfold = tenfold["per_record"][0]["p_useful"]
    assert np.allclose(p_tenfold, p_base, rtol=1e-9)


def test_each_records_chance_times_its_readings_is_the_expected_coverage(readings) -> None:
    out = expected_usefulness.expected(ROW, usefulness.Truth(readings))
    exact = out["per_record"][0]
    useful = float(exact["p_useful"] @ exact["counts"]) / len(readings)
    assert useful == pytest.approx(out["coverage"])


def test_an_unknown_data_set_fails_naming_the_choices(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["expected_usefulness.py", "--data-set", "Atlantis"])
    with pytest.raises(SystemExit) as exit_info:
        expected_usefulness.main()
    assert exit_info.value.code == 2
    assert "--data-set: one of AIS week" in capsys.readouterr().err
