"""Restart and failover cost against the length of the history (issue: long-running at scale).

(a) **Worker restart.** A worker ingests a history of ``--short`` and then ``--long``
    windows (defaults 2 and 24: "2 h" and "24 h" of one-hour windows) at 100 readings per
    message, is stopped with its last window still open, and a fresh worker is started:
    the time from its start to ``/readyz`` 200 is measured (median of ``--restarts``).
    For the baseline, the state topic's whole replay (what recovery did before checkpoints)
    and the replay from the latest checkpoint are also timed in-process.
(b) **Releaser rebuild.** A release log (with a snapshot after each window, as the releaser
    writes them) and the releases topic hold ``--windows-few`` and ``--windows-many``
    released windows (defaults 24 and 2,000); ``ReleaseService._rebuild`` is timed on each
    (median of ``--restarts``). Baseline: the same 2,000 windows without snapshots (a log
    written before snapshots existed, read whole).

Scaling, stated honestly: 24 h at 100,000 readings/s is ~8.6 billion readings (~170 GB of
state deltas) — far beyond this machine's memory-only embedded broker. Each "hour" is
therefore a window of ``--window-seconds`` (default 60) event-time seconds holding
``--readings-per-window`` readings (default 100,000), i.e. the ingest rate is kept (the
worker ingests at its full speed, reported below) and the event-time length of a window is
shrunk. The recovery cost that matters is the number of windows replayed, which this keeps:
2 vs 24 windows of history.

Targets: (a) 24 windows recover in <= 1.5x the time of 2; (b) a rebuild after 2,000 windows
takes <= 2x the time after 24.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from _common import WorkerProcess, load_average, print_ratio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from ingest import produce, service_settings, synthetic_fleet, visible

from stream_dp.config import Settings
from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.embedded_broker import EmbeddedBroker
from stream_dp.kafka.partition_reader import iter_partition_to_end
from stream_dp.kafka.partition_tail import find_last
from stream_dp.kafka.service_topics import ensure_service_topics
from stream_dp.windows.state import PartitionState
from stream_dp.wire import internal_records as rec
from stream_dp.worker.checkpoints import (
    Checkpoint,
    ReplayPlan,
    StateReplay,
    is_checkpoint,
)
from stream_dp.worker.metrics import ServiceMetrics
from stream_dp.worker.release_service import ReleaseService
from stream_dp.worker.release_snapshots import SnapshotTracker
from stream_dp.worker.resume_plan import plan_resume

PER_MESSAGE = 100
RECOVERED = re.compile(r"recovered from (\d+) state records from offset (\d+) of (\d+)")


# --- (a) worker restart -------------------------------------------------------------------
def history_settings(name: str, args: argparse.Namespace) -> Settings:
    base = service_settings(name, f"{name}.readings", args.partitions)
    return base.model_copy(
        update={
            "window_seconds": args.window_seconds,
            "grace_seconds": float(args.window_seconds),  # a message spans up to a window
            "idle_close_seconds": 3600.0,  # the last window stays open across the restart
            "max_future_seconds": None,
        }
    )


async def _replay_seconds(conn: KafkaConnection, settings: Settings) -> dict[str, float]:
    """In-process: the whole replay (the old recovery) and the replay from the latest
    checkpoint (the new one), over every partition."""
    out = {"whole_s": 0.0, "checkpoint_s": 0.0, "whole_records": 0, "checkpoint_records": 0}
    topic = settings.topic_state
    for partition in range(settings.partitions):
        for mode in ("whole", "checkpoint"):
            began = time.perf_counter()
            if mode == "whole":
                plan = ReplayPlan(0)
            else:
                tail = await find_last(conn, topic, partition, is_checkpoint)
                latest = None
                if tail.record is not None:
                    data = rec.decode(tail.record.value)
                    latest = (tail.record.offset, Checkpoint.from_record(data))
                plan = plan_resume(tail.earliest, tail.end, latest)
            replay = StateReplay(PartitionState.for_settings(settings), plan)
            async for batch in iter_partition_to_end(conn, topic, partition, plan.start):
                for record in batch:
                    replay.add(record.offset, record.value)
            replay.finish()
            out[f"{mode}_s"] += time.perf_counter() - began
            out[f"{mode}_records"] += replay.replayed
    return out


def worker_restart(
    broker: EmbeddedBroker, conn: KafkaConnection, windows: int, args: argparse.Namespace,
    log_dir: Path,
) -> dict[str, Any]:  # fmt: skip
    name = f"rec{windows}-{uuid.uuid4().hex[:6]}"
    settings = history_settings(name, args)
    ensure_service_topics(settings, conn)
    n = windows * args.readings_per_window
    per_vehicle = n // args.vehicles
    readings = synthetic_fleet(
        n, args.vehicles, PER_MESSAGE, interval=windows * args.window_seconds / per_vehicle
    )
    began = time.perf_counter()
    produce(conn, settings.topic_readings, readings, PER_MESSAGE)
    produce_rate = len(readings) / (time.perf_counter() - began)
    del readings
    _, n = visible(conn, settings.topic_readings, settings.partitions)
    bootstrap, pid = broker.bootstrap, broker.pid
    assert pid is not None
    first = WorkerProcess(bootstrap, settings, log_dir / f"{name}-ingest.log", [pid])
    try:
        first.wait_ready()
        ingest = first.measure_ingest(n, timeout=1800)
    finally:
        first.stop()
    ready: list[float] = []
    replayed: list[tuple[int, int, int]] = []
    for i in range(args.restarts):
        log_path = log_dir / f"{name}-restart{i}.log"
        began = time.perf_counter()
        worker = WorkerProcess(bootstrap, settings, log_path, [pid])
        try:
            worker.wait_ready(timeout=600)
            ready.append(time.perf_counter() - began)
        finally:
            worker.stop()
        found = RECOVERED.findall(log_path.read_text(errors="replace"))
        replayed.append(tuple(sum(int(f[k]) for f in found) for k in (0, 1, 2)))  # type: ignore[arg-type]
    replay = asyncio.run(_replay_seconds(conn, settings))
    return {
        "windows": windows, "readings": n, "produce_rate": produce_rate,
        "ingest_rate": ingest["rate"], "ready_s": statistics.median(ready), "ready_all": ready,
        "replayed": replayed[-1], **replay,
    }  # fmt: skip


# --- (b) releaser rebuild -----------------------------------------------------------------
async def _write_release_history(
    conn: KafkaConnection, settings: Settings, windows: int, snapshots: bool, args: Any
) -> None:
    """``windows`` released windows as the releaser stores and publishes them."""
    producer = AIOKafkaProducer(**conn.producer_kwargs(), linger_ms=20)
    await producer.start()
    try:
        ledger = BudgetLedger(settings.budget_period_seconds, settings.budget_cap)
        tracker = SnapshotTracker()
        log_offset = releases_offset = 0
        start0 = 1_700_000_000 // 3600 * 3600
        for i in range(windows):
            start = start0 + i * settings.window_seconds
            cells = [
                {"type": "cell", "cell": f"c{c}", "mean": 30.0, "release_id": f"{start}/c{c}"}
                for c in range(args.cells)
            ]
            summary = {"type": "window", "release_id": f"{start}/w", "privacy_loss": 1.0}
            vehicles = [f"veh-{(i * 7 + v) % (3 * args.window_vehicles):05d}" for v in range(
                args.window_vehicles)]  # fmt: skip
            names = sorted(set(vehicles))
            loss = WindowLoss.from_counts(start, settings.epsilon, names, [1] * len(names))
            parts = rec.encode_loss(loss, "a") + rec.encode_release(
                {"window_start": start, "cells": cells, "summary": summary}, "a"
            )
            sent = [await producer.send(settings.topic_release_log, p, partition=0) for p in parts]
            sent += [
                await producer.send(settings.topic_releases, orjson.dumps(r), partition=0)
                for r in [*cells, summary]
            ]
            await asyncio.gather(*sent)
            first = log_offset
            log_offset += len(parts)
            releases_offset += len(cells) + 1
            ledger.record_released(loss)
            tracker.note_stored(start, first, 1.0)
            tracker.note_published(releases_offset)
            if snapshots:
                needed = (e.window_start for e in ledger.entries())
                snapshot = tracker.snapshot(needed, log_offset)
                await producer.send_and_wait(
                    settings.topic_release_log, snapshot.encode(), partition=0
                )
                log_offset += 1
    finally:
        await producer.stop()


async def _rebuild_seconds(conn: KafkaConnection, settings: Settings, repeat: int) -> list[float]:
    producer = AIOKafkaProducer(**conn.producer_kwargs())
    await producer.start()
    consumer = AIOKafkaConsumer(**conn.consumer_kwargs(), enable_auto_commit=False)
    await consumer.start()
    tp = TopicPartition(settings.topic_partials, 0)
    consumer.assign([tp])
    times = []
    try:
        for _ in range(repeat):
            service = ReleaseService(settings, conn, producer, ServiceMetrics(), LaplaceNoise())
            began = time.perf_counter()
            await service._rebuild(consumer, tp)
            times.append(time.perf_counter() - began)
            assert len(service.coordinator.released) >= 1
    finally:
        await consumer.stop()
        await producer.stop()
    return times


def releaser_rebuild(
    conn: KafkaConnection, windows: int, snapshots: bool, args: argparse.Namespace
) -> dict[str, Any]:
    name = f"rel{windows}{'s' if snapshots else 'n'}-{uuid.uuid4().hex[:6]}"
    settings = service_settings(name, f"{name}.readings", args.partitions)
    ensure_service_topics(settings, conn)
    asyncio.run(_write_release_history(conn, settings, windows, snapshots, args))
    times = asyncio.run(_rebuild_seconds(conn, settings, args.restarts))
    return {"windows": windows, "snapshots": snapshots, "rebuild_s": statistics.median(times),
            "all": times}  # fmt: skip


# --- main ---------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", type=int, default=2, help="windows of the short history")
    parser.add_argument("--long", type=int, default=24, help="windows of the long history")
    parser.add_argument("--window-seconds", type=int, default=60)
    parser.add_argument("--readings-per-window", type=int, default=100_000)
    parser.add_argument("--vehicles", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--windows-few", type=int, default=24)
    parser.add_argument("--windows-many", type=int, default=2_000)
    parser.add_argument("--cells", type=int, default=100, help="released cells per window")
    parser.add_argument("--window-vehicles", type=int, default=500, help="per window's ledger")
    parser.add_argument("--skip-worker", action="store_true")
    parser.add_argument("--skip-releaser", action="store_true")
    args = parser.parse_args(argv)
    os.environ["BENCH_WORKER_LOG_LEVEL"] = "info"  # the recovery log lines are counted
    print(f"load average before: {load_average()}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="recovery-bench-") as tmp, EmbeddedBroker() as broker:
        conn = KafkaConnection(broker.bootstrap, embedded=True, client_id="bench-recovery")
        if not args.skip_worker:
            runs = [worker_restart(broker, conn, w, args, Path(tmp)) for w in (args.short,
                    args.long)]  # fmt: skip
            print(f"\n(a) worker restart: windows of {args.window_seconds} s event time, "
                  f"{args.readings_per_window:,} readings each, {PER_MESSAGE}/message")  # fmt: skip
            print(f"  {'windows':>7} {'readings':>10} {'produce/s':>10} {'ingest/s':>10} "
                  f"{'ready s':>8} {'replayed/of state records':>27} "
                  f"{'whole replay s':>15} {'ckpt replay s':>14}")  # fmt: skip
            for r in runs:
                replayed, _, total = r["replayed"]
                print(f"  {r['windows']:>7} {r['readings']:>10,} {r['produce_rate']:>10,.0f} "
                      f"{r['ingest_rate']:>10,.0f} {r['ready_s']:>8.2f} "
                      f"{f'{replayed:,} / {total:,}':>27} {r['whole_s']:>15.2f} "
                      f"{r['checkpoint_s']:>14.2f}")  # fmt: skip
                print(f"          ready times: {', '.join(f'{t:.2f}' for t in r['ready_all'])}")
            short, long = runs
            ok &= print_ratio(
                f"ready after {args.long} / after {args.short} windows",
                long["ready_s"] / short["ready_s"], 1.5, higher_is_better=False,
            )  # fmt: skip
            print(f"  baseline (whole replay, in-process) {args.long} / {args.short} windows: "
                  f"{long['whole_s'] / short['whole_s']:.2f}x; checkpoint replay: "
                  f"{long['checkpoint_s'] / short['checkpoint_s']:.2f}x")  # fmt: skip
        if not args.skip_releaser:
            few = releaser_rebuild(conn, args.windows_few, True, args)
            many = releaser_rebuild(conn, args.windows_many, True, args)
            old = releaser_rebuild(conn, args.windows_many, False, args)
            print(f"\n(b) releaser rebuild ({args.cells} cells, {args.window_vehicles} vehicles "
                  f"per window)")  # fmt: skip
            for r in (few, many, old):
                label = "snapshots" if r["snapshots"] else "no snapshots (baseline)"
                times = ", ".join(f"{t:.3f}" for t in r["all"])
                print(f"  {r['windows']:>6} windows, {label:<24} {r['rebuild_s']:>7.3f} s"
                      f"   ({times})")  # fmt: skip
            ok &= print_ratio(
                f"rebuild after {args.windows_many} / after {args.windows_few} windows",
                many["rebuild_s"] / few["rebuild_s"], 2.0, higher_is_better=False,
            )  # fmt: skip
            print(f"  baseline (no snapshots) {args.windows_many} windows / snapshots "
                  f"{args.windows_few}: {old['rebuild_s'] / few['rebuild_s']:.2f}x")  # fmt: skip
    print(f"load average after: {load_average()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
