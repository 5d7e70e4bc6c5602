"""How the command line shows a setting as an option: its metavar and its default."""

from __future__ import annotations

from typing import Literal, get_args, get_origin

from stream_dp.config import COARSEST_RESOLUTION_STEPS, TARGET_AT_UPPER, Settings


def default_text(name: str, value: object) -> str:
    """A setting's default as the help shows it."""
    if name == "coarsest_resolution" and value is None:
        return f"max(0, resolution - {COARSEST_RESOLUTION_STEPS})"
    if name == "target_mean_error" and value is None:
        target, upper = TARGET_AT_UPPER
        return f"{target:g}/{upper:g} of U, {target:g} at U {upper:g}"
    return "unset" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def setting_default(name: str) -> str:
    """A setting's own default as the help shows it (what an unset option means)."""
    return default_text(name, Settings.model_fields[name].default)


def setting_metavar(name: str) -> str:
    """The metavar of a setting's option: its choices ``{a,b}`` for a setting of named
    choices, N for an integer, X for a number."""
    annotation = Settings.model_fields[name].annotation
    if get_origin(annotation) is Literal:
        return "{" + ",".join(map(str, get_args(annotation))) + "}"
    kinds = set(get_args(annotation) or (annotation,)) - {type(None)}
    return "N" if kinds == {int} else "X"
