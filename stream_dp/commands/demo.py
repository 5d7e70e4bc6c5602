"""`stream-dp demo`: the whole service on one machine, on real data, in about a minute.

Starts the embedded broker, one worker (`stream-dp serve` in a child process), replays the
bundled New York Harbor AIS week (tracktable-data, BSD-2-Clause) into the readings topic,
and prints each window's release as it is published, then a summary. --hours N replays the
busiest N consecutive hours of the week (most vessel-hours), not its first: the week starts
at 23:00 New York time, and its first night hours have too few vessels for any cell to
meet the accuracy target. Under --privacy-model secret-routes it replays a dense synthetic
city instead (the AIS week has too few vessels per cell for that model). With --keep-running
the broker, the worker and its dashboard stay up after the replay until SIGINT or SIGTERM.
The exit status is 1 when any window failed to release (each is still published as failed,
and the worker's line on it, with the code location, goes to stderr); with --keep-running
the run ends on the signal instead, with its status.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from stream_dp.commands import demo_secret
from stream_dp.commands.basemap_options import add_basemap_options
from stream_dp.commands.clock_options import add_clock_options
from stream_dp.commands.profile import promise
from stream_dp.commands.release import add_release_options, settings_from_args
from stream_dp.commands.shared import CliError, plain_text
from stream_dp.config import Settings
from stream_dp.secret_routes import SECRET_ROUTES

HOUR = 3600

# The settings' defaults (the budget profile, commands/profile.py) but for these: the idle
# close is shorter, so the replay's last window closes soon after it.
DEMO_DEFAULTS = {
    "idle_close_seconds": 5.0,
    # The demo starts its own empty broker: a ledger to restore cannot exist (issue 25).
    "require_existing_ledger": False,
}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "demo",
        help="embedded broker + worker + real sample replay",
        description=plain_text(__doc__),
    )
    parser.add_argument(
        "--hours",
        type=int,
        metavar="N",
        help="replay only the busiest N consecutive hours of the week (default the whole week)",
    )
    parser.add_argument(
        "--rate", type=float, metavar="X", help="replay rate, readings/s (default unthrottled)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="X",
        help="give up after X seconds (default 300)",
    )
    parser.add_argument(
        "--web-port", type=int, default=0, metavar="N", help="worker HTTP port (default 0: free)"
    )
    parser.add_argument(
        "--keep-running",
        action="store_true",
        help="after the replay keep the broker, the worker and its dashboard up until Ctrl-C",
    )
    add_basemap_options(parser)
    add_release_options(parser, DEMO_DEFAULTS)
    add_clock_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.hours is not None and args.hours < 1:
        raise CliError("--hours must be at least 1")
    if args.rate is not None and args.rate <= 0:
        raise CliError("--rate must be positive")
    settings = demo_settings(args)
    try:
        return asyncio.run(_demo(args, settings))
    except asyncio.CancelledError:  # SIGTERM: everything below was stopped on the way out
        return 128 + signal.SIGTERM


def demo_settings(args: argparse.Namespace) -> Settings:
    """The demo's settings: its options, else its defaults (the budget profile, each setting
    on its own); never ``require_existing_ledger``, whatever the environment says (its broker
    starts empty)."""
    settings = settings_from_args(args, **DEMO_DEFAULTS)
    secret = settings.privacy_model == SECRET_ROUTES  # no spans there (docs/math.md §14)
    if secret and settings.clock_start is None:  # the city is old data: its own clock
        clock = demo_secret.replay_clock(settings.window_seconds, args.hours, args.rate)
        return settings_from_args(args, **DEMO_DEFAULTS, **clock)
    if args.hours is not None and settings.vehicle_budget is not None and not secret:
        if "max_span_hours" not in settings.model_fields_set:
            # A replay of N hours holds no span longer than N: its last window then releases
            # what is still pooling (or withholds it) instead of leaving it pending after it.
            spans = min(settings.max_span_hours, args.hours)
            return settings_from_args(args, **DEMO_DEFAULTS, max_span_hours=spans)
    return settings


async def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from stream_dp.kafka.embedded_broker import EmbeddedBroker, free_loopback_port
    from stream_dp.kafka.service_topics import ensure_service_topics
    from stream_dp.producer import produce_readings
    from stream_dp.release.records import rfc3339
    from stream_dp.worker.connection_settings import connection_from_settings

    # SIGTERM cancels the demo like Ctrl-C does, so the worker and the broker are stopped.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, _current_task().cancel)
    secret = settings.privacy_model == SECRET_ROUTES
    if secret:
        hours = args.hours or demo_secret.DEFAULT_HOURS
        readings = demo_secret.dense_city_readings(hours)
        windows = {int(r["ts"] // settings.window_seconds) for r in readings}
        print(demo_secret.sample_line(readings, hours))
        print(demo_secret.threshold_line(settings))
    else:
        readings = replayed_readings(args.hours)
        windows = {int(r["ts"] // settings.window_seconds) for r in readings}
        span = ""
        if args.hours is not None and readings:
            first = readings[0]["ts"] // HOUR * HOUR
            span = f"; {rfc3339(first)} to {rfc3339(first + len(windows) * HOUR)}, the busiest"
        vessels = len({r["vehicle_id"] for r in readings})
        print(
            f"sample: {len(readings):,} AIS readings of {vessels} vessels, {len(windows)} "
            f"hourly windows (NY Harbor, Dec 2020; tracktable-data{span})"
        )
    web_port = args.web_port or free_loopback_port()
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        conn = connection_from_settings(settings, broker.bootstrap)
        await asyncio.to_thread(ensure_service_topics, settings, conn)
        log_path = Path(tmp) / "worker.log"
        worker = _start_worker(settings, broker.bootstrap, web_port, log_path)
        base = f"http://127.0.0.1:{web_port}"
        print(f"broker:    {broker.bootstrap}")
        print(f"dashboard: {base}/dashboard")
        print(f"metrics:   {base}/metrics")
        consumer = asyncio.create_task(_follow_releases(conn, settings, len(windows)))
        failed = 0
        try:
            stats = await produce_readings(conn, settings.topic_readings, readings, 100, args.rate)
            print(
                f"replayed {stats.readings:,} readings in {stats.messages:,} messages "
                f"({stats.readings / max(stats.seconds, 1e-9):,.0f} readings/s)"
            )
            summaries = await asyncio.wait_for(_unless_dead(consumer, worker), args.timeout)
            failed = sum(s.get("status") == "failed" for s in summaries)
            if failed:  # the worker's lines on them: the error and where it was raised
                print(_failure_lines(log_path), file=sys.stderr)
            if secret:
                print("\n".join(demo_secret.summary_lines(summaries)))
            else:
                _print_summary(summaries, settings)
                print("\n".join(ledger_lines(await vehicle_losses(conn, settings), settings)))
            if args.keep_running:
                print(
                    f"\nstill running: dashboard {base}/dashboard, metrics {base}/metrics "
                    "(Ctrl-C to stop)",
                    flush=True,
                )
                await _until_dead(worker)
        except TimeoutError:
            print(_tail(log_path), file=sys.stderr)
            raise CliError(f"not every window was released within {args.timeout:g} s") from None
        except WorkerDied as exc:
            print(_tail(log_path), file=sys.stderr)
            raise CliError(f"the worker exited with status {exc.args[0]}") from None
        finally:
            consumer.cancel()  # stopped before the broker, on every way out (SIGINT too)
            await asyncio.gather(consumer, return_exceptions=True)
            worker.terminate()
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
    return 1 if failed else 0  # as `stream-dp release`: a failed window is an error


def replayed_readings(hours: int | None) -> list[dict[str, Any]]:
    """The sample's readings, or those of its ``hours`` consecutive UTC hours with the most
    vessel-hours (distinct vessels summed over the hours; the earliest such stretch), so a
    short replay has traffic enough for released cells. Sorted as the sample is."""
    from stream_dp.sources.sample import load_sample

    readings = load_sample()
    if hours is None or not readings:
        return readings
    vessels: dict[int, set[str]] = {}
    for r in readings:
        vessels.setdefault(int(r["ts"] // HOUR), set()).add(r["vehicle_id"])
    first = min(vessels)
    counts = [len(vessels.get(h, ())) for h in range(first, max(vessels) + 1)]
    starts = range(max(1, len(counts) - hours + 1))
    best = max(starts, key=lambda i: (sum(counts[i : i + hours]), -i))
    begin = (first + best) * HOUR
    return [r for r in readings if begin <= r["ts"] < begin + hours * HOUR]


def _current_task() -> asyncio.Task[Any]:
    task = asyncio.current_task()
    assert task is not None
    return task


async def _until_dead(worker: subprocess.Popen[bytes]) -> None:
    """Wait for a signal (which cancels this), or raise WorkerDied if the worker exits."""
    while worker.poll() is None:
        await asyncio.sleep(0.5)
    raise WorkerDied(worker.returncode)


async def _unless_dead(task: asyncio.Task[Any], worker: subprocess.Popen[bytes]) -> Any:
    """``task``'s result, or an error as soon as the worker process dies."""
    while not task.done():
        if worker.poll() is not None:
            task.cancel()
            raise WorkerDied(worker.returncode)
        await asyncio.sleep(0.5)
    return task.result()


class WorkerDied(Exception):
    pass


def _start_worker(
    settings: Settings, bootstrap: str, web_port: int, log_path: Path
) -> subprocess.Popen[bytes]:
    env = {**os.environ, **worker_env(settings)}
    # -P: the worker imports the package this command runs, never a ``stream_dp/`` folder in
    # the current directory (a source tree the package was installed from).
    command = [sys.executable, "-P", "-m", "stream_dp.cli", "serve", "--bootstrap", bootstrap,
               "--web-port", str(web_port), "--log-level", "warning"]  # fmt: skip
    with log_path.open("wb") as log:
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def worker_env(settings: Settings) -> dict[str, str]:
    """The demo worker's ``STREAM_DP_*`` variables: the demo's settings, on the embedded
    broker, never requiring an existing ledger (the broker is new and empty)."""
    return {
        **settings.to_env(),
        "STREAM_DP_KAFKA_EMBEDDED": "true",
        "STREAM_DP_REQUIRE_EXISTING_LEDGER": "false",
    }


async def vehicle_losses(conn: Any, settings: Settings) -> list[float]:
    """Each vessel's loss over the budget period, from the worker's release log (its ledger);
    no names (:func:`describe_losses` says it in words)."""
    from stream_dp.commands.profile import period_losses
    from stream_dp.kafka.partition_reader import iter_partition_to_end
    from stream_dp.worker.release_log import ReleaseLogIndex

    index, losses = ReleaseLogIndex(), []
    async for batch in iter_partition_to_end(conn, settings.topic_release_log, 0, 0):
        for message in batch:
            stored = index.add(message.offset, message.value)
            if stored is not None and stored.loss is not None:
                losses.append(stored.loss)
    return period_losses(settings, losses)


def ledger_lines(per_vehicle: list[float], settings: Settings) -> list[str]:
    """What the vessels lost (:func:`describe_losses`) and, under a vehicle budget, the busiest
    vessel's own loss in plain words (the window summaries' sum only bounds it)."""
    lines = [describe_losses(per_vehicle, settings)]
    if settings.vehicle_budget is not None:
        promise = (settings.vehicle_budget, settings.budget_period_seconds / 86400)
        lines.append(_plain_epsilon(max(per_vehicle, default=0.0), promise))
    return lines


def describe_losses(per_vehicle: list[float], settings: Settings) -> str:
    """``busiest vessel lost ε 13.6 of its ε 14 per 7 days; the median vessel ε 2.1``."""
    if not per_vehicle:
        return "No vessel was counted in a released cell: none lost anything."
    ordered = sorted(per_vehicle)
    median = (
        ordered[len(ordered) // 2]
        if len(ordered) % 2
        else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2
    )
    line = f"The busiest vessel lost ε {ordered[-1]:.1f}"
    budget = promise(settings)
    line += f" of its ε {budget}" if budget else " (no per-vessel budget promised)"
    return (
        f"{line}; the median vessel ε {median:.1f} ({len(ordered)} vessels counted in a "
        "released cell, basic composition, from the worker's ledger)."
    )


async def _follow_releases(conn: Any, settings: Settings, expected: int) -> list[dict[str, Any]]:
    """Print each window's release as it appears in the output topic (read by offset from
    Fetch responses, which the embedded broker answers correctly)."""
    from stream_dp.kafka.partition_reader import iter_partition_to_end

    summaries: list[dict[str, Any]] = []
    seen: set[str] = set()
    cells: dict[str, list[dict[str, Any]]] = {}
    secret = settings.privacy_model == SECRET_ROUTES
    if secret:
        print(demo_secret.HEADER)
    else:
        print(_legend(settings))
        print(
            f"{'window (UTC)':<17} {'cells':>5} {'vessels':>7} {'readings':>8} {'G1->K':>7} "
            f"{'K*eps':>6} {'eps spent':>9} {'error bound':>11}  busiest cell: mean km/h"
        )
    spent = 0.0
    offset = 0
    while len(summaries) < expected:
        async for batch in iter_partition_to_end(conn, settings.topic_releases, 0, offset):
            for message in batch:
                offset = message.offset + 1
                record = orjson.loads(message.value)
                if record["release_id"] in seen:
                    continue  # a re-published duplicate
                seen.add(record["release_id"])
                if record["type"] == "cell":
                    # By the window it was released in: a span's record starts earlier.
                    cells.setdefault(record["window_end"], []).append(record)
                    continue
                summaries.append(record)
                window_cells = cells.pop(record["window_end"], [])
                if secret:
                    print(demo_secret.window_line(record, window_cells), flush=True)
                    continue
                spent += record["privacy_loss"]
                line = _window_line(record, window_cells, spent, settings)
                print(line, flush=True)
        await asyncio.sleep(0.5)
    return summaries


def _legend(settings: Settings) -> str:
    """What each column of the live table means, with its unit."""
    u = f"{settings.upper:g}"
    return "\n".join(
        [
            "Columns (one row per released hour):",
            "  window (UTC)  start of the one-hour event-time window",
            "  cells         H3 cells released (count); vessels, readings: in the whole window",
            "  G1->K         most cells one vessel was counted in, before -> after CLIP-USER",
            "  K*eps         this window's worst-case privacy loss of one vessel (epsilon)",
            "  eps spent     the same, summed over the windows so far (epsilon)",
            "  error bound   CLIP-USER's per-cell worst-case error: mean error (km/h) plus",
            "                variance error ((km/h)²), the paper's combined metric",
            f"  busiest cell  its released mean speed ± mean_error (km/h, bounds 0..{u}): the",
            "                error bar holds with probability >= 95 %; a mean of exactly",
            f"                0 or {u} (marked *) is Laplace noise clamped at a bound, not a speed",
            "",
        ]
    )


def _window_line(
    record: dict[str, Any], cells: list[dict[str, Any]], spent: float, settings: Settings
) -> str:
    when = record["window_start"][:16].replace("T", " ")
    if record.get("status") == "failed":
        return (
            f"{when:<17} release failed ({record.get('error', 'error')}); "
            f"K*eps {record['privacy_loss']:.2f} charged, eps spent {spent:.2f}"
        )
    busiest = max(cells, key=lambda r: r["n_readings"], default=None)
    busy = "-"
    if busiest:
        clamped = "*" if busiest["mean"] in (0.0, settings.upper) else ""
        error = busiest.get("mean_error")
        bar = "" if error is None else f" ± {error:.1f}"
        busy = f"{busiest['mean']:.1f}{clamped}{bar} ({busiest['n_readings']} readings)"
    return (
        f"{when:<17} {record['cells_released']:>5} {record['n_vehicles']:>7} "
        f"{record['n_readings']:>8} {record['G1']:>3}->{record['K']:<3} "
        f"{record['privacy_loss']:>6.2f} {spent:>9.2f} "
        f"{record['error_bound']:>11.2f}  {busy}"
    )


def _print_summary(summaries: list[dict[str, Any]], settings: Settings) -> None:
    g1 = sum(s["privacy_loss_unclipped"] for s in summaries)
    k = sum(s["privacy_loss"] for s in summaries)
    cells = sum(s["cells_released"] for s in summaries)
    late = sum(s["readings_dropped_late"] for s in summaries)
    budget = settings.vehicle_budget
    per_cell = (
        f"eps = {settings.epsilon} per cell"
        if budget is None
        else "each cell's own eps, the least that meets T"
    )
    loss = (
        "Worst-case privacy loss of one vessel over the replay"
        if budget is None
        else "Largest loss of a vessel in each window, summed over the windows (a bound of any "
        "one vessel's loss: the largest may be another vessel in each window; each vessel's "
        "own loss from the ledger below)"
    )
    print(
        f"\n{len(summaries)} windows released once each, {cells} cell records; "
        f"late readings dropped: {late}.\n"
        f"{loss}: {k:.2f} (without CLIP-USER: {g1:.2f}; {per_cell}, basic composition)."
    )
    failed = sum(s.get("status") == "failed" for s in summaries)
    if failed:
        print(f"{failed} of these windows failed to release: published as failed, charged.")
    if budget is None:  # under a budget the words follow the ledger's busiest vessel
        print(_plain_epsilon(k))


def _plain_epsilon(epsilon: float, promise: tuple[float, float] | None = None) -> str:
    """What a vessel's summed epsilon means, in words; ``promise``: the vehicle budget (ε B
    per so many days) the plan keeps every vessel within."""
    if promise is not None:
        strength = f"the plan keeps every vessel within ε {promise[0]:g} per {promise[1]:g} days"
    elif epsilon <= 1:
        strength = "strong protection"
    elif epsilon <= 10:
        strength = "moderate protection"
    else:
        strength = "weak protection for the vessel that was everywhere all the time"
    return (
        f"In plain words: whatever one vessel's speeds were, all of these releases together "
        f"make any conclusion about them at most e^{epsilon:.2f} times more likely than "
        f"without its data ({strength}). Most vessels visit fewer cells and lose less; "
        "the figure is the worst case over all vessels."
    )


def _log_lines(path: Path) -> list[str]:
    """The worker log's lines (none if it cannot be read)."""
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _failure_lines(path: Path) -> str:
    """The worker log's lines on its failed windows (code locations, never data)."""
    return "\n".join(line for line in _log_lines(path) if " failed: " in line)


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(_log_lines(path)[-lines:])
