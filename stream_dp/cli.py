"""The ``stream-dp`` command line: one sub-command per module in ``stream_dp.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS = ("plan", "experiment", "release", "produce", "serve", "demo", "topics")


class CliError(Exception):
    """A bad command-line value: printed as one line, exit status 2."""


def parse_int_option(name: str, text: str, minimum: int) -> int:
    """``--name``'s integer value, or a CliError naming the option."""
    try:
        value = int(text)
    except ValueError:
        raise CliError(f"--{name} must be an integer, got {text!r}") from None
    if value < minimum:
        raise CliError(f"--{name} must be >= {minimum}, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-dp",
        description="User-level differentially private hexagon-hour statistics from Kafka.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"stream_dp.commands.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except CliError as exc:
        print(f"stream-dp {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `stream-dp plan ... --json | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    # Run as ``python -m stream_dp.cli``, this module is ``__main__``; the commands raise
    # ``stream_dp.cli.CliError``, so dispatch through the imported module, not this copy.
    from stream_dp.cli import main as imported_main

    sys.exit(imported_main())
