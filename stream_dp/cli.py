"""The `stream-dp` command line: one sub-command per module in `stream_dp.commands`."""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from stream_dp import __version__

COMMANDS = (
    "plan",
    "experiment",
    "release",
    "produce",
    "serve",
    "demo",
    "dashboard",
    "map",
    "topics",
)


class CliError(Exception):
    """A bad command-line value: printed as one line, exit status 2."""


class MissingExtraError(CliError):
    """A command needs an optional dependency group that is not installed."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"{module} is not installed; this command needs the {extra!r} extra: "
            f'pip install "stream-dp[{extra}]"'
        )


def require_extra(module: str, extra: str) -> None:
    """Raise :class:`MissingExtraError` unless ``module`` can be imported."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError:
        raise MissingExtraError(module, extra) from None


def cannot_read(label: str, path: str | Path, exc: BaseException | None = None) -> CliError:
    """The one wording of every command for a file it cannot read."""
    return CliError(unreadable_file_message(label, path, exc))


def unreadable_file_message(label: str, path: str | Path, exc: BaseException | None = None) -> str:
    """``LABEL: cannot read PATH: REASON``; the reason from ``exc`` or from the path itself."""
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
    elif exc is not None:
        reason = str(exc)
    elif not Path(path).exists():
        reason = "No such file or directory"
    elif Path(path).is_dir():
        reason = "Is a directory"
    else:
        reason = "not a readable file"
    return f"{label}: cannot read {path}: {reason}"


def parse_int_option(name: str, text: str, minimum: int) -> int:
    """``--name``'s integer value, or a CliError naming the option (checked in
    :mod:`stream_dp.config`, beside every setting's check)."""
    from stream_dp.config import ConfigError, parse_int_option

    try:
        return parse_int_option(name, text, minimum)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


_ROLE = re.compile(r":[a-z]+:`\.?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``|`([^`]+)`")


def plain_text(doc: str | None) -> str:
    """A docstring as help text: reST roles and literals become their plain words."""
    text = _ROLE.sub(r"\1", doc or "")
    return _LITERAL.sub(lambda m: m.group(1) or m.group(2), text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-dp",
        description="User-level differentially private hexagon-hour statistics from Kafka.",
    )
    parser.add_argument("--version", action="version", version=f"stream-dp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"stream_dp.commands.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_environment()
        return int(args.run(args) or 0)
    except CliError as exc:
        print(f"stream-dp {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
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


if __name__ == "__main__":
    # Run as `python -m stream_dp.cli`, this module is `__main__`; the commands raise
    # `stream_dp.cli.CliError`, so dispatch through the imported module, not this copy.
    from stream_dp.cli import main as imported_main

    sys.exit(imported_main())
