"""One reason vocabulary: the worker's dead-letter headers and `stream-dp release`'s rejects
file name the same bad readings with the same codes (issue 26, item 2)."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace

import orjson
import pytest

from stream_dp.cli import main
from stream_dp.config import load_settings
from stream_dp.windows.readings import InvalidReading, ParsedBatch, ReadingValidator
from stream_dp.windows.reject_reasons import RejectReason
from stream_dp.windows.state import PartitionState
from stream_dp.worker.ingest import IngestProcessor
from stream_dp.worker.metrics import ServiceMetrics
from stream_dp.worker.recovery import PartitionRuntime

GOOD = {"vehicle_id": "bus-1", "ts": 1606820400.0, "lat": 40.7, "lon": -74.0, "speed": 30.0}

#: A bad reading for every reason a reading of a JSON file can have, with its code.
BAD = [
    ({**GOOD, "speed": "fast"}, RejectReason.NOT_A_NUMBER),
    ({**GOOD, "lat": None}, RejectReason.NOT_A_NUMBER),
    ({**GOOD, "lat": 200.0}, RejectReason.LAT_OUT_OF_RANGE),
    ({**GOOD, "lon": -190.0}, RejectReason.LON_OUT_OF_RANGE),
    ({**GOOD, "ts": -1.0}, RejectReason.TS_OUT_OF_RANGE),
    ({**GOOD, "ts": 1e12}, RejectReason.TS_OUT_OF_RANGE),
    ({**GOOD, "ts": "yesterday"}, RejectReason.BAD_TS),
    ({**GOOD, "vehicle_id": ""}, RejectReason.BAD_VEHICLE_ID),
    ({k: v for k, v in GOOD.items() if k != "speed"}, RejectReason.MISSING_FIELD),
    ({k: v for k, v in GOOD.items() if k != "vehicle_id"}, RejectReason.MISSING_FIELD),
    ("a string", RejectReason.NOT_AN_OBJECT),
]


@pytest.mark.parametrize(("obj", "reason"), BAD)
def test_the_validator_names_the_reason(obj, reason):
    with pytest.raises(InvalidReading) as info:
        ReadingValidator(65.0, 8).add(obj, ParsedBatch())
    assert info.value.reason == reason


class Producer:
    """Collects what the ingest sends; every send is acknowledged at once."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, dict]] = []

    async def send(self, topic, value, key=None, partition=None, headers=None):
        self.sent.append((topic, value, dict(headers or [])))
        future = asyncio.get_running_loop().create_future()
        future.set_result(SimpleNamespace(offset=len(self.sent)))
        return future

    async def send_and_wait(self, topic, value, key=None, partition=None, headers=None):
        return await (await self.send(topic, value, key, partition, headers))


def dead_letters(values: list[bytes]) -> list[dict]:
    # like the offline run: no wall-clock limit (a far-future ts is then out of range)
    settings = load_settings().model_copy(update={"max_future_seconds": None})
    producer = Producer()
    ingest = IngestProcessor(settings, conn=None, producer=producer, metrics=ServiceMetrics())
    runtime = PartitionRuntime(
        PartitionState.for_settings(settings), applied_offset=-1, last_event_wall=time.monotonic()
    )
    messages = [
        SimpleNamespace(topic="readings", partition=0, offset=i, key=b"k", value=v)
        for i, v in enumerate(values)
    ]

    async def go() -> None:
        sends: list = []
        await ingest._process_partition(0, runtime, messages, sends)
        await asyncio.gather(*sends)

    asyncio.run(go())
    return [headers for topic, _v, headers in producer.sent if topic == settings.topic_dlq]


def test_the_dead_letter_topic_and_the_rejects_file_give_the_same_reasons(tmp_path):
    values = [orjson.dumps(obj) for obj, _r in BAD]
    values += [orjson.dumps(GOOD), b"{not json"]
    expected = [str(reason) for _obj, reason in BAD] + ["not_json"]

    headers = dead_letters(values)
    assert [h["reason"].decode() for h in headers] == expected
    assert all(h["detail"] for h in headers)

    source = tmp_path / "readings.jsonl"
    source.write_bytes(b"\n".join(values) + b"\n")
    out = tmp_path / "releases.jsonl"
    assert main(["release", str(source), "--out", str(out)]) == 0
    rejects = [json.loads(line) for line in (tmp_path / "releases.rejects.jsonl").open()]
    assert [r["reason"] for r in rejects] == expected
    assert [r["line"] for r in rejects] == [*range(1, len(BAD) + 1), len(BAD) + 2]
