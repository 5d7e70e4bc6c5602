"""`stream-dp plan --privacy-model secret-routes` (``secret_routes/plan``): the chance a cell
of n vehicles is shown, against a brute-force sum of the noise's pmf, and the table the
command prints from public parameters alone."""

from __future__ import annotations

import math

import pytest

from stream_dp.cli import main
from stream_dp.config import load_settings
from stream_dp.dp.secret_accounting import COUNT_STEPS
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.plan import mean_error, outlook, shown_probability


def params(**overrides: object) -> SecretRoutesParams:
    settings = load_settings(privacy_model="secret-routes", **overrides)
    return SecretRoutesParams.from_settings(settings)


def brute_shown(p: SecretRoutesParams, vehicles: int, cut: int | None = None) -> float:
    """P(n C + Z >= T) (or ``cut``), Z discrete Laplace of the count scale t: its pmf summed."""
    t = float(p.count_scale)
    q = math.exp(-1.0 / t)
    norm = (1 - q) / (1 + q)
    lowest = (p.threshold if cut is None else cut) - vehicles * COUNT_STEPS
    reach = int(60 * t) + abs(lowest) + 1
    return sum(norm * q ** abs(z) for z in range(lowest, lowest + 2 * reach))


@pytest.mark.parametrize("budget", [14.0, 56.0])
def test_the_chance_a_cell_is_shown_matches_the_pmf_summed(budget: float) -> None:
    p = params(vehicle_budget=budget, window_seconds=3 * 3600)
    centre = round(p.threshold / COUNT_STEPS)
    for n in (1, centre - 5, centre, centre + 5, 4 * centre):
        assert shown_probability(p, n) == pytest.approx(brute_shown(p, n), rel=1e-9, abs=1e-12)


def test_more_vehicles_are_shown_more_often_with_a_narrower_bar() -> None:
    rows = outlook(params(), (50, 150, 300, 1000, 4000))
    shown = [r.shown_probability for r in rows]
    bars = [r.mean_error for r in rows]
    assert shown == sorted(shown) and shown[0] < 1e-6 and shown[-1] > 1 - 1e-9
    assert bars == sorted(bars, reverse=True) and bars[-1] < 1.0
    assert mean_error(params(), 300) == rows[2].mean_error


def test_the_command_reads_no_file_and_prints_the_table(capsys) -> None:
    assert main(["plan", "--privacy-model", "secret-routes", "--vehicles", "100,300"]) == 0
    out = capsys.readouterr().out
    threshold = params().threshold / COUNT_STEPS
    assert f"noisy vehicle count reaches {threshold:.1f}" in out
    assert "per window, every vehicle: epsilon" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == ["100", "300"]


@pytest.mark.parametrize(
    "argv",
    [["--vehicles", "0"], ["--min-vehicles", "3"], ["occupancy.csv"]],
    ids=["bad-counts", "public-knob", "a-file"],
)
def test_the_command_refuses_what_secret_routes_cannot_use(argv: list[str], capsys) -> None:
    assert main(["plan", "--privacy-model", "secret-routes", *argv]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def plan_table(capsys, monkeypatch, levels: dict[str, str]) -> tuple[list[str], list[list[str]]]:
    """The plan's lines before the table and its rows, for 100 to 300 vehicles."""
    for name, value in levels.items():
        monkeypatch.setenv(name, value)
    assert main(["plan", "--privacy-model", "secret-routes", "--vehicles", "100,150,200,300"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in lines if line.strip()[:1].isdigit()]
    return lines[: lines.index("")], rows


@pytest.mark.parametrize(
    ("levels", "choice"),
    [({}, None), ({"STREAM_DP_COARSE_RESOLUTION": "7"}, "adaptive"),
     ({"STREAM_DP_COARSE_RESOLUTION": "7", "STREAM_DP_RESOLUTION_CHOICE": "fixed"}, "fixed")],
    ids=["one-level", "adaptive", "fixed"],
)  # fmt: skip
def test_the_plan_names_the_resolution_each_cut_selects(
    capsys, monkeypatch, levels: dict[str, str], choice: str | None
) -> None:
    """Adaptive: the threshold selects the coarse cells (7), a fine cell (8) under a split one
    is shown at the fine cut: its own column. One level and fixed: the threshold at 8."""
    overrides = {"coarse_resolution": 7, "resolution_choice": choice} if choice else {}
    p = params(**overrides)
    head, rows = plan_table(capsys, monkeypatch, levels)
    threshold = f"noisy vehicle count reaches {p.threshold / COUNT_STEPS:.1f}"
    cells = next(line for line in head if line.startswith("cells: "))
    counts = [int(row[0]) for row in rows]
    assert counts == [100, 150, 200, 300]
    for row, n in zip(rows, counts, strict=True):
        assert float(row[1]) == pytest.approx(brute_shown(p, n), abs=5e-4)
    if choice != "adaptive":
        assert cells.startswith("cells: resolution 8, ") and cells.endswith(threshold)
        assert all(len(row) == 3 for row in rows) and "P(fine)" not in "\n".join(head)
        return
    assert cells.startswith("cells: resolution 7 first, ") and cells.endswith(
        f"a cell at 7 is shown when its {threshold}"
    )
    assert f"noisy count reaches {p.fine_cut / COUNT_STEPS:.1f}, its children at 8" in head[-1]
    assert all(len(row) == 4 for row in rows)
    fine = [float(row[2]) for row in rows]
    assert fine == pytest.approx([brute_shown(p, n, p.fine_cut) for n in counts], abs=5e-4)
    assert fine[1] > 10 * float(rows[1][1])  # 150 vehicles: the fine cut, not the threshold
