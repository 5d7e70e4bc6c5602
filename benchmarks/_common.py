"""Shared pieces of the benchmarks: machine load, result tables, a stream-dp worker process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stream_dp.config import Settings
from stream_dp.kafka.embedded_broker import free_loopback_port

ACCEPTED = 'stream_dp_readings_total{outcome="accepted"}'


def load_average() -> str:
    """The 1/5/15-minute load averages and the core count, e.g. ``load 1.92/2.10/1.40 on 2``."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f}/{five:.2f}/{fifteen:.2f} on {os.cpu_count()} cores"


_TICKS = os.sysconf("SC_CLK_TCK")


def _machine_busy_ticks() -> int:
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4]  # all but idle and iowait


def _process_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime (all threads)


class CpuMeter:
    """CPU used during an interval by given processes ("ours") and by everything else.

    The load average cannot tell a benchmark's own processes from other users of the
    machine; /proc can: ``others`` (in cores) is what the rest of the machine took while
    we measured, the number to watch when repeating a measurement.
    """

    def __init__(self, pids: list[int]) -> None:
        self.pids = [os.getpid(), *pids]
        self._start = self._sample()

    def _sample(self) -> tuple[float, int, int]:
        return time.monotonic(), _machine_busy_ticks(), sum(map(_process_ticks, self.pids))

    def stop(self) -> tuple[float, float]:
        """(our cores, others' cores) averaged over the interval."""
        t0, machine0, ours0 = self._start
        t1, machine1, ours1 = self._sample()
        seconds = max(t1 - t0, 1e-9) * _TICKS
        ours = (ours1 - ours0) / seconds
        return ours, max((machine1 - machine0) / seconds - ours, 0.0)


@dataclass
class Result:
    """One measured throughput or time, with the load at its start."""

    name: str
    value: float
    unit: str
    load: str
    note: str = ""
    others: float | None = None  # cores used by other processes while measuring


def print_table(title: str, rows: list[Result]) -> None:
    print(f"\n{title}")
    width = max(len(r.name) for r in rows)
    for r in rows:
        note = f"  ({r.note})" if r.note else ""
        others = "" if r.others is None else f"; others used {r.others:.2f} cores"
        print(f"  {r.name:<{width}}  {r.value:>14,.2f} {r.unit:<12} [{r.load}{others}]{note}")


def print_ratio(name: str, ratio: float, target: float, higher_is_better: bool = True) -> bool:
    """Print ``name = ratio`` beside its target; returns whether the target is met."""
    met = ratio >= target if higher_is_better else ratio <= target
    verdict = "meets" if met else "MISSES"
    sign = ">=" if higher_is_better else "<="
    print(f"  {name:<62} {ratio:>9.3f}   target {sign} {target:g}: {verdict}")
    return met


def settings_env(settings: Settings) -> dict[str, str]:
    """``STREAM_DP_*`` variables reproducing ``settings`` (Kafka fields excluded)."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump().items():
        if value is None or name.startswith("kafka_"):
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        env[f"STREAM_DP_{name.upper()}"] = text
    return env


class WorkerProcess:
    """``stream-dp serve`` as a subprocess (own process group) with a web port to poll."""

    def __init__(
        self, bootstrap: str, settings: Settings, log_path: Path, other_pids: list[int]
    ) -> None:
        """``other_pids`` (e.g. the broker) count as "ours" in the CPU measurement."""
        self.other_pids = other_pids
        self.web_port = free_loopback_port()
        self.log_path = log_path
        env = {**os.environ, **settings_env(settings), "STREAM_DP_KAFKA_EMBEDDED": "true"}
        command = [sys.executable, "-m", "stream_dp.cli", "serve", "--bootstrap", bootstrap,
                   "--web-port", str(self.web_port), "--log-level",
                   os.environ.get("BENCH_WORKER_LOG_LEVEL", "warning")]  # fmt: skip
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def _get(self, path: str) -> tuple[int, bytes]:
        url = f"http://127.0.0.1:{self.web_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def metrics(self) -> dict[str, float]:
        """Every sample of ``/metrics`` by its full name with labels."""
        samples: dict[str, float] = {}
        for line in self._get("/metrics")[1].decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples

    def accepted(self) -> float:
        return self.metrics().get(ACCEPTED, 0.0)

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                if self._get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"worker not ready in {timeout:g} s:\n{self.log_tail()}")

    def measure_ingest(
        self, expected: int, timeout: float, poll: float = 0.05, stall: float = 20.0
    ) -> dict[str, Any]:
        """Poll ``accepted`` from the first accepted reading until ``expected`` are accepted.

        The rate is ``(expected - first_seen) / (t_all - t_first)``: readings counted at the
        first poll that saw any are excluded, so the poll interval does not inflate it.
        Raises when the count stops moving for ``stall`` seconds (e.g. a crashed agent).
        """
        deadline = time.monotonic() + timeout
        first: tuple[float, float] | None = None
        meter: CpuMeter | None = None
        count = 0.0
        changed = (time.monotonic(), count)
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                count = self.accepted()
            except OSError:
                count = 0.0
            now = time.monotonic()
            if count > 0 and first is None:
                first = (now, count)
                meter = CpuMeter([self.pid, *self.other_pids])
            if count != changed[1]:
                changed = (now, count)
            elif first is not None and now - changed[0] > stall:
                raise RuntimeError(
                    f"ingest stalled at {count:.0f} of {expected} readings for {stall:g} s"
                    f"\n{self.log_tail()}"
                )
            if count >= expected and first is not None and meter is not None:
                seconds = now - first[0]
                rate = (count - first[1]) / seconds if seconds > 0 else float("inf")
                ours, others = meter.stop()
                return {"rate": rate, "seconds": seconds, "accepted": count,
                        "cpu_ours": ours, "cpu_others": others}  # fmt: skip
            time.sleep(poll)
        raise RuntimeError(
            f"only {count:.0f} of {expected} readings accepted in {timeout:g} s\n{self.log_tail()}"
        )

    def _check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"worker exited early:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def log_tail(self, size: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-size:]
