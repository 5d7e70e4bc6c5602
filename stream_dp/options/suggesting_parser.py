"""A mistyped option is reported by the (sub)command it was given to: that command's usage
and the closest option it has (argparse on Python 3.11 reports an unrecognised argument with
the top-level usage and suggests nothing)."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import NoReturn


class SuggestingParser(argparse.ArgumentParser):
    """An ArgumentParser whose every error names, for each unknown ``--option`` it was given,
    the closest one it has (``--epsilonn: did you mean --epsilon?``); so do the parsers of
    its sub-commands (argparse makes them of the same class)."""

    given: Sequence[str] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        hints = suggestions(self, self.given)
        super().error(message + (f" ({'; '.join(hints)})" if hints else ""))


def suggestions(parser: argparse.ArgumentParser, given: Sequence[str]) -> list[str]:
    """``--Y: did you mean --X?`` for each ``--option`` of ``given`` that ``parser`` does not know
    (nor as the unique prefix argparse accepts) and that is close to one it does (compared
    without the dashes, which every long option shares)."""
    known = {
        option[2:]: option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--")
    }
    unknown = []
    for arg in given:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        if name.startswith("--") and not any(o.startswith(name[2:]) for o in known):
            unknown.append(name)
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name[2:], list(known), n=1, cutoff=0.6)
        if close:
            hints.append(f"{name}: did you mean {known[close[0]]}?")
    return hints


def command_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The innermost parser ``args`` were parsed by (``ledger export``'s, not ``ledger``'s)."""
    while True:
        chosen = next(
            (
                action.choices[name]
                for action in parser._actions
                if isinstance(action, argparse._SubParsersAction)
                and (name := getattr(args, action.dest, None)) in action.choices
            ),
            None,
        )
        if chosen is None:
            return parser
        parser = chosen
