"""The command line builds the chosen command's parser alone, and lists every command by the
same one-line help its module gives."""

from __future__ import annotations

import argparse

import pytest

from stream_dp import cli

NAMES = [name for name, _, _ in cli.COMMANDS]


def _commands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _listed(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    return {action.dest: action.help for action in _commands(parser)._choices_actions}


@pytest.mark.parametrize("name", NAMES)
def test_a_command_line_starting_with_a_command_builds_that_commands_parser_alone(name) -> None:
    parser = cli.parser_for([name, "--some-option"])
    assert list(_commands(parser).choices) == [name]
    assert _commands(parser).choices[name]._actions  # its options were declared


@pytest.mark.parametrize("argv", [[], ["--help"], ["--version"], ["nope"], ["-h", "plan"]])
def test_any_other_command_line_gets_the_listing(argv: list[str]) -> None:
    assert list(_listed(cli.parser_for(argv))) == NAMES


def test_the_listing_shows_each_commands_own_help_line() -> None:
    """The table's help lines are the ones the command modules register (no drift)."""
    assert _listed(cli.listing_parser()) == _listed(cli.build_parser())
