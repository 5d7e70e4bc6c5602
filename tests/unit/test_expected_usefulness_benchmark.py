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
import panel  # noqa: E402
import usefulness  # noqa: E402

from tests.support.readings import synthetic_readings  # noqa: E402

ROW = usefulness.ROWS[expected_usefulness.B14]


@pytest.fixture(scope="module")
def readings() -> list[dict[str, Any]]:
    return synthetic_readings(n_vehicles=60, hours=3, per_hour=1200, seed=23)


def test_a_data_set_in_other_units_at_its_own_u_expects_the_same(
    readings: list[dict[str, Any]],
) -> None:
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


def test_each_records_chance_is_its_laplace_mass_within_a_tenth_of_u(
    readings: list[dict[str, Any]],
) -> None:
    # per record, from its own fields: the scale U cap / (S ε) and the chance that its bias
    # plus that noise lies within 10 % of U, computed here without the script's helpers
    out = expected_usefulness.expected(ROW, usefulness.Truth(readings))
    exact = out["per_record"][0]
    for i, record in enumerate(out["records"]):
        scale = 65.0 * record["cap"] / (record["n_readings_used"] * record["epsilon"])
        bias = abs(float(exact["bias"][i]))
        tau = 6.5
        inside = 1 - 0.5 * (np.exp(-(tau - bias) / scale) + np.exp(-(tau + bias) / scale))
        if bias > tau:  # both ends on one side of the bias
            inside = 0.5 * (np.exp(-(bias - tau) / scale) - np.exp(-(bias + tau) / scale))
        assert exact["p_useful"][i] == pytest.approx(inside, rel=1e-9)
        assert 0.0 < exact["p_useful"][i] < 1.0


def test_an_unknown_data_set_fails_naming_the_choices(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["expected_usefulness.py", "--data-set", "Atlantis"])
    with pytest.raises(SystemExit) as exit_info:
        expected_usefulness.main()
    assert exit_info.value.code == 2
    assert "--data-set: one of AIS week" in capsys.readouterr().err


def test_a_data_set_prints_the_spread_of_its_runs(
    readings: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a panel of one data set (the synthetic readings at U 65): the script releases it at its
    # profile and prints the worst of 5 runs drawn from its records' chances
    tiny = panel.DataSet("tiny", lambda quick: readings, 65.0, 14.0, 604_800)
    monkeypatch.setattr(panel, "PANEL", [tiny])
    monkeypatch.setattr(sys, "argv", ["expected_usefulness.py", "--data-set", "tiny",
                                      "--threshold", "0.01"])  # fmt: skip
    assert expected_usefulness.main() == 0
    out = capsys.readouterr().out
    row = {**panel.profile_row(tiny)}
    coverage = expected_usefulness.expected(row, usefulness.Truth(readings))["coverage"]
    assert f"expected useful coverage {coverage:.1%}" in out
    assert "worst of 5 runs: expected" in out and "at least 1% with chance" in out


def test_with_the_file_end_known_the_last_window_holds_nothing_back(
    readings: list[dict[str, Any]],
) -> None:
    # as the service releases the fixture's 3 hours, its last window holds readings back for
    # a longer span; replayed as `stream-dp release` does, it releases them
    settings = usefulness.settings_of(ROW)
    live: list[Any] = []
    ended: list[Any] = []
    usefulness.release_week(settings, readings, noise=expected_usefulness.NoNoise(), releases=live)
    usefulness.release_week(settings, readings, noise=expected_usefulness.NoNoise(),
                            releases=ended, file_end=True)  # fmt: skip
    assert live[-1].summary["readings_held"] > 0
    assert ended[-1].summary["readings_held"] == 0
    service = expected_usefulness.expected(ROW, usefulness.Truth(readings))
    replayed = expected_usefulness.expected(ROW, usefulness.Truth(readings), file_end=True)
    assert len(replayed["records"]) > len(service["records"])
    assert replayed["coverage"] > service["coverage"]
