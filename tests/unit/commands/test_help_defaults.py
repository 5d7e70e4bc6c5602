"""Issue 25 item 7, issue 34: each command that runs the release shows in its help the
defaults it really uses: the settings' (the budget profile) for serve and release, the demo's
own where they differ."""

from __future__ import annotations

import argparse
import re

import pytest

from stream_dp.cli import main
from stream_dp.commands import demo, release, serve
from stream_dp.commands.release import default_text, release_option_names
from stream_dp.config import COARSEST_RESOLUTION_STEPS
from tests.unit.commands.test_budget_profile import clean_env, parsed  # noqa: F401

_DEFAULT = re.compile(r"\(default (.+?)\)$")


def _defaults(command) -> dict[str, str]:
    """Per numeric release option: the default its help shows."""
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
            shown[name] = match.group(1)
    assert set(shown) == set(release_option_names())
    return shown


def _resolved(text: str, settings) -> str:
    """A shown default with R0's rule and T's share of U applied to the settings."""
    rule = f"max(0, resolution - {COARSEST_RESOLUTION_STEPS})"
    if text == rule:
        return str(max(0, settings.resolution - COARSEST_RESOLUTION_STEPS))
    if text == "10/65 of U, 10 at U 65":
        return f"{settings.upper * 10 / 65:g}"
    return text


def test_serve_and_release_help_name_the_budget_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command in ("serve", "release"):
        with pytest.raises(SystemExit) as done:
            main([command, "-h"])
        assert done.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        assert (
            "--vehicle-budget X B: each vehicle's epsilon over any budget period (default 14)"
            in text
        )
        assert "the rolling budget period (default 604800)" in text
        assert "none: fixed (default 10/65 of U, 10 at U 65)" in text  # T
        assert "--fixed-epsilon" in text and "once a release setting" not in text


def test_each_command_s_help_shows_the_defaults_it_runs(clean_env) -> None:  # noqa: F811
    runs = {
        serve: serve.serve_settings(parsed(serve)),
        demo: demo.demo_settings(parsed(demo)),
        release: release.settings_from_args(parsed(release, "in.csv", "--out", "out.jsonl")),
    }
    assert runs[serve].vehicle_budget == 14.0 and runs[release].vehicle_budget == 14.0
    for command, settings in runs.items():
        for name, shown in _defaults(command).items():
            expected = default_text(name, getattr(settings, name))
            assert _resolved(shown, settings) == expected, (command, name)
