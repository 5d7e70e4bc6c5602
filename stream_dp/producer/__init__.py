"""The replay producer: readings from a file or iterable into the readings topic."""

from stream_dp.producer.grouping import ReadingGrouper
from stream_dp.producer.progress import TerminalProgress
from stream_dp.producer.replay import encode_group, produce_readings
from stream_dp.producer.stats import ProduceStats

__all__ = [
    "ProduceStats",
    "ReadingGrouper",
    "TerminalProgress",
    "encode_group",
    "produce_readings",
]
