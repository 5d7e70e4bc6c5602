"""`stream-dp experiment clip-user --quick`: plots, CSV consistency, reproducibility."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from stream_dp.cli import main
from stream_dp.experiments.clip_user import Config, run_experiment, write_csv

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("clip_user")
    assert main(["experiment", "clip-user", "--out", str(out), "--quick", "--seed", "7"]) == 0
    return out


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_writes_one_pair_of_plots_per_gamma(quick_run: Path) -> None:
    names = sorted(p.name for p in quick_run.glob("*.png"))
    assert names == sorted(
        f"{kind}_gamma{g}.png" for kind in ("privacy_loss", "worst_case_error") for g in (3, 6, 9)
    )
    for name in names:
        assert (quick_run / name).read_bytes().startswith(PNG_MAGIC)


def test_csv_values_are_consistent(quick_run: Path) -> None:
    rows = read_rows(quick_run / "clip_user.csv")
    assert len(rows) == 3 * 4
    assert {float(r["gamma"]) for r in rows} == {3.0, 6.0, 9.0}
    epsilons = sorted({float(r["epsilon"]) for r in rows})
    assert epsilons[0] == pytest.approx(0.1) and epsilons[-1] == pytest.approx(1.0)
    for row in rows:
        eps = float(row["epsilon"])
        ks = [int(row[f"k_draw_{i}"]) for i in (1, 2, 3)]
        assert all(1 <= k <= 12 for k in ks)
        assert float(row["p_hat"]) == pytest.approx(sum(ks) / 3 * eps)
        assert float(row["g1_epsilon"]) == pytest.approx(12 * eps)
        assert float(row["p_hat"]) <= float(row["g1_epsilon"])
        assert 0 < float(row["error_after"]) <= float(row["error_original"]) * (1 + 1e-9)
    # CLIP-USER must actually reduce the privacy loss somewhere on this generator.
    assert any(float(r["p_hat"]) < float(r["g1_epsilon"]) for r in rows)


def test_same_seed_same_csv_other_seed_other_csv(quick_run: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.csv"
    write_csv(run_experiment(Config.quick(seed=7)), again)
    assert again.read_bytes() == (quick_run / "clip_user.csv").read_bytes()
    other = tmp_path / "other.csv"
    write_csv(run_experiment(Config.quick(draws=1, seed=8)), other)
    rows = read_rows(other)
    assert "k_draw_2" not in rows[0]
    original = read_rows(quick_run / "clip_user.csv")
    assert [r["error_original"] for r in rows] != [r["error_original"] for r in original]


@pytest.mark.parametrize(
    ("option", "value"), [("--draws", "0"), ("--draws", "x"), ("--seed", "-1")]
)
def test_bad_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    args = ["experiment", "clip-user", "--out", str(tmp_path), "--quick", option, value]
    assert main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and option in err[0]
    assert not list(tmp_path.iterdir())
