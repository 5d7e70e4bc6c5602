"""Every setting is checked in one place (``config.Settings``) and a bad one is reported in one
line naming it, whether it came from a flag, a ``STREAM_DP_*`` variable or the config file;
the defaults are the recommended accuracy-targeted adaptive cells (issue 26, items 3 and 4)."""

from __future__ import annotations

import math
import os
from typing import Any, get_args

import pytest

from stream_dp.cli import main
from stream_dp.config import CONFIG_FILE_ENV, ConfigError, Settings, load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine
from tests.support.readings import synthetic_readings
from tests.support.settings import FIXED_EPSILON_MODE, fixed_mode_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("STREAM_DP_"):
            monkeypatch.delenv(name)


def _numeric_fields() -> list[str]:
    """Every int or float setting (optional ones too), read from the model: a new one is in."""
    out = []
    for name, info in Settings.model_fields.items():
        kinds = {info.annotation, *get_args(info.annotation)}
        if kinds & {int, float}:
            out.append(name)
    return out


NUMERIC = _numeric_fields()
NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def test_the_walk_finds_the_numeric_settings() -> None:
    assert {"epsilon", "upper", "resolution", "delta", "target_mean_error"} <= set(NUMERIC)
    assert "pseudo_user" not in NUMERIC  # bool is no number here
    assert len(NUMERIC) >= 25


def _refused(field: str, err: str) -> None:
    variable = f"STREAM_DP_{field.upper()}"
    assert err.startswith(f"invalid setting {field} ("), err
    assert variable in err and "must be" in err, err
    assert "\n" not in err and err.count("invalid setting") == 1, err


@pytest.mark.parametrize("field", NUMERIC)
@pytest.mark.parametrize("text", NON_FINITE)
def test_every_number_setting_refuses_non_finite_values_from_every_source(
    field: str, text: str, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    with pytest.raises(ConfigError) as given:
        load_settings(**{field: NON_FINITE[text]})
    _refused(field, str(given.value))
    monkeypatch.setenv(f"STREAM_DP_{field.upper()}", text)
    with pytest.raises(ConfigError) as from_env:
        load_settings()
    _refused(field, str(from_env.value))
    monkeypatch.delenv(f"STREAM_DP_{field.upper()}")
    config = tmp_path / "c.toml"
    config.write_text(f"{field} = {text}\n")  # TOML's own inf / -inf / nan
    monkeypatch.setenv(CONFIG_FILE_ENV, str(config))
    with pytest.raises(ConfigError) as from_file:
        load_settings()
    _refused(field, str(from_file.value))


def _just_outside(info: Any) -> list[float]:
    """A value just past each bound of a field (its Ge/Gt/Le/Lt constraints)."""
    out = []
    for m in info.metadata:
        for attr, step in (("ge", -1), ("gt", 0), ("le", 1), ("lt", 0)):
            if getattr(m, attr, None) is not None:
                out.append(getattr(m, attr) + step)
    return out


@pytest.mark.parametrize("field", [f for f in NUMERIC if _just_outside(Settings.model_fields[f])])
def test_every_bounded_number_setting_refuses_a_value_just_outside(field: str) -> None:
    for value in _just_outside(Settings.model_fields[field]):
        with pytest.raises(ConfigError) as refused:
            load_settings(**{field: value})
        _refused(field, str(refused.value))
        assert str(refused.value).endswith(f"got {value!r}")


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--epsilon", "inf"], {}, "epsilon (--epsilon / STREAM_DP_EPSILON): must be a finite "
         "number in (0, 100], got inf"),
        (["--upper", "inf"], {}, "upper (--upper / STREAM_DP_UPPER): must be a finite number"),
        (["--resolution", "nan"], {}, "resolution (--resolution / STREAM_DP_RESOLUTION): must "
         "be an integer in [0, 15], got nan"),
        (["--target-mean-error=-inf"], {}, "target_mean_error (--target-mean-error / "),
        (["--variance-share", "1"], {}, "variance_share (--variance-share / "),
        ([], {"STREAM_DP_UPPER": "inf"}, "upper (STREAM_DP_UPPER): must be a finite number > 0"),
        ([], {"STREAM_DP_GRACE_SECONDS": "nan"}, "grace_seconds (STREAM_DP_GRACE_SECONDS): "),
        ([], {"STREAM_DP_BUDGET_CAP": "0.5"}, "budget_cap (STREAM_DP_BUDGET_CAP): must be >= "),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", ["release", "demo", "serve"])
def test_a_bad_flag_or_variable_stops_the_command_in_one_line(
    command: str, argv: list[str], env: dict[str, str], expected: str, monkeypatch, capsys,
    tmp_path,
) -> None:  # fmt: skip
    from stream_dp.kafka import embedded_broker

    def refuse(*_: object) -> None:
        raise AssertionError("the command got past the settings check")

    monkeypatch.setattr(embedded_broker.EmbeddedBroker, "start", refuse)
    monkeypatch.setattr(embedded_broker.EmbeddedBroker, "__enter__", refuse)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    source = tmp_path / "r.csv"
    source.write_text("vehicle_id,ts,lat,lon,speed\nv,1700000000,40.7,-74.0,30\n")
    out = tmp_path / "out.jsonl"
    first = {"release": ["release", str(source), "--out", str(out)], "demo": ["demo"]}
    assert main([*first.get(command, [command]), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"stream-dp {command}: error: invalid setting {expected}"), err
    assert len(err.splitlines()) == 1  # no traceback, one prefix
    assert not out.exists()


def test_the_defaults_are_the_budget_profile() -> None:
    settings = Settings()
    assert (settings.target_mean_error, settings.coarsest_resolution) == (10.0, 3)
    assert (settings.resolution, settings.variance_share, settings.epsilon) == (8, 0.0, 1.0)
    assert (settings.vehicle_budget, settings.budget_period_seconds) == (14.0, 7 * 86400)


@pytest.mark.parametrize(("resolution", "coarsest"), [(8, 3), (9, 4), (5, 0), (2, 0)])
def test_a_target_alone_merges_up_to_five_resolutions(resolution: int, coarsest: int) -> None:
    settings = load_settings(resolution=resolution, target_mean_error=10.0)
    assert settings.coarsest_resolution == coarsest
    assert load_settings(resolution=9, coarsest_resolution=9).coarsest_resolution == 9  # as set


@pytest.mark.parametrize(
    "how", [("--fixed-cells",), ("--target-mean-error", "none", "--fixed-epsilon")]
)
def test_the_fixed_mode_is_one_flag_away(how: tuple[str, ...], tmp_path) -> None:
    from stream_dp.cli import build_parser
    from stream_dp.commands.release import settings_from_args

    args = build_parser().parse_args(["release", "f.csv", "--out", "o", *how])
    settings = settings_from_args(args)
    assert settings.target_mean_error is None and settings.coarsest_resolution is None
    assert settings.vehicle_budget is None


def test_the_fixed_mode_survives_the_worker_environment(monkeypatch) -> None:
    """The demo hands its settings to the worker as variables: unset must stay unset."""
    fixed = fixed_mode_settings()
    for name, value in fixed.to_env().items():
        monkeypatch.setenv(name, value)
    assert load_settings() == fixed


def _released_cells(settings: Settings) -> int:
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(3)))
    readings = synthetic_readings(80, hours=1, per_hour=400, seed=5)
    releases = [*engine.feed(readings), *engine.finish()]
    return sum(len(r.cells) for r in releases)


def test_a_target_alone_releases_cells_where_merging_nothing_released_none() -> None:
    """Before the default R0, ``target_mean_error`` alone kept R0 = resolution: sparse cells
    could not merge, and nothing met the target."""
    alone = load_settings(resolution=9, **FIXED_EPSILON_MODE)
    unmerged = load_settings(resolution=9, coarsest_resolution=9, **FIXED_EPSILON_MODE)
    assert _released_cells(unmerged) == 0
    assert _released_cells(alone) > 0


def test_another_mechanism_asked_for_alone_gets_fixed_cells(monkeypatch) -> None:
    """The targeted default needs clip; choosing another mechanism does not fail on a value
    the user never set, but a target set explicitly with it is refused naming the target."""
    from stream_dp.release.params import ReleaseParams, checked_settings

    fixed_epsilon = {"mean_mechanism": "cummings", "delta": 1e-6, "vehicle_budget": "none"}
    cummings = checked_settings(load_settings(**fixed_epsilon))
    assert cummings.target_mean_error is None and cummings.coarsest_resolution is None
    params = ReleaseParams.from_settings(load_settings(**fixed_epsilon))
    assert params.target_mean_error is None  # the release's parameters follow the same rule
    assert checked_settings(load_settings()).target_mean_error == 10.0  # clip keeps the default
    with pytest.raises(ConfigError, match=r"^invalid setting target_mean_error \("):
        checked_settings(load_settings(target_mean_error=15.0, **fixed_epsilon))
    monkeypatch.setenv("STREAM_DP_TARGET_MEAN_ERROR", "15")  # explicit from a variable too
    with pytest.raises(ConfigError, match=r"^invalid setting target_mean_error \("):
        checked_settings(load_settings(mean_mechanism="baseline", vehicle_budget="none"))


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--vehicle-budget", "14", "--budget-period-seconds", "5400"], {},
         "budget_period_seconds (--budget-period-seconds / STREAM_DP_BUDGET_PERIOD_SECONDS): "
         "must be a multiple of window_seconds (3600) with vehicle_budget, got 5400"),
        (["--vehicle-budget", "14", "--budget-period-seconds", "1800"], {},
         "budget_period_seconds (--budget-period-seconds / STREAM_DP_BUDGET_PERIOD_SECONDS): "
         "must be a multiple of window_seconds (3600) with vehicle_budget, got 1800"),
        (["--fixed-epsilon", "--vehicle-budget-burst", "2"], {},
         "vehicle_budget_burst (--vehicle-budget-burst / STREAM_DP_VEHICLE_BUDGET_BURST): "
         "has no effect without vehicle_budget"),
        (["--fixed-epsilon"], {"STREAM_DP_MAX_SPAN_HOURS": "4"},
         "max_span_hours (STREAM_DP_MAX_SPAN_HOURS): has no effect without vehicle_budget"),
        (["--vehicle-budget", "14", "--mean-mechanism", "cummings", "--delta", "1e-6"], {},
         "mean_mechanism (--mean-mechanism / STREAM_DP_MEAN_MECHANISM): vehicle_budget needs "
         "mean_mechanism 'clip'"),
        (["--vehicle-budget", "14", "--mean-mechanism", "cummings"], {},
         "mean_mechanism (--mean-mechanism / STREAM_DP_MEAN_MECHANISM): vehicle_budget needs "
         "mean_mechanism 'clip'"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", ["release", "serve"])
def test_budget_settings_that_make_no_sense_are_refused_in_one_line(
    command: str, argv: list[str], env: dict[str, str], expected: str, monkeypatch, capsys,
    tmp_path,
) -> None:  # fmt: skip
    test_a_bad_flag_or_variable_stops_the_command_in_one_line(
        command, argv, env, expected, monkeypatch, capsys, tmp_path
    )


def test_the_budget_profile_and_a_budget_with_its_knobs_are_accepted() -> None:
    from stream_dp.commands.profile import BUDGET_PROFILE
    from stream_dp.release.params import checked_settings

    profile = checked_settings(load_settings(**BUDGET_PROFILE))
    assert profile.vehicle_budget == 14.0 and profile.max_span_hours == 8
    knobs = load_settings(
        vehicle_budget=14.0, vehicle_budget_burst=3.0, max_span_hours=4,
        budget_period_seconds=7200, window_seconds=1800,
    )  # fmt: skip
    assert checked_settings(knobs).vehicle_burst == 3.0
    plain = load_settings(max_span_hours=8, budget_period_seconds=5400, vehicle_budget="none")
    assert plain.vehicle_budget is None
