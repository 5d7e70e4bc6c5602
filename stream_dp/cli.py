"""The `stream-dp` command line: one sub-command per module in `stream_dp.commands`.

Only the chosen command's module is imported and its parser built (``stream-dp plan ...``
builds no other command's options); ``stream-dp --help`` lists every command by its one-line
help in :data:`COMMANDS` and imports none of them.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence

from stream_dp import __version__
from stream_dp.commands.shared import CliError, collector_paused
from stream_dp.options.suggesting_parser import SuggestingParser, command_parser

#: Every command: (name, module whose ``register(subparsers)`` declares its options, one-line
#: help listed by ``stream-dp --help``), in the order listed.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("plan", "stream_dp.commands.plan",
     "what CLIP-USER would do to an occupancy CSV (G1 -> K, errors per cell)"),
    ("experiment", "stream_dp.commands.experiment",
     "reproduce the papers' experiments (plots + CSV)"),
    ("release", "stream_dp.commands.release",
     "run the release offline on a readings file (no Kafka)"),
    ("produce", "stream_dp.commands.produce",
     "replay a file of readings (CSV, JSONL, .gz, .traj) into the readings topic"),
    ("serve", "stream_dp.commands.serve", "run a worker"),
    ("demo", "stream_dp.commands.demo", "embedded broker + worker + real sample replay"),
    ("dashboard", "stream_dp.commands.dashboard", "serve the live map of releases"),
    ("map", "stream_dp.commands.map", "render one released window to a PNG"),
    ("topics", "stream_dp.commands.topics", "list (and create) the topics the service uses"),
    ("ledger", "stream_dp.commands.ledger",
     "back up and restore the release log (the privacy ledger)"),
)  # fmt: skip


#: The last line of any command stopped by SIGINT (Ctrl-C); its exit status is 130.
INTERRUPTED = "stream-dp: stopped by SIGINT"


def _top_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    parser = SuggestingParser(
        prog="stream-dp",
        description="User-level differentially private hexagon-hour statistics from Kafka.",
    )
    parser.add_argument("--version", action="version", version=f"stream-dp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    return parser, sub


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``command`` alone (only its module imported), or with None of every
    command (each module imported; for tests and tools that check every option)."""
    parser, sub = _top_parser()
    for name, module, _ in COMMANDS:
        if command is None or name == command:
            importlib.import_module(module).register(sub)
    return parser


def listing_parser() -> argparse.ArgumentParser:
    """A parser that knows every command by name and one-line help only (for ``--help``,
    ``--version`` and a missing or unknown command): no command module is imported."""
    parser, sub = _top_parser()
    for name, _, help_line in COMMANDS:
        sub.add_parser(name, help=help_line, add_help=False)
    return parser


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser ``argv`` needs: its command's alone when it starts with a command's name."""
    if argv and argv[0] in {name for name, _, _ in COMMANDS}:
        return build_parser(argv[0])
    return listing_parser()


def _sigint_stops() -> None:
    """SIGINT stops every command (exit 130, :data:`INTERRUPTED`), also one started with SIGINT
    ignored, as a shell script starts its background jobs: Python keeps an inherited ignore,
    while ``serve``'s Faust worker handles SIGINT whatever it inherited, so without this the
    demo would run on where ``serve`` stops."""
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set a handler (a command run in a test's thread)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: Sequence[str] | None = None) -> int:
    _sigint_stops()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = parser_for(argv)
    args, extras = parser.parse_known_args(argv)
    if extras:  # exits 2 with the usage of the command they were given to
        command_parser(parser, args).error(f"unrecognized arguments: {' '.join(extras)}")
    try:
        with collector_paused():  # start-up: the settings' import (pydantic)
            _check_environment()
        return int(args.run(args) or 0)
    except CliError as exc:
        print(f"stream-dp {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C, or SIGINT: one way out for every command
        print(INTERRUPTED, file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `stream-dp plan ... --json | head`
        sys.stderr.close()
        return 0


def _check_environment() -> None:
    """Every command stops on a STREAM_DP_* variable that names no setting (a typo)."""
    from stream_dp.config import ConfigError, check_environment

    try:
        check_environment()
    except ConfigError as exc:
        raise CliError(str(exc)) from None


if __name__ == "__main__":  # `python -m stream_dp.cli` (CliError lives in commands.shared)
    sys.exit(main())
