"""Ingest throughput of one stream-dp worker through Kafka, against two baselines measured in
the same run on one embedded (Tansu) broker.

Measured, in order, on readings pre-produced into fresh 4-partition topics:

(a) raw aiokafka ``getmany`` (no group, no parsing) reading a whole topic: the ceiling;
(b) the "per-event table agent": a plain Faust agent that decodes each message with Faust's
    JSON serializer, assigns the H3 cell and window, and updates a Faust Table (changelogged)
    keyed by (window, cell, vehicle) once per reading; 1 reading per message; its run is
    capped (``--naive-seconds``);
(c) ``stream-dp serve`` (subprocess, durable state via its state topic) on (i) messages of
    100 readings of one vehicle (2,000,000 readings: ten or so worker batches) and (ii) 1
    reading per message (300,000), timed from the first to the last accepted reading
    through ``/metrics``.

``--profile`` attaches py-spy (if installed) to the stream-dp worker and prints where its
time goes; ``--cpu-profile`` instead runs ``IngestProcessor.process`` in-process on fake
events with a no-op producer under cProfile (stream-dp's own CPU cost, no Kafka).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import math
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from _common import CpuMeter, Result, WorkerProcess, load_average, print_ratio, print_table

from stream_dp.config import Settings, load_settings
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.embedded_broker import EmbeddedBroker
from stream_dp.kafka.topics import TopicSpec, ensure_topics
from stream_dp.producer import ProduceStats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support/: not installed

HOUR = 3600
# New York: the box vehicles start in (degrees).
LAT_RANGE = (40.58, 40.88)
LON_RANGE = (-74.03, -73.77)
KM_PER_DEG_LAT = 111.0
KM_PER_DEG_LON = 84.0  # at 40.7 degrees north


# --- data ---------------------------------------------------------------------------------
def synthetic_fleet(
    n_readings: int, n_vehicles: int, per_message: int, seed: int = 7, interval: float = 1.0
) -> list[dict[str, Any]]:
    """Vehicles driving straight lines around New York, one reading per ``interval`` seconds.

    Readings are ordered in slices: within a slice every vehicle's next ``per_message``
    readings come together, so the replay producer fills messages of ``per_message``
    readings while staying within its event-time delay bound (a slice spans
    ``per_message * interval`` seconds). The stream straddles an hour boundary, so batches
    touch two one-hour windows. Speeds are km/h; some exceed U = 65 and get clamped.
    """
    rng = np.random.default_rng(seed)
    per_vehicle = max(1, n_readings // n_vehicles)
    span = per_vehicle * interval
    start = 1_700_000_000 // HOUR * HOUR + HOUR - span / 2
    lat0 = rng.uniform(*LAT_RANGE, n_vehicles)
    lon0 = rng.uniform(*LON_RANGE, n_vehicles)
    heading = rng.uniform(0, 2 * math.pi, n_vehicles)
    cruise = rng.uniform(5, 75, n_vehicles)  # km/h
    offset = rng.uniform(0, interval, n_vehicles)
    j = np.arange(per_vehicle)
    seconds = offset[:, None] + j[None, :] * interval  # (vehicle, reading)
    km = cruise[:, None] * seconds / 3600.0
    lat = lat0[:, None] + km * np.cos(heading)[:, None] / KM_PER_DEG_LAT
    lon = lon0[:, None] + km * np.sin(heading)[:, None] / KM_PER_DEG_LON
    speed = np.clip(cruise[:, None] + rng.normal(0, 6, seconds.shape), 0, None)
    ts = start + seconds
    names = [f"veh-{v:05d}" for v in range(n_vehicles)]
    out: list[dict[str, Any]] = []
    for s in range(0, per_vehicle, per_message):
        for v in range(n_vehicles):
            for k in range(s, min(s + per_message, per_vehicle)):
                out.append(
                    {
                        "vehicle_id": names[v],
                        "ts": round(float(ts[v, k]), 3),
                        "lat": round(float(lat[v, k]), 6),
                        "lon": round(float(lon[v, k]), 6),
                        "speed": round(float(speed[v, k]), 2),
                    }
                )
    return out


def produce(
    conn: KafkaConnection, topic: str, readings: list[dict[str, Any]], per_message: int
) -> ProduceStats:
    from stream_dp.producer import produce_readings

    return asyncio.run(produce_readings(conn, topic, readings, batch_size=per_message))


async def _visible(conn: KafkaConnection, topic: str, partitions: int) -> tuple[int, int]:
    import orjson

    from stream_dp.kafka.partition_reader import read_partition_to_end

    messages = readings = 0
    for partition in range(partitions):
        for record in await read_partition_to_end(conn, topic, partition):
            value = orjson.loads(record.value)
            messages += 1
            readings += len(value) if isinstance(value, list) else 1
    return messages, readings


def visible(conn: KafkaConnection, topic: str, partitions: int) -> tuple[int, int]:
    """(messages, readings) a consumer can read back from ``topic`` up to its high watermark.

    Checked because ``produce_readings`` was seen to report messages as sent that never
    reached the broker (a stale batch dropped when its flusher task is cancelled); every
    later stage then waits for what is really there.
    """
    return asyncio.run(_visible(conn, topic, partitions))


# --- (a) raw getmany ----------------------------------------------------------------------
async def _raw_getmany(
    conn: KafkaConnection, topic: str, partitions: int, expected: int, broker_pid: int
) -> tuple[float, float, float]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        **conn.consumer_kwargs(),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    await consumer.start()
    meter = CpuMeter([broker_pid])
    try:
        count = 0
        first: tuple[float, int] | None = None
        while count < expected:
            batches = await consumer.getmany(timeout_ms=3000, max_records=50_000)
            if not batches:
                raise RuntimeError(f"{topic}: only {count} of {expected} messages after 3 s idle")
            for records in batches.values():
                count += len(records)
            if first is None:
                first = (time.perf_counter(), count)
        assert first is not None
        seconds = time.perf_counter() - first[0]
        return (count - first[1]) / seconds, seconds, meter.stop()[1]
    finally:
        await consumer.stop()


def raw_getmany(
    conn: KafkaConnection, topic: str, partitions: int, expected: int, broker_pid: int
) -> tuple[float, float, float]:
    """(messages/s, seconds, others' cores) of a manually assigned consumer draining
    ``topic`` from the beginning."""
    return asyncio.run(_raw_getmany(conn, topic, partitions, expected, broker_pid))


# --- (b) the naive per-event Faust table agent --------------------------------------------
def naive_child(args: argparse.Namespace) -> None:
    """Run the naive agent until killed, writing its progress to ``--progress-file``."""
    import faust
    import h3

    conn = KafkaConnection(args.bootstrap, embedded=True, client_id=args.app_id)
    app = faust.App(
        args.app_id,
        **conn.faust_kwargs(relies_on_table_recovery=False),
        store="memory://",
        topic_partitions=args.partitions,
        consumer_auto_offset_reset="earliest",
        web_enabled=False,
    )
    topic = app.topic(
        args.topic, key_type=bytes, key_serializer="raw", value_serializer="json",
        partitions=args.partitions,
    )  # fmt: skip
    table = app.Table("pairs", default=None, partitions=args.partitions)
    progress = {"n": 0, "first": 0.0}
    upper, resolution = 65.0, args.resolution
    progress_file = Path(args.progress_file)

    @app.agent(topic)
    async def accumulate(stream: Any) -> None:
        async for reading in stream:
            if not progress["n"]:
                progress["first"] = time.monotonic()
            ts = float(reading["ts"])
            cell = h3.latlng_to_cell(float(reading["lat"]), float(reading["lon"]), resolution)
            speed = min(max(float(reading["speed"]), 0.0), upper)
            key = f"{int(ts // HOUR) * HOUR}|{cell}|{reading['vehicle_id']}"
            count, total, total_sq = table.get(key) or (0, 0.0, 0.0)
            table[key] = (count + 1, total + speed, total_sq + speed * speed)
            progress["n"] += 1

    @app.timer(0.5)
    async def report() -> None:
        if progress["n"]:
            elapsed = time.monotonic() - progress["first"]
            tmp = progress_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"n": progress["n"], "elapsed": elapsed}))
            tmp.replace(progress_file)

    asyncio.set_event_loop(asyncio.new_event_loop())
    faust.Worker(app, loglevel="WARNING", quiet=True).execute_from_commandline()


def naive_agent(
    bootstrap: str,
    broker_pid: int,
    topic: str,
    partitions: int,
    expected: int,
    cap: float,
    log_dir: Path,
) -> tuple[float, int, float, float]:
    """Start the naive agent; return (readings/s, readings done, seconds, others' cores)
    after ``cap`` seconds from its first event or when all ``expected`` are done."""
    app_id = f"naive-{os.getpid()}-{int(time.time())}"
    progress_file = log_dir / "naive-progress.json"
    command = [sys.executable, __file__, "--naive-child", "--bootstrap", bootstrap,
               "--topic", topic, "--app-id", app_id, "--partitions", str(partitions),
               "--progress-file", str(progress_file)]  # fmt: skip
    with (log_dir / "naive.log").open("wb") as log:
        child = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
    latest: dict[str, float] = {}
    meter: CpuMeter | None = None
    deadline = time.monotonic() + cap + 90  # startup (group join, table recovery) included
    try:
        while time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.25)
            if progress_file.exists():
                latest = json.loads(progress_file.read_text())
                meter = meter or CpuMeter([child.pid, broker_pid])
                if latest["n"] >= expected or latest["elapsed"] >= cap:
                    break
        if not latest or meter is None:
            tail = (log_dir / "naive.log").read_text()[-3000:]
            raise RuntimeError(f"naive agent made no progress:\n{tail}")
        others = meter.stop()[1]
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    return (latest["n"] - 1) / latest["elapsed"], int(latest["n"]), latest["elapsed"], others


# --- (c) stream-dp ------------------------------------------------------------------------
def service_settings(
    name: str,
    readings_topic: str,
    partitions: int,
    batch_size: int | None = None,
) -> Settings:
    """Default settings with the benchmark's topic names; ``batch_size`` None: the
    service's default."""
    from tests.support.settings import FIXED_MODE

    return load_settings(
        **FIXED_MODE,  # the release mode this benchmark has always run (defaults before 26)
        batch_size=batch_size,
        app_id=name,
        partitions=partitions,
        topic_readings=readings_topic,
        topic_dlq=f"{name}.dlq",
        topic_releases=f"{name}.releases",
        topic_partials=f"{name}.partials",
        topic_state=f"{name}.state",
        topic_release_log=f"{name}.release-log",
    )


def stream_dp_run(
    bootstrap: str,
    broker_pid: int,
    conn: KafkaConnection,
    settings: Settings,
    expected: int,
    log_dir: Path,
    profile_seconds: float | None,
) -> dict[str, Any]:
    from stream_dp.kafka.service_topics import ensure_service_topics

    ensure_service_topics(settings, conn)
    worker = WorkerProcess(bootstrap, settings, log_dir / f"{settings.app_id}.log", [broker_pid])
    spy: subprocess.Popen[bytes] | None = None
    try:
        worker.wait_ready()
        raw = log_dir / f"{settings.app_id}.pyspy.txt"
        if profile_seconds:
            spy = subprocess.Popen(
                ["py-spy", "record", "--pid", str(worker.pid), "--format", "raw", "--rate", "200",
                 "--duration", str(int(profile_seconds)), "--nonblocking", "-o", str(raw)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        result = worker.measure_ingest(expected, timeout=300)
        if spy is not None:
            os.kill(spy.pid, signal.SIGINT)  # py-spy writes its output on SIGINT
            spy.wait(timeout=30)
            result["profile"] = raw
        return result
    finally:
        worker.stop()
        if spy is not None and spy.poll() is None:
            spy.kill()


def summarize_py_spy(path: Path, top: int = 18) -> None:
    """Self and inclusive sample shares per function from py-spy's collapsed stacks."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [_frame(f) for f in stack.split(";")]
        frames = [f for f in frames if f]
        total += count
        if frames:
            own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    print(f"\n  py-spy: {total} samples of the worker's main thread(s) ({path})")
    print("  self time (leaf function):")
    for name, n in own.most_common(top):
        print(f"    {100 * n / total:5.1f}%  {name}")
    print("  inclusive time:")
    for name, n in inclusive.most_common(top + 12):
        print(f"    {100 * n / total:5.1f}%  {name}")


def _frame(frame: str) -> str:
    """``func (path/to/module.py:123)`` -> ``func (module.py)``; process/thread frames dropped."""
    name, _, where = frame.partition(" (")
    if not where:
        return ""
    file = where.rsplit(":", 1)[0].rstrip(")")
    parts = Path(file).parts
    short = "/".join(parts[-2:]) if "site-packages" in file or "stream_dp" in file else parts[-1]
    return f"{name} ({short})"


# --- in-process CPU profile of IngestProcessor.process ------------------------------------
class _NullProducer:
    """Accepts sends and completes them at once (no Kafka)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.offsets: Counter[tuple[str, int]] = Counter()

    def _written(self, topic: str, value: bytes, partition: int = 0) -> SimpleNamespace:
        """Record metadata as the broker would answer (the offset the record got)."""
        self.bytes += len(value)
        offset = self.offsets[topic, partition]
        self.offsets[topic, partition] += 1
        return SimpleNamespace(topic=topic, partition=partition, offset=offset)

    async def send_and_wait(self, topic: str, value: bytes, **kw: Any) -> SimpleNamespace:
        return self._written(topic, value, kw.get("partition", 0))

    async def send(self, topic: str, value: bytes, **kw: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(self._written(topic, value, kw.get("partition", 0)))
        return future


def cpu_profile(readings: list[dict[str, Any]], per_message: int, partitions: int) -> None:
    """Feed ``IngestProcessor.process`` batches of fake events; print readings/s and a profile."""
    from stream_dp.kafka.partitioner import partition_for
    from stream_dp.producer import ReadingGrouper, encode_group
    from stream_dp.windows.state import PartitionState
    from stream_dp.worker.ingest import IngestProcessor
    from stream_dp.worker.metrics import ServiceMetrics
    from stream_dp.worker.recovery import PartitionRuntime

    settings = service_settings("cpu", "cpu.readings", partitions)
    grouper = ReadingGrouper(per_message)
    groups = [g for r in readings for g in grouper.add(r)] + list(grouper.flush())
    offsets = [0] * partitions
    events = []
    for key, members in groups:
        partition = partition_for(str(key), partitions)
        message = SimpleNamespace(
            topic="cpu.readings", partition=partition, offset=offsets[partition],
            key=str(key).encode(), value=encode_group(members),
        )  # fmt: skip
        offsets[partition] += 1
        events.append(message)
    batches = [
        events[i : i + settings.batch_size] for i in range(0, len(events), settings.batch_size)
    ]

    async def run(profiler: cProfile.Profile | None) -> float:
        producer = _NullProducer()
        conn = KafkaConnection("127.0.0.1:9", embedded=True)
        processor = IngestProcessor(settings, conn, producer, ServiceMetrics())  # type: ignore[arg-type]
        for p in range(partitions):
            processor.partitions[p] = PartitionRuntime(PartitionState.for_settings(settings))
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        for batch in batches:
            await processor.process(batch)
        if profiler:
            profiler.disable()
        return time.perf_counter() - started

    seconds = asyncio.run(run(None))
    print(
        f"\nIngestProcessor.process, in-process, no Kafka "
        f"({len(readings) / len(events):.0f} readings/message, "
        f"{len(events)} messages, batches of {settings.batch_size}) [{load_average()}]:"
    )
    print(f"  {len(readings) / seconds:,.0f} readings/s ({seconds:.2f} s)")
    profiler = cProfile.Profile()
    asyncio.run(run(profiler))
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(14)


# --- main ---------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--readings", type=int, default=300_000, help="readings of the 1-reading/message case"
    )
    parser.add_argument(
        "--batched-readings",
        type=int,
        default=2_000_000,
        help="readings of the 100-readings/message case: 20,000 messages, about ten worker "
        "batches, so the rate is not set by where one batch ends (at 300,000 it was 1-2 "
        "batches and a 0.5 s drain)",
    )
    parser.add_argument("--vehicles", type=int, default=3_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--naive-seconds", type=float, default=60.0, help="cap of baseline (b)")
    parser.add_argument("--skip-naive", action="store_true")
    parser.add_argument(
        "--only-batched",
        action="store_true",
        help="only the 100-readings/message case (no 1/msg topic, no baseline (b))",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of the 100-readings/message case (median)"
    )
    parser.add_argument(
        "--batch-messages",
        type=int,
        default=None,
        help="STREAM_DP_BATCH_SIZE of the 100-readings/message run (default: the service's)",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy the stream-dp worker")
    parser.add_argument("--cpu-profile", action="store_true", help="in-process cProfile only")
    parser.add_argument("--keep-logs", action="store_true")
    # the naive agent's own process (internal)
    parser.add_argument("--naive-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--app-id", help=argparse.SUPPRESS)
    parser.add_argument("--resolution", type=int, default=8, help=argparse.SUPPRESS)
    parser.add_argument("--progress-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.naive_child:
        naive_child(args)
        return 0

    per_message = 100
    sizes = (per_message,) if args.only_batched else (per_message, 1)
    if args.cpu_profile:
        readings = synthetic_fleet(args.readings, args.vehicles, per_message)
        cpu_profile(readings, per_message, args.partitions)
        cpu_profile(readings, 1, args.partitions)
        return 0
    count_of = {per_message: args.batched_readings, 1: args.readings}
    readings_of = {
        size: synthetic_fleet(count_of[size], args.vehicles, per_message) for size in sizes
    }

    profile = args.profile and shutil.which("py-spy") is not None
    if args.profile and not profile:
        print("py-spy not found (pip install py-spy): running without --profile")
    log_dir = Path(tempfile.mkdtemp(prefix="stream-dp-bench-"))
    counts = ", ".join(f"{len(readings_of[size]):,} at {size}/msg" for size in sizes)
    print(f"{counts}; {args.vehicles:,} vehicles, {args.partitions} partitions")
    print(f"start: {load_average()}")
    results: list[Result] = []
    with EmbeddedBroker(log_path=log_dir / "broker.log") as broker:
        conn = KafkaConnection(broker.bootstrap, embedded=True, client_id="bench")
        topics = {size: f"bench.readings.{size}" for size in sizes}
        asyncio.run(ensure_topics(conn, [TopicSpec(t, args.partitions) for t in topics.values()]))
        messages: dict[int, int] = {}
        expected: dict[int, int] = {}
        for size, topic in topics.items():
            started = time.perf_counter()
            stats = produce(conn, topic, readings_of[size], size)
            seconds = time.perf_counter() - started
            messages[size], expected[size] = visible(conn, topic, args.partitions)
            print(
                f"produced {stats.readings:,} readings in {stats.messages:,} messages to {topic} "
                f"in {seconds:.1f} s; readable: {expected[size]:,} in {messages[size]:,}"
            )
            if expected[size] != stats.readings:
                missing = stats.messages - messages[size]
                print(f"  WARNING: {missing} messages reported as sent are not in the topic")

        for size, topic in topics.items():
            load = load_average()
            drains = [
                raw_getmany(conn, topic, args.partitions, messages[size], broker.pid or 0)
                for _ in range(3)
            ]
            msg_rate, seconds, others = sorted(drains)[1]  # the median of three drains
            name = f"(a) raw getmany, {size}/msg"
            results.append(Result(f"{name}: msg/s", msg_rate, "msg/s", load, "", others))
            note = f"median of 3 drains of {seconds:.2f} s"
            per = expected[size] / messages[size]
            results.append(Result(name, msg_rate * per, "readings/s", load, note, others))

        naive_rate = float("nan")
        if not (args.skip_naive or args.only_batched):
            load = load_average()
            naive_rate, done, seconds, others = naive_agent(
                broker.bootstrap,
                broker.pid or 0,
                topics[1],
                args.partitions,
                expected[1],
                args.naive_seconds,
                log_dir,
            )
            capped = ", capped" if done < expected[1] else ""
            note = f"{done:,} readings in {seconds:.1f} s{capped}"
            name = "(b) per-event Faust table agent, 1/msg"
            results.append(Result(name, naive_rate, "readings/s", load, note, others))

        service: dict[int, float] = {}
        for size, topic in topics.items():
            batch = args.batch_messages if size > 1 else None  # None: the service default
            spy_seconds = 120.0 if profile else None
            repeat = args.repeat if size > 1 and not profile else 1  # 1/msg runs ~70 s
            load = load_average()
            runs = []
            for attempt in range(repeat):
                app_id = f"bench-sdp-{size}-{attempt}-{os.getpid()}"  # fresh group and state
                settings = service_settings(app_id, topic, args.partitions, batch)
                runs.append(
                    stream_dp_run(
                        broker.bootstrap,
                        broker.pid or 0,
                        conn,
                        settings,
                        expected[size],
                        log_dir,
                        spy_seconds,
                    )
                )
            run = sorted(runs, key=lambda r: r["rate"])[len(runs) // 2]
            service[size] = run["rate"]
            note = f"median of {repeat}: " if repeat > 1 else ""
            note += f"{run['seconds']:.1f} s, "
            note += f"batches of {settings.batch_size} messages"
            note += f", worker+broker used {run['cpu_ours']:.2f} cores"
            note += ", profiled" if profile else ""
            name = f"(c) stream-dp worker, {size}/msg"
            results.append(Result(name, run["rate"], "readings/s", load, note, run["cpu_others"]))
            if repeat > 1:
                rates = ", ".join(f"{r['rate']:,.0f}" for r in runs)
                print(f"stream-dp {size}/msg runs: {rates} readings/s")
            if "profile" in run and Path(run["profile"]).exists():
                print(f"\nstream-dp worker, {size} readings/message:")
                summarize_py_spy(Path(run["profile"]))

    print_table("Ingest throughput", results)
    raw = {r.name: r.value for r in results}
    print("\nRatios")
    for size in topics:
        rate = service[size]
        if not math.isnan(naive_rate):
            print_ratio(f"stream-dp {size}/msg vs per-event table agent", rate / naive_rate, 10)
        raw_rate = raw[f"(a) raw getmany, {size}/msg"]
        print_ratio(f"stream-dp {size}/msg vs raw getmany ({size}/msg)", rate / raw_rate, 0.05)
        print_ratio(f"stream-dp {size}/msg absolute / 20,000 readings/s", rate / 20_000, 1)
    print(f"\nend: {load_average()}; logs in {log_dir}")
    if not args.keep_logs and not profile:
        shutil.rmtree(log_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
