"""The accurate per-group sum (docs/math.md §4.2, "Float inputs"): Ogita-Rump-Oishi's Sum2,
compiled, checked against the algorithm in Python and its bound against exact rationals."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from stream_dp.dp import accurate_sum
from stream_dp.dp.accurate_sum import grouped_sums

U = 65.0
UNIT = Fraction(1, 2**53)


def sum2(values: list[float]) -> float:
    """Sum2 as published: TwoSum cascaded from 0.0, the errors summed apart, added once."""
    s = c = 0.0
    for x in values:
        t = s + x
        z = t - s
        c += (s - (t - z)) + (x - z)
        s = t
    return s + c


def groups(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Group bounds (some empty) and non-negative values of widely spread magnitudes."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 300, size=12)
    sizes[3] = 0
    values = rng.uniform(0, U, size=int(sizes.sum())) * np.exp2(rng.integers(-30, 30, sizes.sum()))
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), values


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_sums_are_sum2_bit_for_bit(seed: int) -> None:
    start, values = groups(seed)
    out = grouped_sums(start, values)
    expected = [sum2(values[a:b].tolist()) for a, b in zip(start[:-1], start[1:], strict=True)]
    assert out.tolist() == expected
    assert out[3] == 0.0


def test_each_sum_is_within_one_and_a_half_roundings_where_a_running_sum_is_not() -> None:
    """The bound of Prop. 4.5 for non-negative values: |sum2 - exact| <= 1.5 u exact, on
    data where a plain running sum is many roundings off (the check is not vacuous)."""
    worst_plain = Fraction(0)
    for seed in range(30):
        rng = np.random.default_rng(seed)
        values = rng.uniform(0, U, size=4000) * rng.integers(1, 5, size=4000)
        values[::97] = rng.uniform(0, 1e-9, size=len(values[::97]))  # small values lost
        exact = sum(Fraction(v) for v in values.tolist())
        got = grouped_sums(np.array([0, len(values)]), values)[0]
        assert abs(Fraction(got) - exact) <= Fraction(3, 2) * UNIT * exact
        plain = np.cumsum(values)[-1]  # a running sum, as ``np.bincount`` forms it
        worst_plain = max(worst_plain, abs(Fraction(plain) - exact) / (UNIT * exact))
    assert worst_plain > 10


def test_a_group_too_large_for_the_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accurate_sum, "MAX_TERMS", 3)
    assert grouped_sums(np.array([0, 3]), np.ones(3)).tolist() == [3.0]
    with pytest.raises(ValueError, match="more than 3 values"):
        grouped_sums(np.array([0, 1, 5]), np.ones(5))
