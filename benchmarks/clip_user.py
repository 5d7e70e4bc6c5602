"""Benchmark CLIP-USER and the pseudo-user step; prints measured numbers.

0. The compiled kernel's one-off costs, each in a fresh process with its own empty numba cache
   directory: the first call when it compiles, then the first call when it loads the cache
   (and, in this process, the first call whatever the cache state).
1. The composition paper's synthetic instance (Sec. VI-A2: G = 12, L = 4095, Geo(0.01),
   heavy hitter scaled by 1 + gamma): ``clip_user`` (the compiled kernel) and the uncompiled
   ``"numpy"`` reference strategy of ``tests.support.clip_user_strategies`` (batched
   rounds; best of 5 wall-clock runs each, after a warm-up) against one run of the plain
   transcription ``tests.support.clip_user_reference`` (with a timeout: a timed-out
   reference gives a lower bound).
2. A city-scale instance: wall and CPU time of the compiled path and the ``"numpy"``
   strategy (the plain transcription is hopeless there), peak traced memory of ``clip_user``
   and ``pseudo_user_step``.

The machine's load average is printed first: the times are only comparable on a quiet machine.

Run: ``python benchmarks/clip_user.py [--quick] [--seed N] [--reference-timeout S]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support/: not installed

from stream_dp.dp.clip_user import clip_user  # noqa: E402
from stream_dp.dp.occupancy import Occupancy  # noqa: E402
from stream_dp.dp.pseudo_user import pseudo_user_step  # noqa: E402
from stream_dp.dp.synthetic import city_occupancy, paper_synthetic_occupancy  # noqa: E402
from tests.support.clip_user_reference import reference_clip_user  # noqa: E402
from tests.support.clip_user_strategies import clip_user_with  # noqa: E402

UPPER = 65.0
T = TypeVar("T")


class _Timeout(Exception):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise _Timeout


def timed(call: Callable[[], T], timeout: float | None = None) -> tuple[T | None, float]:
    """(result, seconds); result None if ``timeout`` seconds passed first."""
    if timeout is not None:
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    start = time.perf_counter()
    try:
        result: T | None = call()
    except _Timeout:
        result = None
    finally:
        if timeout is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return result, time.perf_counter() - start


def cpu_timed(call: Callable[[], T]) -> tuple[T, float, float]:
    """(result, wall seconds, CPU seconds of this process)."""
    cpu = time.process_time()
    result, wall = timed(call)
    assert result is not None
    return result, wall, time.process_time() - cpu


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}/{five:.2f}/{fifteen:.2f} on {os.cpu_count()} cores"


_FIRST_CALL = """
import time
from stream_dp.dp.occupancy import Occupancy
occ = Occupancy.from_triples([("a", "1", 1), ("b", "1", 2), ("a", "2", 5), ("b", "3", 4)])
start = time.perf_counter()
from stream_dp.dp.clip_user import ClipUserRun
from stream_dp.dp.clip_user_kernel import run_sequential, run_stages
run_stages(ClipUserRun(occ, 65.0, 0.5))  # the kernel (clip_user runs numpy rounds without numba)
first = time.perf_counter() - start
stats = run_sequential.stats
print(first, sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
"""


def first_call_in_fresh_process(cache_dir: str) -> tuple[float, int, int]:
    """(seconds, cache hits, cache misses) of the first compiled call in a new interpreter,
    imports of ``clip_user`` and numba included."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_CALL], env=env, cwd=root, check=True, capture_output=True
    )
    seconds, hits, misses = out.stdout.split()
    return float(seconds), int(hits), int(misses)


def compile_costs() -> None:
    print("== compiled kernel: first call in a fresh process (imports included) ==")
    with tempfile.TemporaryDirectory() as cache_dir:
        cold, _, misses = first_call_in_fresh_process(cache_dir)
        warm, hits, _ = first_call_in_fresh_process(cache_dir)
    print(f"JIT compile (empty cache, {misses} miss): {cold:6.2f} s")
    print(f"cache load ({hits} hit):                {warm:6.2f} s")
    occ = Occupancy.from_triples([("a", "1", 1), ("b", "1", 2), ("a", "2", 5)])
    _, here = timed(partial(clip_user, occ, UPPER, 0.5))
    print(f"first call in this process (the package's own cache): {here:6.2f} s")


def peak_mb(call: Callable[[], object]) -> float:
    """Peak memory traced (Python and numpy allocations) during ``call``, in MB."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def as_counts(occ: Occupancy) -> dict[tuple[str, str], int]:
    return {
        (occ.cells[c], occ.vehicles[v]): int(m)
        for c, v, m in zip(occ.cell_index, occ.vehicle_index, occ.count, strict=True)
    }


def best_of(runs: int, call: Callable[[], T]) -> tuple[T, float]:
    """The result and the best wall-clock time of ``runs`` calls."""
    timings = [timed(call) for _ in range(runs)]
    result = timings[0][0]
    assert result is not None
    return result, min(seconds for _, seconds in timings)


def paper_instances(seed: int, epsilons: tuple[float, ...], timeout: float) -> None:
    warm_up = paper_synthetic_occupancy(np.random.default_rng(seed + 1), 3.0, n_bits=8)
    for strategy in ("compiled", "numpy"):  # first-call costs (JIT/cache, imports) not timed
        clip_user_with(warm_up, UPPER, 0.5, strategy=strategy)
    print("== paper synthetic instance (G=12, L=4095, q=0.01), U=65; best of 5, seconds ==")
    print("gamma  eps   G1  K  suppressed  compiled     numpy  reference  ref/compiled  same")
    for gamma in (3.0, 6.0, 9.0):
        occ = paper_synthetic_occupancy(np.random.default_rng(seed), gamma)
        counts = as_counts(occ)
        for eps in epsilons:
            fast, fast_s = best_of(5, partial(clip_user, occ, UPPER, eps))
            numpy_run, numpy_s = best_of(
                5, partial(clip_user_with, occ, UPPER, eps, strategy="numpy")
            )
            ref, ref_s = timed(partial(reference_clip_user, counts, UPPER, eps), timeout)
            same_paths = np.array_equal(fast.suppressed_entries, numpy_run.suppressed_entries)
            if ref is None:
                same, ref_text, ratio = "n/a", f">{ref_s:.1f}", f">{ref_s / fast_s:.0f}x"
            else:
                same = str(list(fast.suppressed) == ref.suppressed and fast.k == ref.k)
                ref_text, ratio = f"{ref_s:.2f}", f"{ref_s / fast_s:.0f}x"
            print(
                f"{gamma:5.0f} {eps:4.1f} {fast.g1:4d} {fast.k:2d} {len(fast.suppressed):11d}"
                f" {fast_s:9.4f} {numpy_s:9.4f} {ref_text:>10} {ratio:>13}  {same}"
                f"{'' if same_paths else '  (compiled != numpy!)'}"
            )


def city_instance(seed: int, n_vehicles: int, n_cells: int, q: float, eps: float) -> None:
    occ = city_occupancy(np.random.default_rng(seed), n_vehicles, n_cells, 10.0, q)
    print(
        f"== city instance: {n_vehicles} vehicles, {n_cells} cells, {occ.n_entries} entries,"
        f" Geo({q}) counts, heavy hitter x4, U=65, eps={eps} =="
    )
    clip_user(occ, UPPER, eps)  # warm-up (the compiled path is warm already)
    runs = [cpu_timed(lambda: clip_user(occ, UPPER, eps)) for _ in range(3)]
    clip = runs[0][0]
    numpy_clip, numpy_s, numpy_cpu = cpu_timed(
        lambda: clip_user_with(occ, UPPER, eps, strategy="numpy")
    )
    same = np.array_equal(clip.suppressed_entries, numpy_clip.suppressed_entries)
    capped, pseudo_s = timed(lambda: pseudo_user_step(clip, UPPER, eps))
    assert capped is not None
    clip_mb = peak_mb(lambda: clip_user(occ, UPPER, eps))
    pseudo_mb = peak_mb(lambda: pseudo_user_step(clip, UPPER, eps))
    print(
        f"G1={clip.g1} K={clip.k} suppressed={len(clip.suppressed)}"
        f" E={clip.error_bound:.1f} max error after pseudo-user={capped.max_error:.1f}"
    )
    walls = ", ".join(f"{wall:.2f}" for _, wall, _ in runs)
    cpus = ", ".join(f"{cpu:.2f}" for _, _, cpu in runs)
    print(f"clip_user compiled: wall {walls} s; CPU {cpus} s (3 warm runs)")
    print(f"clip_user numpy:    wall {numpy_s:.2f} s; CPU {numpy_cpu:.2f} s; same result: {same}")
    print(f"clip_user peak traced memory {clip_mb:7.1f} MB (compiled)")
    print(f"pseudo_user_step: {pseudo_s:7.2f} s  peak traced memory {pseudo_mb:7.1f} MB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one epsilon, a small city")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reference-timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    epsilons = (0.5,) if args.quick else (0.1, 0.5, 1.0)
    print(load_average())
    compile_costs()
    paper_instances(args.seed, epsilons, args.reference_timeout)
    for eps in (1.0, 0.5):  # eps = 1: the "about 1 s" target (K = 3, ~783k suppressed)
        if args.quick:
            city_instance(args.seed, 10_000, 500, 0.1, eps)
        else:
            city_instance(args.seed, 100_000, 5_000, 0.1, eps)
    print(load_average())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
