"""The released span is public (docs/math.md §14.5): every window of ``[--from, --to)`` has
a summary, counted from ``--from``, whoever drove; readings outside it are dropped."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from stream_dp.cli import main
from stream_dp.config import load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine
from stream_dp.release.records import WindowRelease

HOUR = 3600
START = 1_700_000_000 - 1_700_000_000 % (4 * HOUR)
SPAN = (START, START + 4 * HOUR)


def crowd() -> list[dict[str, Any]]:
    return [{"vehicle_id": f"u{i}", "ts": START + 2 * HOUR + i, "lat": 40.7, "lon": -74.0,
             "speed": 20.0} for i in range(300)]  # fmt: skip


def lone(ts: float) -> list[dict[str, Any]]:
    return [{"vehicle_id": "x", "ts": ts, "lat": 40.7, "lon": -74.0, "speed": 60.0}]


def released(
    rows: list[dict[str, Any]], span: tuple[int, int] | None = SPAN
) -> list[WindowRelease]:
    settings = load_settings(
        privacy_model="secret-routes", vehicle_budget=4.0, budget_period_seconds=4 * HOUR,
        window_seconds=HOUR, contribution_cells=1, resolution=7, accounting_delta=1e-6,
    )  # fmt: skip
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(1)), span=span)
    return [r for part in (engine.feed(rows), engine.finish(True)) for r in part]


def public_view(out: list[WindowRelease]) -> list[tuple[int, int, float, float]]:
    return [(r.window_start, r.summary["windows_in_period"], r.summary["epsilon_period"],
             r.summary["delta_period"]) for r in out]  # fmt: skip


@pytest.mark.parametrize("x_ts", [START + 5, START + 3 * HOUR + 5, START - 5, SPAN[1] + 5])
def test_a_lone_vehicle_in_an_empty_first_or_last_hour_changes_no_summary(x_ts: float) -> None:
    """The reviewer's pair: a vehicle whose only reading is in an otherwise empty first (or
    last, or outside) hour gives the same summaries and the same window counts."""
    without, with_x = released(crowd()), released(lone(x_ts) + crowd())
    assert public_view(with_x) == public_view(without)
    assert [r.window_start for r in without] == list(range(*SPAN, HOUR))
    assert [r.summary["windows_in_period"] for r in without] == [1, 2, 3, 4]


@pytest.mark.parametrize("span", [None, (START + 5, SPAN[1]), (SPAN[1], START)])
def test_the_engine_refuses_to_start_without_a_window_aligned_span(
    span: tuple[int, int] | None,
) -> None:
    """At the API level too (not only the CLI): no span would start the clock at the first
    reading, i.e. say when the first vehicle appeared."""
    with pytest.raises(ValueError, match=r"^span: "):
        released(crowd(), span)


def test_a_span_is_refused_under_public_occupancy() -> None:
    with pytest.raises(ValueError, match=r"^span: only under privacy_model secret-routes"):
        OfflineEngine(load_settings(), LaplaceNoise(), span=SPAN)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


SECRET = ["--privacy-model", "secret-routes", "--window-seconds", "3600", "--resolution", "7"]


@pytest.mark.parametrize(("span", "named"), [
    ([], "--from"), (["--from", str(START)], "--to"),
    (["--from", str(START + 5), "--to", str(SPAN[1])], "--from"),
    (["--from", "soon", "--to", str(SPAN[1])], "--from"),
    (["--from", str(SPAN[1]), "--to", str(START)], "--to"),
])  # fmt: skip
def test_release_needs_a_window_aligned_span_naming_the_option(
    tmp_path: Path, capsys, span: list[str], named: str
) -> None:
    write_csv(tmp_path / "in.csv", crowd())
    out = tmp_path / "out.jsonl"
    code = main(["release", str(tmp_path / "in.csv"), "--out", str(out), *SECRET, *span])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"stream-dp release: error: {named}:"), err
    assert not out.exists()


def test_release_writes_a_summary_for_every_window_of_the_span(tmp_path: Path) -> None:
    write_csv(tmp_path / "in.csv", lone(START - 5) + crowd())
    out = tmp_path / "out.jsonl"
    code = main(["release", str(tmp_path / "in.csv"), "--out", str(out), *SECRET,
                 "--from", "2023-11-14T20:00:00Z", "--to", str(SPAN[1])])  # fmt: skip
    assert code == 0
    assert out.read_text().count('"type":"window"') == 4


def run_release(tmp_path: Path, *extra: str) -> int:
    write_csv(tmp_path / "in.csv", crowd())
    argv = ["release", str(tmp_path / "in.csv"), "--out", str(tmp_path / "out.jsonl"), *SECRET,
            "--from", str(SPAN[0]), "--to", str(SPAN[1]), *extra]  # fmt: skip
    return main(argv)


def test_exact_counts_are_printed_only_when_asked_and_marked(tmp_path: Path, capsys) -> None:
    assert run_release(tmp_path) == 0
    err = capsys.readouterr().err
    assert "readings accepted" not in err and "300" not in err
    assert "exact reading counts not shown" in err
    assert run_release(tmp_path, "--overwrite", "--show-exact-counts") == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "readings accepted 300" in last and "exact, not protected: operator only" in last


def test_ledger_out_is_refused_naming_it(tmp_path: Path, capsys) -> None:
    assert run_release(tmp_path, "--ledger-out", str(tmp_path / "ledger.jsonl")) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("stream-dp release: error: --ledger-out:")
    assert not (tmp_path / "ledger.jsonl").exists()


@pytest.mark.parametrize(("coarse", "levels"), [([], 1), (["--coarse-resolution", "6"], 2)])
def test_the_promise_names_l0_and_the_levels(tmp_path: Path, capsys, coarse: list[str],
                                             levels: int) -> None:  # fmt: skip
    assert run_release(tmp_path, "--contribution-cells", "2", *coarse) == 0
    promise = capsys.readouterr().err.splitlines()[0]
    assert f"L0 2 cells at each of {levels} levels" in promise
