"""Issue 25 item 7: each command that runs the release shows in its help the defaults it
really uses: serve its budget profile (and the settings' default that replaces each value once
a release setting is given), the demo its own, release the settings'."""

from __future__ import annotations

import argparse
import re

import pytest

from stream_dp.cli import main
from stream_dp.commands import demo, release, serve
from stream_dp.commands.release import default_text, release_option_names
from stream_dp.config import COARSEST_RESOLUTION_STEPS
from tests.unit.commands.test_budget_profile import clean_env, parsed  # noqa: F401

_DEFAULT = re.compile(r"\(default (.+?)(?:; (.+) once a release setting is given)?\)$")


def _defaults(command) -> dict[str, tuple[str, str | None]]:
    """Per numeric release option: the default its help shows, and the 'once' one if any."""
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    (child,) = sub.choices.values()
    shown = {}
    for action in child._actions:
        name = action.dest
        if (
            f"--{name.replace('_', '-')}" in action.option_strings
            and name in release_option_names()
        ):
            match = _DEFAULT.search(str(action.help))
            assert match, action.help
            shown[name] = (match.group(1), match.group(2))
    assert set(shown) == set(release_option_names())
    return shown


def _resolved(text: str, settings) -> str:
    """A shown default with R0's rule applied to the settings' resolution."""
    rule = f"max(0, resolution - {COARSEST_RESOLUTION_STEPS})"
    return str(max(0, settings.resolution - COARSEST_RESOLUTION_STEPS)) if text == rule else text


def test_serve_help_names_the_budget_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["serve", "-h"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "--vehicle-budget X B: each vehicle's epsilon over any budget period (default 14; "
        "unset once a release setting is given)"
    ) in text
    assert "(default 604800; 86400 once a release setting is given)" in text
    assert "(default 10; 15 once a release setting is given)" in text  # T
    assert "per-vehicle budget profile" in text and "--partitions" in text


def test_each_command_s_help_shows_the_defaults_it_runs(clean_env) -> None:  # noqa: F811
    runs = {
        serve: serve.serve_settings(parsed(serve)),
        demo: demo.demo_settings(parsed(demo)),
        release: release.settings_from_args(parsed(release, "in.csv", "--out", "out.jsonl")),
    }
    assert runs[serve].vehicle_budget == 14.0 and runs[release].vehicle_budget is None
    for command, settings in runs.items():
        for name, (shown, _) in _defaults(command).items():
            expected = default_text(name, getattr(settings, name))
            assert _resolved(shown, settings) == expected, (command, name)
    # serve, once a release setting is given (here epsilon, at its default value): the
    # settings' defaults, as its help says after "once".
    clean_env.setenv("STREAM_DP_EPSILON", "1")
    configured = serve.serve_settings(parsed(serve))
    assert configured.vehicle_budget is None
    for name, (shown, once) in _defaults(serve).items():
        expected = default_text(name, getattr(configured, name))
        assert _resolved(once or shown, configured) == expected, name
