"""How a bad setting is reported: one line naming the setting, its flag and its variable.

:class:`~stream_dp.config.Settings` does the checking (field constraints, finite numbers
only, and its cross-field rules, which raise :class:`SettingError`); this module turns
pydantic's errors into that one line, so every source of a value (flag, ``STREAM_DP_*``
variable, config file, the demo's defaults) is reported the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, get_args

from annotated_types import Ge, Gt, Le, Lt
from pydantic import ValidationError
from pydantic.fields import FieldInfo

ENV_PREFIX = "STREAM_DP_"
#: Written for an optional setting (flag, variable or config file) to unset it.
NONE_WORD = "none"


class ConfigError(ValueError):
    """An invalid configuration value; the message names the field."""


class SettingError(ValueError):
    """Raised by a cross-field rule of the settings: ``field`` is the setting to change."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


def label(field: str, flags: Collection[str] = ()) -> str:
    """``epsilon (--epsilon / STREAM_DP_EPSILON)``; the flag only where ``flags`` has it."""
    names = [f"--{field.replace('_', '-')}"] if field in flags else []
    names.append(ENV_PREFIX + field.upper())
    return f"{field} ({' / '.join(names)})"


def numeric_rule(info: FieldInfo) -> str | None:
    """``a finite number > 0``, ``an integer in [0, 15]``: what a numeric field accepts."""
    kinds = {t for t in (info.annotation, *get_args(info.annotation)) if t in (int, float)}
    if not kinds:
        return None
    kind = "an integer" if kinds == {int} else "a finite number"
    low = high = None
    for m in info.metadata:
        if isinstance(m, (Ge, Gt)):
            low = (">=", m.ge) if isinstance(m, Ge) else (">", m.gt)
        elif isinstance(m, (Le, Lt)):
            high = ("<=", m.le) if isinstance(m, Le) else ("<", m.lt)
    unset = f" (or {NONE_WORD})" if type(None) in get_args(info.annotation) else ""
    if low and high and low[0] == ">=" and high[0] == "<=":
        return f"{kind} in [{low[1]:g}, {high[1]:g}]{unset}"
    parts = [f"{op} {value:g}" for op, value in filter(None, (low, high))]
    return " ".join([kind, " and ".join(parts)]).strip() + unset


def explain(
    exc: ValidationError, fields: Mapping[str, FieldInfo], flags: Collection[str] = ()
) -> ConfigError:
    """One line for pydantic's errors: ``invalid setting NAME (...): REASON``, joined by ``;``."""
    problems: dict[str, str] = {}
    for err in exc.errors():
        error = (err.get("ctx") or {}).get("error")
        if isinstance(error, SettingError):
            field, reason = error.field, error.reason
        else:
            field = str(err["loc"][0]) if err["loc"] else "configuration"
            info = fields.get(field)
            rule = numeric_rule(info) if info is not None else None
            reason = (
                f"must be {rule}, got {_shown(err['input'])}"
                if rule and err["type"] != "value_error"
                else _message(err)
            )
        name = label(field, flags) if field in fields else field
        problems.setdefault(field, f"invalid setting {name}: {reason}")
    return ConfigError("; ".join(problems.values()))


def none_word_to_none(value: Any) -> Any:
    """``"none"`` (any case) means unset: TOML has no null, and a flag takes only text."""
    if isinstance(value, str) and value.strip().lower() == NONE_WORD:
        return None
    return value


def parse_int_option(name: str, text: str, minimum: int) -> int:
    """``--name``'s integer value (a command's own option), or a :class:`ConfigError`."""
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"--{name} must be an integer, got {text!r}") from None
    if value < minimum:
        raise ConfigError(f"--{name} must be >= {minimum}, got {value}")
    return value


def _shown(value: Any) -> str:
    """A bad value as the user wrote it; text quoted only where blank or spaced."""
    if isinstance(value, str):
        return value if value and value.split() == [value] else repr(value)
    return repr(value) if isinstance(value, float) else str(value)


def _message(err: Any) -> str:
    error = (err.get("ctx") or {}).get("error")
    text = str(error) if err["type"] == "value_error" and error is not None else err["msg"]
    text = text[0].lower() + text[1:] if text else text
    return f"{text}, got {_shown(err['input'])}" if err["type"] != "value_error" else text
