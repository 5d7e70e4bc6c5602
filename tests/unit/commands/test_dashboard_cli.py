"""`stream-dp dashboard`'s bad values fail fast with one line naming the option (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_dp.cli import main


@pytest.fixture(autouse=True)
def no_bootstrap(monkeypatch) -> None:
    monkeypatch.delenv("STREAM_DP_KAFKA_BOOTSTRAP", raising=False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "invalid setting kafka_bootstrap (STREAM_DP_KAFKA_BOOTSTRAP): not set"),
        (["--bootstrap", "127.0.0.1:9", "--web-port", "http"], "--web-port must be an integer"),
        (["--bootstrap", "127.0.0.1:9", "--max-windows", "0"], "--max-windows must be >= 1"),
        (
            ["--bootstrap", "127.0.0.1:9", "--upper", "-1"],
            "invalid setting upper (STREAM_DP_UPPER): must be a finite number > 0, got -1",
        ),
    ],
)
def test_bad_values_name_the_option(args: list[str], message: str, capsys) -> None:
    assert main(["dashboard", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("stream-dp dashboard: error:")
    assert message in err[0]


def test_a_releases_file_that_is_not_jsonl_is_named(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "releases.jsonl"
    bad.write_text('{"type": "window"}\nnot json\n')
    assert main(["dashboard", "--releases-file", str(bad)]) == 2
    assert f"{bad}:2: not JSON" in capsys.readouterr().err
