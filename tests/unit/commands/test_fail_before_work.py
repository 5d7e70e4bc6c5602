"""Issue 34 items 5 and 6: bad outputs stop a command before it reads its input (the option
named, nothing left behind); `produce --strict` stops at the first bad row before sending;
`release` counts the blank lines it skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

import stream_dp.sources
from stream_dp.cli import main
from tests.unit.commands.test_release_output import good_rows, release, write_csv


def tree(directory: Path) -> list[str]:
    """Every path under ``directory``, relative to it."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@pytest.fixture
def unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading any input file fails the test: the command must stop before the work."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the input was read before the outputs were checked")

    monkeypatch.setattr(stream_dp.sources, "numbered_readings", refuse)


@pytest.mark.parametrize("option", ["--out", "--rejects", "--ledger-out"])
def test_release_to_a_directory_fails_before_reading_naming_the_option(
    option: str, tmp_path: Path, unread: None, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_csv(tmp_path / "readings.csv", good_rows()[:50])
    target = tmp_path / "a_directory"
    target.mkdir()
    outputs = {"--out": tmp_path / "o.jsonl", option: target}
    argv = [str(source), *(a for name, path in outputs.items() for a in (name, str(path)))]
    before = tree(tmp_path)

    assert main(["release", *argv]) == 2

    err = capsys.readouterr().err.strip()
    assert err == f"stream-dp release: error: {option}: cannot write {target}: Is a directory"
    assert tree(tmp_path) == before


def test_release_counts_the_blank_lines_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_csv(tmp_path / "readings.csv", good_rows())
    lines = source.read_text().splitlines(keepends=True)
    source.write_text("".join(lines[:5] + ["\n", "  \n"] + lines[5:] + ["\n"]))
    assert release(source, tmp_path / "o.jsonl") == 0
    err = capsys.readouterr().err
    assert "skipped 3 blank lines" in err and "rejected 0" in err


def test_map_refuses_an_out_that_is_no_png_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "absent.jsonl"  # would fail as unreadable if it were read first
    out = tmp_path / "x.html"
    assert main(["map", str(missing), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"stream-dp map: error: --out: {out} must end in .png (the map is a PNG image)"
    assert not out.exists()


def test_produce_strict_stops_at_the_first_bad_row_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_csv(tmp_path / "readings.csv", good_rows()[:20])
    lines = source.read_text().splitlines(keepends=True)
    source.write_text("".join([*lines[:4], lines[0], *lines[4:]]))  # a header on line 5
    # no broker listens on port 1: the run must stop before it connects
    status = main(["produce", str(source), "--bootstrap", "127.0.0.1:1", "--strict"])
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"stream-dp produce: error: {source}:5: repeated_header: ")
    assert "\n" not in err


def test_serve_refuses_port_0_in_one_line_before_starting_anything(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faust refuses port 0 with a traceback, after the embedded broker started."""
    monkeypatch.delenv("STREAM_DP_WEB_PORT", raising=False)
    assert main(["serve", "--web-port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "stream-dp serve: error: invalid setting web_port (--web-port / STREAM_DP_WEB_PORT): "
        "serve needs a port in [1, 65535], got 0"
    )
