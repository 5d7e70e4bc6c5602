"""The privacy_model setting (docs/configuration.md) and ``stream-dp release --privacy-model
secret-routes`` end to end: bad values fail fast naming the field, the public model's knobs
are refused, every record names the model and passes the schema."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from stream_dp.cli import main
from stream_dp.commands import serve
from stream_dp.config import ConfigError, load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.worker.metrics import ServiceMetrics

#: The noise seed of the CLI release test (its error bar holds at this draw).
SEED = 11

SCHEMA = Path(__file__).parents[3] / "stream_dp/schemas/release-record.schema.json"


def test_an_unknown_privacy_model_fails_naming_the_field(monkeypatch) -> None:
    monkeypatch.setenv("STREAM_DP_PRIVACY_MODEL", "routes-secret")
    with pytest.raises(ConfigError, match="privacy_model"):
        load_settings()


@pytest.mark.parametrize(
    ("name", "value"),
    [("top_cells", 3), ("min_vehicles", 2), ("vehicle_budget_burst", 1.0),
     ("max_span_hours", 2), ("target_mean_error", 5.0), ("variance_share", 0.5),
     ("vehicle_budget", "none")],
)  # fmt: skip
def test_public_occupancy_knobs_are_refused_under_secret_routes(name, value) -> None:
    with pytest.raises(ConfigError, match=name):
        load_settings(privacy_model="secret-routes", **{name: value})


def test_secret_routes_knobs_are_refused_under_public_occupancy() -> None:
    with pytest.raises(ConfigError, match="contribution_cells.*without privacy_model"):
        load_settings(contribution_cells=2)
    assert (
        load_settings(privacy_model="secret-routes", contribution_cells=2).contribution_cells == 2
    )


def test_serve_takes_secret_routes(capsys) -> None:
    """Its settings pass (issue 36): the only refusal left here is the port's."""
    assert main(["serve", "--privacy-model", "secret-routes", "--web-port", "0"]) == 2
    err = capsys.readouterr().err
    assert "web_port" in err and "privacy_model" not in err


def test_plan_under_secret_routes_reads_no_occupancy(monkeypatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setenv("STREAM_DP_PRIVACY_MODEL", "secret-routes")
    occupancy = tmp_path / "occupancy.csv"
    occupancy.write_text("cell,vehicle,readings\nc1,v1,3\n")
    assert main(["plan", str(occupancy)]) == 2
    assert "reads no occupancy" in capsys.readouterr().err


def test_release_cli_end_to_end(tmp_path: Path, capsys, monkeypatch) -> None:
    # Seeded noise: the error bar below holds with probability >= 95 % over the noise, so an
    # unseeded draw failed this test 1 run in 20 (a CI run did); the bars' coverage is tested
    # over many draws in test_secret_dp_pieces.py.
    seeded = RandomSource.seeded_for_tests(SEED)
    fresh = LaplaceNoise.__init__
    monkeypatch.setattr(
        LaplaceNoise, "__init__", lambda self, source=None: fresh(self, source or seeded)
    )
    rows = [
        {"vehicle_id": f"v{i}", "ts": 1_700_006_400 + i, "lat": 40.7, "lon": -74.0, "speed": 30}
        for i in range(400)
    ]
    path = tmp_path / "in.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    out = tmp_path / "out.jsonl"
    code = main(["release", str(path), "--out", str(out), "--privacy-model", "secret-routes",
                 "--window-seconds", "3600", "--resolution", "7",
                 "--from", "2023-11-15T00:00:00Z", "--to", "1700010000"])  # fmt: skip
    assert code == 0
    assert "promise (secret-routes)" in capsys.readouterr().err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["type"] for r in records} == {"cell", "window"}
    validator = Draft202012Validator(json.loads(SCHEMA.read_text()))
    for record in records:
        assert record["privacy_model"] == "secret-routes"
        assert not list(validator.iter_errors(record)), record
    cell = next(r for r in records if r["type"] == "cell")
    assert cell["mean_low"] <= cell["mean"] <= cell["mean_high"]
    assert abs(cell["mean"] - 30) < cell["mean_error"] + 1e-9


def test_serve_ends_with_every_vehicle_s_period_loss_under_secret_routes() -> None:
    metrics = ServiceMetrics()
    metrics.set_model_loss(
        {
            "privacy_model": "secret-routes",
            "epsilon_window": 0.27,
            "delta_window": 6e-10,
            "epsilon_period": 1.08,
            "delta_period": 9e-7,
        }
    )
    settings = load_settings(privacy_model="secret-routes")
    assert serve.busiest_period_line(metrics, settings) == (
        "every vehicle's loss over the period so far (secret-routes): epsilon 1.08 at delta "
        "9e-07; promise (secret-routes): every vehicle loses at most epsilon 14 at delta "
        "1e-06 per 7 days"
    )
    assert serve.start_line(settings).startswith("promise (secret-routes): every vehicle")
