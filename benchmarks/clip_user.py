"""Benchmark CLIP-USER and the pseudo-user step; prints measured numbers.

1. The composition paper's synthetic instance (Sec. VI-A2: G = 12, L = 4095, Geo(0.01),
   heavy hitter scaled by 1 + gamma): ``clip_user`` (best of 5 wall-clock runs) against one run
   of the plain transcription in ``tests/reference_clip_user.py`` (with a timeout: a timed-out
   reference gives a lower bound).
2. A city-scale instance: time and peak traced memory of ``clip_user`` and ``pseudo_user_step``.

Run: ``python benchmarks/clip_user.py [--quick] [--seed N] [--reference-timeout S]``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np

from stream_dp.dp.clip_user import clip_user
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.pseudo_user import pseudo_user_step
from stream_dp.dp.synthetic import city_occupancy, paper_synthetic_occupancy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.reference_clip_user import reference_clip_user  # noqa: E402

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


def paper_instances(seed: int, epsilons: tuple[float, ...], timeout: float) -> None:
    warm_up = paper_synthetic_occupancy(np.random.default_rng(seed + 1), 3.0, n_bits=8)
    clip_user(warm_up, UPPER, 0.5)  # first-call costs (imports, numpy caches) are not timed
    print("== paper synthetic instance (G=12, L=4095, q=0.01), U=65 ==")
    print("gamma  eps   G1  K  suppressed  clip_user_s  reference_s  speed-up  same")
    for gamma in (3.0, 6.0, 9.0):
        occ = paper_synthetic_occupancy(np.random.default_rng(seed), gamma)
        counts = as_counts(occ)
        for eps in epsilons:
            runs = [timed(partial(clip_user, occ, UPPER, eps)) for _ in range(5)]
            fast, fast_s = runs[0][0], min(seconds for _, seconds in runs)  # best of 5
            ref, ref_s = timed(partial(reference_clip_user, counts, UPPER, eps), timeout)
            assert fast is not None
            if ref is None:
                same, ref_text, ratio = "n/a", f">{ref_s:.1f}", f">{ref_s / fast_s:.0f}x"
            else:
                same = str(list(fast.suppressed) == ref.suppressed and fast.k == ref.k)
                ref_text, ratio = f"{ref_s:.2f}", f"{ref_s / fast_s:.0f}x"
            print(
                f"{gamma:5.0f} {eps:4.1f} {fast.g1:4d} {fast.k:2d} {len(fast.suppressed):11d}"
                f" {fast_s:12.3f} {ref_text:>12} {ratio:>9}  {same}"
            )


def city_instance(seed: int, n_vehicles: int, n_cells: int, q: float, eps: float) -> None:
    occ = city_occupancy(np.random.default_rng(seed), n_vehicles, n_cells, 10.0, q)
    print(
        f"== city instance: {n_vehicles} vehicles, {n_cells} cells, {occ.n_entries} entries,"
        f" Geo({q}) counts, heavy hitter x4, U=65, eps={eps} =="
    )
    clip, clip_s = timed(lambda: clip_user(occ, UPPER, eps))
    assert clip is not None
    capped, pseudo_s = timed(lambda: pseudo_user_step(clip, UPPER, eps))
    assert capped is not None
    clip_mb = peak_mb(lambda: clip_user(occ, UPPER, eps))
    pseudo_mb = peak_mb(lambda: pseudo_user_step(clip, UPPER, eps))
    print(
        f"G1={clip.g1} K={clip.k} suppressed={len(clip.suppressed)}"
        f" E={clip.error_bound:.1f} max error after pseudo-user={capped.max_error:.1f}"
    )
    print(f"clip_user:        {clip_s:7.2f} s  peak traced memory {clip_mb:7.1f} MB")
    print(f"pseudo_user_step: {pseudo_s:7.2f} s  peak traced memory {pseudo_mb:7.1f} MB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one epsilon, a small city")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reference-timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    epsilons = (0.5,) if args.quick else (0.1, 0.5, 1.0)
    paper_instances(args.seed, epsilons, args.reference_timeout)
    if args.quick:
        city_instance(args.seed, 10_000, 500, 0.1, 0.5)
    else:
        city_instance(args.seed, 100_000, 5_000, 0.1, 0.5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
