"""`stream-dp release`: --out written whole or not at all, bad rows skipped into a rejects
file with their line and reason, --strict, --overwrite (issue 26, items 1 and 2)."""

from __future__ import annotations

import csv
import gzip
import json
import os
import stat
from pathlib import Path

import orjson
import pytest

from stream_dp import fault_injection
from stream_dp.cli import build_parser, main
from stream_dp.commands.release import rejects_path
from stream_dp.windows.reject_reasons import DESCRIPTIONS, RejectReason
from tests.support.readings import synthetic_readings

HOURS = 4
FIELDS = ("vehicle_id", "ts", "lat", "lon", "speed")


def readings() -> list[dict]:
    return synthetic_readings(n_vehicles=20, hours=HOURS, per_hour=300, seed=4)


def write_csv(path: Path, rows: list[list[object]]) -> Path:
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(FIELDS)
        writer.writerows(rows)
    return path


def good_rows() -> list[list[object]]:
    return [[r[name] for name in FIELDS] for r in readings()]


#: (row index, how the row is spoiled, expected reason, text the detail must hold)
BAD_ROWS = (
    (10, lambda row: row[:4] + ["fast"], RejectReason.NOT_A_NUMBER, "speed"),
    (20, lambda row: row[:2] + [200.0] + row[3:], RejectReason.LAT_OUT_OF_RANGE, "lat"),
    (30, lambda row: row[:3] + [-181.0] + row[4:], RejectReason.LON_OUT_OF_RANGE, "lon"),
    (40, lambda row: row[:1] + [-5.0] + row[2:], RejectReason.TS_OUT_OF_RANGE, "1970"),
    (50, lambda row: row[:1] + [1e12] + row[2:], RejectReason.TS_OUT_OF_RANGE, "9000"),
    (60, lambda row: row[:1] + ["yesterday"] + row[2:], RejectReason.BAD_TS, "ts"),
    (70, lambda row: row[:3], RejectReason.MISSING_FIELD, "lon, speed"),
    (80, lambda row: [*row, "extra"], RejectReason.MALFORMED_ROW, "more fields"),
    (90, lambda row: [""] + row[1:], RejectReason.BAD_VEHICLE_ID, "vehicle_id"),
    (100, lambda row: row[:2] + ["nan"] + row[3:], RejectReason.NOT_A_NUMBER, "lat"),
)


def spoiled_csv(path: Path) -> Path:
    rows = good_rows()
    for index, spoil, _reason, _text in BAD_ROWS:
        rows[index] = spoil(rows[index])
    return write_csv(path, rows)


def release(source: Path, out: Path, *options: str) -> int:
    return main(["release", str(source), "--out", str(out), "--resolution", "7", *options])


def listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture
def previous(tmp_path: Path) -> tuple[Path, Path, dict[str, bytes]]:
    """A complete earlier release of the input in ``tmp_path/out``; the directory's bytes."""
    (tmp_path / "in").mkdir()
    source = write_csv(tmp_path / "in" / "readings.csv", good_rows())
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "releases.jsonl"
    assert release(source, out) == 0
    windows = [r for r in map(orjson.loads, out.read_bytes().splitlines()) if r["type"] == "window"]
    assert len(windows) == HOURS
    return source, out, listing(out_dir)


@pytest.mark.parametrize("window", range(1, HOURS + 1))
@pytest.mark.parametrize("failure", [fault_injection.InjectedReleaseError, KeyboardInterrupt])
def test_a_run_failing_after_any_window_leaves_the_previous_out_byte_identical(
    previous, monkeypatch, window, failure
):
    source, out, before = previous
    written = []

    def fail_at_window(name: str) -> None:
        if name == "release-written-error":
            written.append(name)
            if len(written) == window:
                raise failure("injected")

    monkeypatch.setattr(fault_injection, "error_point_counted", fail_at_window)
    if failure is KeyboardInterrupt:
        assert release(source, out, "--overwrite") == 130
    else:
        with pytest.raises(failure):
            release(source, out, "--overwrite")
    assert len(written) == window  # the run did get that far: windows were written before
    assert listing(out.parent) == before  # same files, same bytes, no temporary file left


def test_the_fault_injection_point_fails_the_run_at_the_nth_window(previous, monkeypatch):
    source, out, before = previous
    monkeypatch.setenv(fault_injection.ENV, "release-written-error:3")
    monkeypatch.setattr(fault_injection, "_calls", {})
    with pytest.raises(fault_injection.InjectedReleaseError):
        release(source, out, "--overwrite")
    assert fault_injection._calls == {"release-written-error": 3}
    assert listing(out.parent) == before


def test_a_bad_row_in_strict_mode_leaves_the_previous_out_and_draws_no_noise(
    previous, monkeypatch, capsys
):
    source, out, before = previous
    rows = good_rows()
    rows[-1] = rows[-1][:4] + ["fast"]  # the very last row: every window before it is fine
    write_csv(source, rows)

    def no_noise(*args, **kwargs):
        raise AssertionError("noise drawn before the input was checked")

    from stream_dp import engine
    from stream_dp.dp.noise import LaplaceNoise

    monkeypatch.setattr(engine, "release_ready_windows", no_noise)
    monkeypatch.setattr(LaplaceNoise, "release", no_noise)
    monkeypatch.setattr(LaplaceNoise, "release_many", no_noise)
    assert release(source, out, "--overwrite", "--strict") == 2
    message = capsys.readouterr().err.strip()
    line = len(rows) + 1  # the header is line 1
    assert message == (
        f"stream-dp release: error: {source}:{line}: not_a_number: "
        "speed must be a number, not 'fast'"
    )
    assert listing(out.parent) == before
    fresh = out.parent / "fresh.jsonl"
    assert release(source, fresh, "--strict") == 2
    assert listing(out.parent) == before  # nothing created either


def test_bad_rows_are_skipped_into_the_rejects_file_by_reason(tmp_path, capsys):
    source = spoiled_csv(tmp_path / "readings.csv")
    out = tmp_path / "releases.jsonl"
    assert release(source, out) == 0
    rejects = [json.loads(line) for line in rejects_path(out).read_text().splitlines()]
    assert rejects_path(out) == tmp_path / "releases.rejects.jsonl"
    assert [(r["line"], r["reason"]) for r in rejects] == [
        (index + 2, str(reason)) for index, _spoil, reason, _text in BAD_ROWS
    ]
    for record, (_index, _spoil, _reason, text) in zip(rejects, BAD_ROWS, strict=True):
        assert set(record) == {"line", "reason", "detail"} and text in record["detail"]
    # the release is complete: every window, and every good reading accepted
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len([r for r in records if r["type"] == "window"]) == HOURS
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-2] == (
        f"skipped {len(BAD_ROWS)} bad readings (bad_ts 1, bad_vehicle_id 1, "
        "lat_out_of_range 1, lon_out_of_range 1, malformed_row 1, missing_field 1, "
        f"not_a_number 2, ts_out_of_range 2) -> {rejects_path(out)}"
    )
    accepted = len(readings()) - len(BAD_ROWS)
    assert f"readings accepted {accepted}, rejected {len(BAD_ROWS)}, late 0" in err[-1]


def test_jsonl_and_traj_rows_are_rejected_with_their_line(tmp_path):
    rows = [orjson.dumps(r) for r in readings()[:50]]
    rows[3] = b"{not json"
    rows[7] = b"[1, 2]"
    rows[9] = orjson.dumps({**readings()[9], "lat": 91.0})
    source = tmp_path / "r.jsonl"
    source.write_bytes(b"\n".join(rows) + b"\n")
    rejects = tmp_path / "bad.jsonl"
    assert release(source, tmp_path / "o.jsonl", "--rejects", str(rejects)) == 0
    found = [(r["line"], r["reason"]) for r in map(json.loads, rejects.read_text().splitlines())]
    assert found == [(4, "not_json"), (8, "not_an_object"), (10, "lat_out_of_range")]

    header = "*T*,id,terrestrial,2,0,*P*,terrestrial,2,1,1,0"
    good = f"{header},a,2020-12-01 11:00:00,-74.0,40.7,a,2020-12-01 11:00:30,-74.0,40.701"
    far = f"{header},b,2020-12-01 11:00:00,-74.0,95.0,b,2020-12-01 11:00:30,-74.0,95.001"
    traj = tmp_path / "t.traj"
    traj.write_text("\n".join([good, "*T*,broken", far]) + "\n")
    traj_rejects = tmp_path / "t.rejects.jsonl"
    assert release(traj, tmp_path / "t.jsonl", "--rejects", str(traj_rejects)) == 0
    found = [
        (r["line"], r["reason"]) for r in map(json.loads, traj_rejects.read_text().splitlines())
    ]
    assert found == [(2, "malformed_row"), (3, "lat_out_of_range"), (3, "lat_out_of_range")]


def test_a_non_empty_out_is_replaced_only_with_overwrite(previous, capsys):
    source, out, before = previous
    assert release(source, out) == 2
    message = capsys.readouterr().err.strip()
    assert "\n" not in message and "--overwrite" in message and str(out) in message
    assert listing(out.parent) == before
    assert release(source, out, "--overwrite") == 0
    assert out.read_bytes() != before[out.name]  # fresh noise: a different release
    empty = out.parent / "empty.jsonl"
    empty.touch()
    assert release(source, empty) == 0 and empty.stat().st_size > 0


def test_the_replaced_out_keeps_its_permissions(previous):
    source, out, _before = previous
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o666 & ~umask  # new: as open() makes it
    out.chmod(0o640)
    assert release(source, out, "--overwrite") == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640


def test_out_and_rejects_must_differ_from_the_input(tmp_path):
    source = write_csv(tmp_path / "r.csv", good_rows()[:10])
    before = source.read_bytes()
    assert release(source, tmp_path / "o.jsonl", "--rejects", str(source)) == 2
    assert release(source, source, "--overwrite") == 2
    assert source.read_bytes() == before


def test_release_help_names_the_input_columns_and_formats():
    parser = build_parser()
    command = parser._subparsers._group_actions[0].choices["release"]
    text = " ".join(command.format_help().split())
    assert "vehicle_id, ts, lat, lon, speed" in text
    for word in ("JSON Lines", ".gz", ".traj", "--rejects", "--strict", "--overwrite"):
        assert word in text
    assert "spends their budget again" in text
    assert all(str(reason) in text for reason in RejectReason)


def test_the_configuration_page_lists_every_reject_reason_once():
    page = (Path(__file__).parents[3] / "docs" / "configuration.md").read_text()
    section = page.split("\n## Rejected readings\n", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table = {line.split("`")[1]: line.split("|")[2].strip() for line in rows}
    assert len(rows) == len(table)
    assert table == {str(reason): text for reason, text in DESCRIPTIONS.items()}
    assert set(DESCRIPTIONS) == set(RejectReason)


def test_a_line_that_is_not_utf8_is_rejected_and_the_rest_released(tmp_path, capsys):
    source = write_csv(tmp_path / "readings.csv", good_rows())
    lines = source.read_bytes().split(b"\n")
    lines[5] = b"\xff\xfe" + lines[5]  # the sixth line: the fifth reading
    source.write_bytes(b"\n".join(lines))
    out = tmp_path / "releases.jsonl"
    assert release(source, out) == 0
    rejects = [json.loads(line) for line in rejects_path(out).read_text().splitlines()]
    assert [(r["line"], r["reason"]) for r in rejects] == [(6, "not_utf8")]
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len([r for r in records if r["type"] == "window"]) == HOURS
    assert f"readings accepted {len(readings()) - 1}, rejected 1" in capsys.readouterr().err

    assert release(source, tmp_path / "strict.jsonl", "--strict") == 2
    assert capsys.readouterr().err.strip() == (
        f"stream-dp release: error: {source}:6: not_utf8: not UTF-8 text"
    )


@pytest.mark.parametrize("suffix", [".jsonl", ".traj"])
def test_a_jsonl_or_traj_line_that_is_not_utf8_is_rejected(tmp_path, suffix):
    if suffix == ".jsonl":
        rows = [orjson.dumps(r) for r in readings()[:20]]
    else:
        header = "*T*,id,terrestrial,2,0,*P*,terrestrial,2,1,1,0"
        rows = [
            f"{header},{v},2020-12-01 11:00:00,-74,40.7,{v},2020-12-01 11:00:30,-74,40.7".encode()
            for v in "abc"
        ]
    rows[1] = rows[1][:30] + b"\xc3\x28" + rows[1][30:]  # an invalid two-byte sequence
    source = tmp_path / f"r{suffix}"
    source.write_bytes(b"\n".join(rows) + b"\n")
    rejects = tmp_path / "bad.jsonl"
    assert release(source, tmp_path / "o.jsonl", "--rejects", str(rejects)) == 0
    found = [(r["line"], r["reason"]) for r in map(json.loads, rejects.read_text().splitlines())]
    assert found == [(2, "not_utf8")]


def test_a_truncated_gzip_file_is_one_line_and_leaves_the_previous_out(previous, capsys):
    source, out, before = previous
    packed = gzip.compress(source.read_bytes())
    cut = source.parent / "cut.csv.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    assert release(cut, out, "--overwrite") == 2
    promise, err = capsys.readouterr().err.strip().split("\n")  # the run's start, one error
    assert promise.startswith("promise: each vehicle loses at most epsilon 14 per 7 days")
    assert err.startswith(f"stream-dp release: error: {cut}: cannot read after line ")
    assert err.endswith(": truncated or corrupt gzip data")
    assert listing(out.parent) == before
    assert release(cut, out, "--overwrite", "--strict") == 2
    assert listing(out.parent) == before


def test_produce_names_an_unreadable_file_in_one_line(tmp_path):
    from stream_dp.commands import produce
    from stream_dp.commands.shared import CliError

    source = write_csv(tmp_path / "readings.csv", good_rows()[:200])
    packed = gzip.compress(source.read_bytes())
    source = tmp_path / "cut.csv.gz"
    source.write_bytes(packed[: len(packed) // 2])
    readings, _total = produce._iter_readings(str(source))  # what `produce` sends, lazily
    with pytest.raises(CliError) as info:
        list(readings)
    message = str(info.value)
    assert message.startswith("FILE: ") and "\n" not in message
    assert message.endswith("truncated or corrupt gzip data")
