"""What the commands share: the one-line error a command stops with, and its wordings.

The command modules import these from here, never from ``stream_dp.cli``, which imports the
commands: no import cycle between the command line and its commands.
"""

from __future__ import annotations

import gc
import importlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


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


# Performance (benchmarks/plan_startup.py): imports (pydantic's settings, a command's
# numerics) and a plan's stages create many objects and no cycles worth collecting; the
# collector's repeated passes over them cost about a tenth of ``stream-dp plan``.
@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused inside the block (restored after it)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


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


def add_bootstrap_option(parser: Any, otherwise: str = "") -> None:
    """``--bootstrap HOST:PORT[,...]``, the same in every command that reaches Kafka;
    ``otherwise``: what the command does with neither it nor the variable."""
    parser.add_argument(
        "--bootstrap",
        metavar="HOST:PORT[,...]",
        help=f"Kafka bootstrap servers (default STREAM_DP_KAFKA_BOOTSTRAP{otherwise})",
    )


def check_writable(label: str, path: Path) -> None:
    """Fail before the work: a CliError naming the option ``label`` unless ``path`` can be
    written whole (a new file in its directory, renamed over it: ``atomic_output``)."""
    if path.is_dir():
        reason = "Is a directory"
    elif not path.parent.is_dir():
        reason = "No such directory"
    elif not os.access(path.parent, os.W_OK | os.X_OK):
        reason = "Permission denied"
    else:
        return
    raise CliError(f"{label}: cannot write {path}: {reason}")


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


def settings_with_bootstrap(bootstrap: str | None, needed_by: str | None = None) -> Any:
    """The settings with ``--bootstrap`` over ``STREAM_DP_KAFKA_BOOTSTRAP``; a CliError for a bad
    setting, or, when ``needed_by`` names what needs a broker, for none given."""
    from stream_dp.config import ConfigError, load_settings

    try:
        settings = load_settings(kafka_bootstrap=bootstrap)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    if needed_by is not None and not settings.kafka_bootstrap:
        raise CliError(f"{needed_by} (or STREAM_DP_KAFKA_BOOTSTRAP)")
    return settings


def plain_text(doc: str | None) -> str:
    """A docstring as help text: reST roles and literals become their plain words."""
    text = _ROLE.sub(r"\1", doc or "")
    return _LITERAL.sub(lambda m: m.group(1) or m.group(2), text)


def require_public_occupancy(settings: Any, command: str) -> None:
    """``serve`` and ``demo`` run the public-occupancy model only, for now: secret-routes
    (docs/math.md §14) is released offline by ``stream-dp release``."""
    if settings.privacy_model != "public-occupancy":
        raise CliError(
            f"invalid setting privacy_model (--privacy-model / STREAM_DP_PRIVACY_MODEL): "
            f"{command} runs public-occupancy only; secret-routes is released by "
            "'stream-dp release --privacy-model secret-routes FILE'"
        )
