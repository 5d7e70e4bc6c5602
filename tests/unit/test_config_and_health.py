"""Configuration sources and their precedence, start-up errors naming the field, the worker's
``/healthz`` and ``/readyz`` pages (in process, no broker), and the release-record schema's
``format`` keywords (``uuid``, ``date-time``) enforced by a format checker."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from jsonschema import Draft202012Validator

from stream_dp.cli import build_parser, main
from stream_dp.commands.release import settings_from_args
from stream_dp.config import CONFIG_FILE_ENV, ConfigError, load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine
from tests.support.readings import unclamped_readings
from tests.support.settings import FIXED_EPSILON_MODE
from tests.unit.worker_pages import get, ready_gauge

SCHEMA_PATH = Path(__file__).parents[2] / "stream_dp/schemas/release-record.schema.json"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``STREAM_DP_*`` variable of the calling shell leaks into these tests."""
    for name in list(os.environ):
        if name.startswith("STREAM_DP_"):
            monkeypatch.delenv(name)


def write_readings(path: Path, n: int = 2000) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in unclamped_readings(n, seed=2)))
    return path


# --- configuration -------------------------------------------------------------------------


def use_config_file(monkeypatch: pytest.MonkeyPatch, path: Path, text: str) -> Path:
    path.write_text(text)
    monkeypatch.setenv(CONFIG_FILE_ENV, str(path))
    return path


def test_a_toml_config_file_is_read(monkeypatch, tmp_path):
    use_config_file(
        monkeypatch,
        tmp_path / "stream-dp.toml",
        'epsilon = 0.25\nresolution = 7\ntop-cells = 3\nmean_mechanism = "baseline"\n'
        'pseudo_user = false\ntarget_mean_error = "none"\nvehicle_budget = "none"\n',
    )
    settings = load_settings()
    assert settings.epsilon == 0.25
    assert settings.resolution == 7
    assert settings.top_cells == 3  # a dashed key names the underscored field
    assert settings.mean_mechanism == "baseline"
    assert settings.pseudo_user is False
    assert settings.target_mean_error is None  # TOML has no null: "none" unsets it
    assert settings.upper == 65.0  # not in the file: the default


def test_a_json_config_file_is_read(monkeypatch, tmp_path):
    use_config_file(
        monkeypatch,
        tmp_path / "stream-dp.json",
        json.dumps(
            {
                "epsilon": 0.4,
                "window_seconds": 1800,
                "budget_cap": 2.0,
                "app_id": "cfg",
                "vehicle_budget": "none",
            }  # the cap is the fixed-epsilon mode's
        ),  # fmt: skip
    )
    settings = load_settings()
    assert (settings.epsilon, settings.window_seconds) == (0.4, 1800)
    assert (settings.budget_cap, settings.app_id) == (2.0, "cfg")


def test_the_environment_overrides_the_config_file(monkeypatch, tmp_path):
    use_config_file(monkeypatch, tmp_path / "c.toml", "epsilon = 0.25\nresolution = 7\n")
    monkeypatch.setenv("STREAM_DP_EPSILON", "0.5")
    settings = load_settings()
    assert settings.epsilon == 0.5
    assert settings.resolution == 7  # only in the file: kept


def test_a_command_line_option_overrides_the_environment_and_the_file(monkeypatch, tmp_path):
    use_config_file(monkeypatch, tmp_path / "c.toml", "epsilon = 0.25\nresolution = 7\n")
    monkeypatch.setenv("STREAM_DP_EPSILON", "0.5")
    monkeypatch.setenv("STREAM_DP_MIN_VEHICLES", "2")
    args = build_parser().parse_args(["release", "in.jsonl", "--out", "o", "--epsilon", "0.3"])
    settings = settings_from_args(args)
    assert settings.epsilon == 0.3
    assert settings.resolution == 7  # file only
    assert settings.min_vehicles == 2  # environment only
    # serve passes its own options as extra overrides to the same function
    serve = build_parser().parse_args(["serve", "--web-port", "9123"])
    monkeypatch.setenv("STREAM_DP_WEB_PORT", "9000")
    assert settings_from_args(serve, web_port=serve.web_port).web_port == 9123


def test_the_release_command_uses_the_merged_configuration(monkeypatch, tmp_path):
    """End to end: file < environment < option, seen in the released records."""
    use_config_file(monkeypatch, tmp_path / "c.toml", "epsilon = 0.25\nresolution = 7\n")
    monkeypatch.setenv("STREAM_DP_EPSILON", "0.5")
    monkeypatch.setenv("STREAM_DP_APP_ID", "from-env")
    source = write_readings(tmp_path / "readings.jsonl")
    out = tmp_path / "releases.jsonl"
    argv = ["release", str(source), "--out", str(out), "--epsilon", "0.3", "--fixed-epsilon"]
    assert main(argv) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records
    assert {r["epsilon"] for r in records} == {0.3}
    assert {r["resolution"] for r in records} == {7}


@pytest.fixture
def no_service_start(monkeypatch):
    """Makes `serve` fail loudly instead of starting a broker if validation let it through."""
    from stream_dp.kafka import embedded_broker

    def refuse(self):
        raise AssertionError("serve got past the configuration check")

    monkeypatch.setattr(embedded_broker.EmbeddedBroker, "start", refuse)


@pytest.mark.parametrize("value", ["abc", "-1", "0"])
@pytest.mark.parametrize("command", ["release", "serve"])
def test_a_bad_environment_value_fails_at_start_naming_the_field(
    monkeypatch, tmp_path, capsys, no_service_start, command, value
):
    monkeypatch.setenv("STREAM_DP_EPSILON", value)
    source = write_readings(tmp_path / "readings.jsonl", n=10)
    argv = {
        "release": ["release", str(source), "--out", str(tmp_path / "out.jsonl")],
        "serve": ["serve"],
    }[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"stream-dp {command}: error: invalid setting epsilon (STREAM_DP_EPSILON): must be a "
        f"finite number in (0, 100], got {value}\n"
    )
    assert len(err.strip().splitlines()) == 1  # one line, no traceback
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(
    ("name", "text", "field"),
    [
        ("bad.toml", 'epsilon = "abc"\n', "epsilon"),
        ("bad.json", '{"epsilon": -1}', "epsilon"),
        ("bad-resolution.toml", "resolution = 16\n", "resolution"),
        ("unknown.toml", "epsilon = 0.5\nepsilonn = 0.5\n", "epsilonn: no such setting"),
    ],
)
def test_a_bad_value_in_the_config_file_names_the_field(
    monkeypatch, tmp_path, capsys, name, text, field
):
    use_config_file(monkeypatch, tmp_path / name, text)
    with pytest.raises(ConfigError, match=rf"^invalid setting {field}\b"):
        load_settings()
    source = write_readings(tmp_path / "readings.jsonl", n=10)
    assert main(["release", str(source), "--out", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"stream-dp release: error: invalid setting {field}")
    assert err.count("invalid setting") == 1 and len(err.splitlines()) == 1


def test_an_option_does_not_hide_a_bad_value_of_another_field_in_the_file(monkeypatch, tmp_path):
    use_config_file(monkeypatch, tmp_path / "c.toml", "epsilon = 0.5\nupper = -3\n")
    with pytest.raises(ConfigError, match=r"^invalid setting upper \(STREAM_DP_UPPER\): "):
        load_settings(epsilon=0.7)
    assert load_settings(epsilon=0.7, upper=50.0).epsilon == 0.7  # the option replaces it


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: d / "missing.toml", "cannot read .*missing.toml: No such file or directory"),
        (lambda d: d, "cannot read .*: Is a directory"),
        (lambda d: _write(d / "syntax.toml", "epsilon = \n"), "syntax.toml is not valid"),
        (lambda d: _write(d / "syntax.json", '{"epsilon": '), "syntax.json is not valid"),
        (lambda d: _write(d / "list.json", "[1, 2]"), "must hold a table of settings"),
    ],
    ids=["missing", "directory", "toml-syntax", "json-syntax", "not-a-table"],
)
def test_an_unusable_config_file_is_a_clear_error(monkeypatch, tmp_path, capsys, make, expected):
    path = make(tmp_path)
    monkeypatch.setenv(CONFIG_FILE_ENV, str(path))
    with pytest.raises(ConfigError, match=rf"^{CONFIG_FILE_ENV}: .*{expected}"):
        load_settings()
    source = write_readings(tmp_path / "readings.jsonl", n=10)
    assert main(["release", str(source), "--out", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"stream-dp release: error: {CONFIG_FILE_ENV}: ")
    assert len(err.splitlines()) == 1


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_config_file_that_is_not_utf8_is_a_clear_error(monkeypatch, tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes("app_id = 'x' # caf\xe9\n".encode("latin-1"))
    monkeypatch.setenv(CONFIG_FILE_ENV, str(path))
    with pytest.raises(ConfigError, match=f"{CONFIG_FILE_ENV}: .* is not UTF-8"):
        load_settings()


# --- /healthz and /readyz ------------------------------------------------------------------


async def test_healthz_is_ok_and_readyz_follows_recovery(worker_web):
    runtime, client = worker_web
    # before the runtime started: alive, not ready
    assert await get(client, "/healthz") == (200, {"status": "ok"})
    assert await get(client, "/readyz") == (503, {"status": "recovering"})
    assert await ready_gauge(client) == 0

    runtime.ingest = SimpleNamespace(partitions={}, recovering=0)
    runtime.releaser = SimpleNamespace(rebuilding=False)
    runtime.started.set()
    assert (await get(client, "/readyz"))[0] == 503  # no assignment yet
    runtime.assigned, runtime.assignment_known = {0, 1}, True
    runtime.ingest.partitions[0] = object()
    runtime.ingest.recovering = 1
    assert (await get(client, "/readyz"))[0] == 503  # partition 1 not recovered yet
    runtime.ingest.partitions[1] = object()
    assert (await get(client, "/readyz"))[0] == 503  # a recovery still running
    runtime.ingest.recovering = 0
    runtime.releaser.rebuilding = True
    assert (await get(client, "/readyz"))[0] == 503  # the releaser rebuilding its state
    runtime.releaser.rebuilding = False

    assert await get(client, "/readyz") == (200, {"status": "ready"})
    assert await get(client, "/healthz") == (200, {"status": "ok"})
    assert await ready_gauge(client) == 1

    runtime.assignment_known = False  # a rebalance
    assert await get(client, "/readyz") == (503, {"status": "recovering"})
    assert await get(client, "/healthz") == (200, {"status": "ok"})


async def test_a_failed_worker_is_neither_healthy_nor_ready(worker_web):
    runtime, client = worker_web
    runtime.ingest = SimpleNamespace(partitions={0: object()}, recovering=0)
    runtime.releaser = SimpleNamespace(rebuilding=False)
    runtime.assigned, runtime.assignment_known = {0}, True
    runtime.started.set()
    assert (await get(client, "/readyz"))[0] == 200
    runtime.failed = "releaser: RuntimeError"  # what WorkerRuntime.fail records
    assert await get(client, "/healthz") == (
        503,
        {"status": "failed", "reason": "releaser: RuntimeError"},
    )
    assert (await get(client, "/readyz"))[0] == 503


# --- release-record schema formats ---------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    checker = Draft202012Validator.FORMAT_CHECKER
    # jsonschema checks "date-time" only with rfc3339-validator installed: insist on it
    assert {"uuid", "date-time"} <= set(checker.checkers), sorted(checker.checkers)
    return Draft202012Validator(schema, format_checker=checker)


@pytest.fixture(scope="module")
def engine_records() -> list[dict]:
    settings = load_settings(resolution=7, **FIXED_EPSILON_MODE)  # cells on this small data
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(5)))
    data = unclamped_readings(3000, seed=1)
    out = [rec for rr in (engine.feed(data), engine.finish()) for r in rr for rec in r.records]
    assert {r["type"] for r in out} == {"cell", "window"}
    assert len({r["window_start"] for r in out}) == 3
    return out


def all_errors(errors):
    """The errors and, recursively, those under ``oneOf``/``allOf`` (their context)."""
    for error in errors:
        yield error
        yield from all_errors(error.context or [])


def test_engine_records_pass_the_schema_with_formats_checked(validator, engine_records):
    for record in engine_records:
        problems = [e.message for e in validator.iter_errors(record)]
        assert not problems, (record, problems)
        assert str(uuid.UUID(record["release_id"])) == record["release_id"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("release_id", "not-a-uuid"),
        ("release_id", "1bd3f5ac-d5fd-58c3-be52-29156bbc3cdg"),
        ("window_start", "2023-13-45T25:61:00Z"),
        ("window_start", "2023-11-14T22:00Z"),
        ("window_start", "2023-11-14 22:00:00Z"),
        ("window_end", "Tuesday 22:00Z"),
    ],
)
@pytest.mark.parametrize("kind", ["cell", "window"])
def test_a_malformed_id_or_timestamp_is_rejected_by_its_format(
    validator, engine_records, kind, field, value
):
    record = dict(next(r for r in engine_records if r["type"] == kind))
    assert validator.is_valid(record)
    record[field] = value
    # the value passes every other keyword (e.g. the "Z$" pattern): only the format rejects it
    without_formats = Draft202012Validator(validator.schema)
    assert without_formats.is_valid(record)
    errors = list(all_errors(validator.iter_errors(record)))
    assert errors, f"{field}={value!r} was accepted"
    assert any(e.validator == "format" and list(e.path) == [field] for e in errors), [
        (e.validator, list(e.path), e.message) for e in errors
    ]


def test_the_json_suffix_is_recognised_in_any_case(monkeypatch, tmp_path):
    path = tmp_path / "settings.JSON"
    path.write_text('{"epsilon": 0.25}')
    monkeypatch.setenv(CONFIG_FILE_ENV, str(path))
    assert load_settings().epsilon == 0.25


def test_the_future_limit_can_be_switched_off_from_the_environment(monkeypatch):
    assert load_settings().max_future_seconds == 3600.0
    monkeypatch.setenv("STREAM_DP_MAX_FUTURE_SECONDS", "none")
    assert load_settings().max_future_seconds is None
    monkeypatch.setenv("STREAM_DP_MAX_FUTURE_SECONDS", "-5")
    with pytest.raises(ConfigError, match="max_future_seconds"):
        load_settings()
