"""Logging of a worker: text or JSON lines, Faust's chatter and table dumps kept out of INFO.

Faust renders the sets and lists aiokafka logs at INFO (subscriptions, assignments) as
multi-line terminal tables, about 130 lines per start, and Faust and its service framework
(mode) log every service's "Starting..." and "Stopping..." at INFO; :class:`CollectionDumpFilter`
moves such records to DEBUG, so at INFO a start shows the service's own lines (and the Kafka
client's group joins).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

_DUMPED = (set, frozenset, list, tuple, dict)
#: Loggers whose every INFO record is start-up or shutdown chatter.
_CHATTER = ("faust", "mode")
TEXT_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s"


class CollectionDumpFilter(logging.Filter):
    """Demotes to DEBUG the INFO records of Faust and mode (chatter), and those of aiokafka
    whose arguments are collections (rendered as tables by Faust); drops them unless the root
    logger shows DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not record.name.startswith(("aiokafka", *_CHATTER)):
            return True
        args = record.args if isinstance(record.args, tuple) else (record.args,)
        chatter = record.name.split(".", 1)[0] in _CHATTER
        if not chatter and not any(isinstance(arg, _DUMPED) for arg in args):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (RFC 3339 UTC), ``level``, ``logger``, ``pid``,
    ``message`` and, with an exception, ``exc``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage().strip(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def logging_config(level: str, log_format: str) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` dict: one stderr handler in ``log_format``
    (``text`` or ``json``) with :class:`CollectionDumpFilter`, root at ``level``."""
    formatter: dict[str, Any] = (
        {"()": f"{__name__}.JsonFormatter"} if log_format == "json" else {"format": TEXT_FORMAT}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"main": formatter},
        "filters": {"tables": {"()": f"{__name__}.CollectionDumpFilter"}},
        "handlers": {
            "main": {
                "class": "logging.StreamHandler",
                "formatter": "main",
                "filters": ["tables"],
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"level": level.upper(), "handlers": ["main"]},
    }


class RejectedReadingsLog:
    """Counts of invalid and late readings since the previous report, read from the
    worker's metrics (never a vehicle id or a reading)."""

    def __init__(self, registry: Any) -> None:
        self._registry = registry
        self._reported = self._counts()

    def _counts(self) -> tuple[float, float]:
        def value(outcome: str) -> float:
            sample = self._registry.get_sample_value(
                "stream_dp_readings_total", {"outcome": outcome}
            )
            return sample or 0.0

        return value("invalid"), value("late")

    def report(self) -> str | None:
        """The line to log, or None when nothing was rejected since the last report."""
        counts = self._counts()
        invalid, late = (now - before for now, before in zip(counts, self._reported, strict=True))
        self._reported = counts
        if not invalid and not late:
            return None
        return f"readings rejected since the last report: {invalid:.0f} invalid, {late:.0f} late"
