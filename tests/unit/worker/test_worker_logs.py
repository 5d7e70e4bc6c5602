"""Worker logs and the per-partition lag gauge: what operators look for, nothing private."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from stream_dp.config import load_settings
from stream_dp.windows.state import PartitionState
from stream_dp.worker.idle_rule import InputState
from stream_dp.worker.ingest import IngestProcessor, PartitionRuntime
from stream_dp.worker.log_setup import CollectionDumpFilter, JsonFormatter, RejectedReadingsLog
from stream_dp.worker.metrics import ServiceMetrics


def record(name: str, msg: str, *args, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


@pytest.fixture
def root_level():
    root = logging.getLogger()
    before = root.level
    yield root.setLevel
    root.setLevel(before)


def test_table_dumps_of_the_kafka_clients_are_debug_only(root_level):
    tables = CollectionDumpFilter()
    root_level(logging.INFO)
    subscribed = record("aiokafka.consumer.subscription_state", "Updating to: %s", frozenset({"t"}))
    assert not tables.filter(subscribed)
    assert tables.filter(record("aiokafka.consumer.group_coordinator", "Joined (gen %s)", 3))
    assert tables.filter(record("stream_dp.worker.ingest", "windows %s", [1, 2]))
    warning = record("aiokafka.conn", "lost %s", {"a"}, level=logging.WARNING)
    assert tables.filter(warning) and warning.levelname == "WARNING"
    root_level(logging.DEBUG)
    again = record("aiokafka.consumer.subscription_state", "Updating to: %s", frozenset({"t"}))
    assert tables.filter(again) and again.levelname == "DEBUG"


def test_json_lines_carry_time_level_logger_and_message():
    line = JsonFormatter().format(record("stream_dp.x", "released window %s", "w", level=30))
    parsed = json.loads(line)
    assert parsed["level"] == "WARNING" and parsed["logger"] == "stream_dp.x"
    assert parsed["message"] == "released window w" and parsed["ts"].endswith("+00:00")


def test_rejected_readings_are_reported_as_counts_since_the_last_report():
    metrics = ServiceMetrics()
    report = RejectedReadingsLog(metrics.registry)
    assert report.report() is None
    metrics.readings.labels("invalid").inc(3)
    metrics.readings.labels("late").inc(2)
    metrics.readings.labels("accepted").inc(100)
    assert report.report() == "readings rejected since the last report: 3 invalid, 2 late"
    assert report.report() is None
    metrics.readings.labels("late").inc(1)
    assert report.report() == "readings rejected since the last report: 0 invalid, 1 late"


def test_the_lag_gauge_follows_each_owned_partition():
    settings = load_settings(idle_close_seconds=5.0)
    metrics = ServiceMetrics()
    ingest = IngestProcessor(settings, conn=None, producer=None, metrics=metrics)
    for partition, applied in ((0, 9), (1, 99)):
        ingest.partitions[partition] = PartitionRuntime(
            PartitionState.for_settings(settings), applied_offset=applied
        )

    async def progress(*args):
        pass

    ingest._progress = progress

    async def input_state(partition):
        return InputState({0: 500, 1: 100}[partition], None, 0.1)

    asyncio.run(ingest.tick([0, 1], input_state))

    def lag(partition):
        return metrics.registry.get_sample_value(
            "stream_dp_readings_consumer_lag", {"partition": str(partition)}
        )

    assert (lag(0), lag(1)) == (490, 0)
    asyncio.run(ingest.on_revoked([0]))
    assert lag(0) is None and lag(1) == 0


def test_serve_takes_a_log_format_and_rejects_others(capsys):
    from stream_dp.cli import build_parser

    assert build_parser().parse_args(["serve", "--log-format", "json"]).log_format == "json"
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", "--log-format", "xml"])
    assert exited.value.code == 2 and "--log-format" in capsys.readouterr().err


def test_faust_and_mode_start_up_chatter_is_debug_only(root_level):
    """Issue 34 item 7: at INFO a start shows the service's lines, not every Faust service's
    "Starting..."; their warnings stay."""
    chatter = CollectionDumpFilter()
    root_level(logging.INFO)
    assert not chatter.filter(record("faust.worker", "[^Worker]: Starting..."))
    assert not chatter.filter(record("mode.timers", "Timer %s woke up", "t"))
    assert chatter.filter(record("stream_dp.worker.faust_worker", "HTTP: %s", "http://h:1"))
    warning = record("faust.worker", "Signal received", level=logging.WARNING)
    assert chatter.filter(warning) and warning.levelname == "WARNING"
    root_level(logging.DEBUG)
    shown = record("faust.worker", "[^Worker]: Starting...")
    assert chatter.filter(shown) and shown.levelname == "DEBUG"
