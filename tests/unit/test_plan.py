"""`stream-dp plan`: the planner on the shipped example, gz input and every kind of bad input."""

from __future__ import annotations

import csv
import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from stream_dp.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "occupancy.csv"


def read_triples(path: Path) -> dict[tuple[str, str], int]:
    with path.open(newline="") as handle:
        return {(r["cell"], r["vehicle"]): int(r["count"]) for r in csv.DictReader(handle)}


def fixed(args: tuple[str, ...]) -> list[str]:
    """The plan of fixed cells unless the test names a target (the defaults are targeted)."""
    return [*args] if "--target-mean-error" in " ".join(args) else [*args, "--fixed-cells"]


def plan_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["plan", *fixed(args), "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return json.loads(out)


def plan_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["plan", *fixed(args)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("stream-dp plan: error: ")
    return lines[0]


def test_example_is_small_and_realistic() -> None:
    triples = read_triples(EXAMPLE)
    assert EXAMPLE.stat().st_size < 50_000
    assert 25 <= len({c for c, _ in triples}) <= 40
    assert 150 <= len({v for _, v in triples}) <= 250


def test_text_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(EXAMPLE), "--epsilon", "1", "--upper", "65", "--fixed-cells"]) == 0
    out = capsys.readouterr().out
    data = plan_json(capsys, str(EXAMPLE), "--epsilon", "1", "--upper", "65")
    assert f"G1 {data['G1']} -> K {data['K']}" in out
    assert f"suppressed pairs:         {len(data['suppressed'])}" in out
    assert f"{data['max_error_after_cap']:.4f} after the pseudo-user step" in out
    assert "30 cells" in out
    assert "cells whose worst-case error grew most" in out


def test_json_is_consistent_with_the_input(capsys: pytest.CaptureFixture[str]) -> None:
    eps = 0.5
    data = plan_json(capsys, str(EXAMPLE), "--epsilon", str(eps), "--upper", "65")
    triples = read_triples(EXAMPLE)
    cells = {c for c, _ in triples}
    per_vehicle: dict[str, int] = defaultdict(int)
    for _, vehicle in triples:
        per_vehicle[vehicle] += 1

    assert data["epsilon"] == eps and data["upper"] == 65
    assert data["G1"] == max(per_vehicle.values())
    assert 1 <= data["K"] < data["G1"], "the example should show a reduction"
    assert data["privacy_loss_before"] == pytest.approx(data["G1"] * eps)
    assert data["privacy_loss_after"] == pytest.approx(data["K"] * eps)
    assert data["error_bound"] == pytest.approx(data["initial_max_error"])
    assert set(data["grids"]) == cells

    suppressed = [tuple(pair) for pair in data["suppressed"]]
    assert suppressed and len(set(suppressed)) == len(suppressed)
    assert all(pair in triples for pair in suppressed)
    left = {v: g - sum(1 for _, s in suppressed if s == v) for v, g in per_vehicle.items()}
    assert min(left.values()) >= 1
    assert max(left.values()) == data["K"]

    bound = data["error_bound"] * (1 + 1e-9)
    for cell, grid in data["grids"].items():
        n_vehicles = sum(1 for c, _ in triples if c == cell)
        assert grid["vehicles"] == n_vehicles
        assert grid["kept_vehicles"] == n_vehicles - sum(1 for c, _ in suppressed if c == cell)
        assert grid["kept_vehicles"] >= 1
        assert grid["error"] <= bound
        assert grid["error_after_cap"] <= grid["error"] * (1 + 1e-9)
    assert data["max_error_after_cap"] == max(g["error_after_cap"] for g in data["grids"].values())


def test_gz_input_gives_the_same_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    packed = tmp_path / "occupancy.csv.gz"
    packed.write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    assert plan_json(capsys, str(packed), "--epsilon", "1") == plan_json(
        capsys, str(EXAMPLE), "--epsilon", "1"
    )


def test_column_order_extra_columns_and_repeated_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    canonical = tmp_path / "a.csv"
    canonical.write_text("cell,vehicle,count\nc1,v1,30\nc1,v2,3\nc2,v1,5\nc2,v3,4\nc3,v3,9\n")
    shuffled = tmp_path / "b.csv"
    shuffled.write_text(
        "\ufeffCount, Vehicle ,hour,cell\n10,v1,9,c1\n\n3,v2,9,c1\n4,v3,9,c2\n"
        "5,v1,9,c2\n9,v3,9,c3\n20,v1,10,c1\n"
    )
    assert plan_json(capsys, str(shuffled), "--epsilon", "1") == plan_json(
        capsys, str(canonical), "--epsilon", "1"
    )


def test_no_pseudo_user_caps_are_the_max_kept_count(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys, str(EXAMPLE), "--epsilon", "1", "--no-pseudo-user")
    suppressed = {tuple(pair) for pair in data["suppressed"]}
    top: dict[str, int] = defaultdict(int)
    for pair, count in read_triples(EXAMPLE).items():
        if pair not in suppressed:
            top[pair[0]] = max(top[pair[0]], count)
    assert {cell: grid["cap"] for cell, grid in data["grids"].items()} == top
    for grid in data["grids"].values():
        assert grid["error_after_cap"] == pytest.approx(grid["error"])
    with_step = plan_json(capsys, str(EXAMPLE), "--epsilon", "1")
    assert with_step["max_error_after_cap"] <= data["max_error_after_cap"] * (1 + 1e-9)


def test_explicit_error_bound(capsys: pytest.CaptureFixture[str]) -> None:
    default = plan_json(capsys, str(EXAMPLE), "--epsilon", "1")
    looser = plan_json(
        capsys, str(EXAMPLE), "--epsilon", "1", "--error-bound", str(2 * default["error_bound"])
    )
    assert looser["error_bound"] == pytest.approx(2 * default["error_bound"])
    assert looser["K"] <= default["K"]
    assert all(g["error"] <= looser["error_bound"] * (1 + 1e-9) for g in looser["grids"].values())


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "empty file"),
        ("\n\n", "empty file"),
        ("cell,vehicle,count\n", "no data rows"),
        ("cell,vehicle\na,b\n", "line 1: missing column 'count'"),
        ("cell,car,count\na,b,1\n", "line 1: missing column 'vehicle'"),
        ("cell,vehicle,count,Count\na,b,1,1\n", "line 1: duplicate column 'count'"),
        ("cell,vehicle,count\na,b,3\na,c,0\n", "line 3: count must be a positive integer, got '0'"),
        ("cell,vehicle,count\na,b,-2\n", "line 2: count must be a positive integer, got '-2'"),
        ("cell,vehicle,count\na,b,1.5\n", "line 2: count must be a positive integer, got '1.5'"),
        ("cell,vehicle,count\na,b,nan\n", "line 2: count must be a positive integer, got 'nan'"),
        ("cell,vehicle,count\na,b,inf\n", "line 2: count must be a positive integer, got 'inf'"),
        ("cell,vehicle,count\na,b,1e3\n", "line 2: count must be a positive integer, got '1e3'"),
        ("cell,vehicle,count\na,b,\n", "line 2: count must be a positive integer, got ''"),
        ("cell,vehicle,count\na,b,10000000000000\n", "line 2: count 10000000000000 exceeds"),
        ("cell,vehicle,count\na,b\n", "line 2: expected 3 fields, got 2"),
        ("cell,vehicle,count\na,b,1,2\n", "line 2: expected 3 fields, got 4"),
        ("cell,vehicle,count\n ,b,1\n", "line 2: empty cell id"),
        ("cell,vehicle,count\na,,1\n", "line 2: empty vehicle id"),
        ("cell,vehicle,count\na,b,1\n\n\na,c,x\n", "line 5: count must be a positive integer"),
        ('cell,vehicle,count,note\na,v,1,"two\nlines"\na,b,0,\n', "line 4: count must be a posi"),
        ('cell,vehicle,count\n"a\nb",v,1\n', "line 3: cell id contains a control character"),
        ("cell,vehicle,count\na,b\x00,1\n", "line 2: vehicle id contains a control character"),
        ('cell,vehicle,count\na,b,1\n"c,d,1\n', "line 3: malformed CSV"),
    ],
)
def test_bad_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    path = tmp_path / "occupancy.csv"
    path.write_text(content)
    message = plan_error(capsys, str(path), "--epsilon", "1")
    assert f"{path}" in message
    assert expected in message


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--epsilon", "0"),
        ("--epsilon", "-1"),
        ("--epsilon", "nan"),
        ("--epsilon", "inf"),
        ("--epsilon", "abc"),
        ("--upper", "0"),
        ("--upper", "-inf"),
        ("--error-bound", "0"),
        ("--error-bound", "NaN"),
    ],
)
def test_bad_numbers(capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    args = {"--epsilon": "1", option: value}
    message = plan_error(capsys, str(EXAMPLE), *(f"{k}={v}" for k, v in args.items()))
    assert f"{option} must be a" in message and repr(value) in message


def test_unreadable_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing.csv")
    assert f"FILE: cannot read {missing}: No such file" in plan_error(
        capsys, missing, "--epsilon", "1"
    )
    assert "Is a directory" in plan_error(capsys, str(tmp_path), "--epsilon", "1")
    fake = tmp_path / "occupancy.csv.gz"
    fake.write_text("cell,vehicle,count\na,b,1\n")
    assert "not a gzip file" in plan_error(capsys, str(fake), "--epsilon", "1")
    truncated = tmp_path / "truncated.csv.gz"
    truncated.write_bytes(gzip.compress(EXAMPLE.read_bytes())[:200])
    assert "truncated or corrupt" in plan_error(capsys, str(truncated), "--epsilon", "1")
    latin = tmp_path / "latin.csv"
    latin.write_bytes("cell,vehicle,count\ncaf\xe9,b,1\n".encode("latin-1"))
    assert "not UTF-8" in plan_error(capsys, str(latin), "--epsilon", "1")


@pytest.mark.parametrize(
    "values",
    [
        {"resolution": 8, "target_mean_error": "none", "vehicle_budget": "none"},  # fixed cells
        {"resolution": 8, "target_mean_error": "none", "vehicle_budget": "none",
         "variance_share": 0.3, "min_vehicles": 2},
        {"resolution": 8, "coarsest_resolution": 5, "target_mean_error": 20.0,
         "vehicle_budget": "none"},  # targeted, a fixed ε per cell
        {"resolution": 8, "coarsest_resolution": 5, "target_mean_error": 12.0,
         "variance_share": 0.0, "vehicle_budget": "none"},
    ],
)  # fmt: skip
def test_the_plan_gives_the_release_s_k_and_error_bars(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], values: dict[str, float | str]
) -> None:
    """Issue 26 item 7: ``plan`` runs the release's own stages on the window's occupancy, so
    it states the K and the per-cell error bars ``release`` publishes for that window."""
    from stream_dp.config import load_settings
    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.dp.randomness import RandomSource
    from stream_dp.release.params import ReleaseParams
    from stream_dp.release.window import release_window
    from tests.unit.dp.test_adaptive_cells import targeted_window

    window = targeted_window(3)
    params = ReleaseParams.from_settings(load_settings(epsilon=1.0, **values))
    release = release_window(0, window, params, LaplaceNoise(RandomSource.seeded_for_tests(3)))
    assert release.cells and release.summary["G1"] > release.summary["K"]
    path = tmp_path / "occupancy.csv"
    rows = zip(
        window.cell_code.tolist(), window.vehicle_code.tolist(), window.count.tolist(), strict=True
    )
    path.write_text(
        "cell,vehicle,count\n"
        + "".join(f"{window.cell_names[c]},{window.vehicle_names[v]},{n}\n" for c, v, n in rows)
    )
    options = [f"--{k.replace('_', '-')}={v}" for k, v in values.items()]
    plan = plan_json(capsys, str(path), "--epsilon", "1", *options)
    assert plan["K"] == release.summary["K"]
    assert plan["G1"] == release.summary["G1"]
    released = {cell: grid for cell, grid in plan["grids"].items() if grid["released"]}
    assert set(released) == {record["cell"] for record in release.cells}
    for record in release.cells:
        assert released[record["cell"]]["mean_error"] == record["mean_error"]


def test_adaptive_cells_of_ids_that_are_not_h3_cells_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The targeted default regroups H3 cells: other cell ids get one line naming the way out
    (--fixed-cells), not an H3 traceback."""
    path = tmp_path / "occ.csv"
    path.write_text("cell,vehicle,count\ncell00001,a,3\ncell00002,b,4\n")
    message = plan_error(capsys, str(path), "--epsilon", "1", "--target-mean-error", "15")
    assert "not an H3 cell of resolution 8" in message and "--fixed-cells" in message
    assert plan_json(capsys, str(path), "--epsilon", "1")["K"] == 1  # fixed cells plan it


def write_occupancy(path: Path, seed: int = 5) -> Path:
    """A CSV of a city occupancy on which CLIP-USER suppresses pairs (G1 > K)."""
    import numpy as np

    from stream_dp.dp.synthetic import city_occupancy

    occ = city_occupancy(np.random.default_rng(seed), 2_000, 300, 6.0, 0.05)
    rows = zip(occ.cell_index.tolist(), occ.vehicle_index.tolist(), occ.count.tolist(), strict=True)
    path.write_text(
        "cell,vehicle,count\n"
        + "".join(f"c{occ.cells[c]},v{occ.vehicles[v]},{n}\n" for c, v, n in rows)
    )
    return path


@pytest.mark.parametrize("options", [(), ("--variance-share", "0.5"), ("--no-pseudo-user",)])
def test_the_plan_without_compiled_kernels_is_the_plan_with_them(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    options: tuple[str, ...],
) -> None:
    """A process without numba plans with the numpy forms (``plan`` never loads it): the same
    plan, to the last bit of every error, as with the compiled kernels."""
    from stream_dp.dp import kernels

    path = write_occupancy(tmp_path / "occupancy.csv")
    args = (str(path), "--epsilon", "0.8", *options)
    monkeypatch.setattr(kernels, "use_compiled", lambda n_items: True)
    compiled = plan_json(capsys, *args)
    assert compiled["suppressed"] and compiled["K"] < compiled["G1"]
    monkeypatch.setattr(kernels, "use_compiled", lambda n_items: False)
    assert plan_json(capsys, *args) == compiled


def test_epsilon_and_upper_default_to_the_settings_as_in_release(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34 item 7: no --epsilon needed; the settings' (default or STREAM_DP_EPSILON)."""
    monkeypatch.delenv("STREAM_DP_EPSILON", raising=False)
    monkeypatch.delenv("STREAM_DP_UPPER", raising=False)
    default = plan_json(capsys, str(EXAMPLE))
    assert default == plan_json(capsys, str(EXAMPLE), "--epsilon", "1", "--upper", "65")
    monkeypatch.setenv("STREAM_DP_EPSILON", "0.25")
    assert plan_json(capsys, str(EXAMPLE)) == plan_json(capsys, str(EXAMPLE), "--epsilon", "0.25")
    assert plan_json(capsys, str(EXAMPLE)) != default
