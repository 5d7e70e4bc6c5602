"""Tests of the compiled Laplace path (laplace_kernel + RandomSource.discrete_laplace_batch):
bit-for-bit agreement with the Python samplers on the same words, fall-backs, refills."""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp import laplace_kernel as lk
from stream_dp.dp.epsilon_grid import EPSILON_STEP, round_up
from stream_dp.dp.noise import GRID_BITS, LaplaceNoise, _grid_to_float, _plan, _round_to_grid
from stream_dp.dp.randomness import RandomSource, _twister_words, _WordBits

TOP = 2**63  # int64 holds [-TOP, TOP)


def _source(seed: int, chunk_words: int = 512, most_words: int = 1 << 16) -> RandomSource:
    """A seeded source whose pool fetches ``chunk_words`` (``extend``: up to ``most_words``)."""
    return RandomSource._over(_WordBits(_twister_words(seed), chunk_words, most_words), seeded=True)


def _each(values: np.ndarray, epsilon: float) -> np.ndarray:
    """``epsilon`` for every entry (``grid_plans`` takes each entry's own ε)."""
    return np.full(len(values), epsilon)


def _lowest_terms(t: int, s: int) -> tuple[int, int]:
    g = math.gcd(t, s)
    return t // g, s // g


# -- plans -----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    entries=st.lists(
        st.tuples(
            st.floats(allow_nan=False, allow_infinity=False),
            st.one_of(st.just(0.0), st.floats(min_value=5e-324, max_value=1e308)),
        ),
        min_size=1,
        max_size=8,
    ),
    epsilon=st.one_of(
        st.sampled_from([0.5, 1.0, 0.05, 2.0, 0.25, 3.0, 1e-9, 5e-324]),
        st.floats(min_value=1e-12, max_value=1e12),
    ),
)
def test_grid_plans_are_the_exact_plans(entries: list[tuple[float, float]], epsilon: float) -> None:
    values = np.array([v for v, _ in entries])
    sens = np.array([s for _, s in entries])
    kind, k, n, t, s = lk.grid_plans(values, sens, _each(values, epsilon), GRID_BITS)
    for i, (value, sensitivity) in enumerate(entries):
        plan = _plan(sensitivity, epsilon)
        if plan is None:
            assert kind[i] == lk.SKIP
            continue
        exact_n = _round_to_grid(value, plan.k)
        num, den = plan.grid_scale.numerator, plan.grid_scale.denominator
        if kind[i] == lk.DRAW:
            assert (int(k[i]), int(n[i]), int(t[i]), int(s[i])) == (plan.k, exact_n, num, den)
        else:
            assert kind[i] == lk.EXACT
            # Refused only when something does not fit: the scale, the grid index, or the
            # unreduced numerator p / 2^c of sensitivity 2^-k + 1.
            unreduced = Fraction(sensitivity) / Fraction(2) ** plan.k + 1
            p, c = unreduced.numerator, unreduced.denominator.bit_length() - 1
            assert num >= TOP or den >= TOP or abs(exact_n) > 2**62 or p >= 2**62 or c > 62


@settings(max_examples=200, deadline=None)
@given(
    entries=st.lists(
        st.tuples(
            st.floats(min_value=-1e6, max_value=1e6),
            st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=1e6)),
            st.one_of(
                st.integers(1, 2_000).map(lambda m: m * EPSILON_STEP),
                st.sampled_from([0.05, 0.37, 1.0, 3.0]),
            ),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_grid_plans_take_each_entrys_own_epsilon(entries: list[tuple[float, float, float]]) -> None:
    """Mixed ε in one call: every entry's plan is the exact plan of its own (sensitivity, ε)."""
    values, sens, eps = (np.array(column) for column in zip(*entries, strict=True))
    kind, k, n, t, s = lk.grid_plans(values, sens, eps, GRID_BITS)
    for i, (value, sensitivity, epsilon) in enumerate(entries):
        plan = _plan(sensitivity, epsilon)
        if plan is None:
            assert kind[i] == lk.SKIP
            continue
        scale, index = plan.grid_scale, _round_to_grid(value, plan.k)
        if kind[i] == lk.DRAW:
            got = (int(k[i]), int(n[i]), int(t[i]), int(s[i]))
            assert got == (plan.k, index, scale.numerator, scale.denominator)
        else:  # a 53-bit odd mantissa of ε, or a value too far out on its grid
            assert kind[i] == lk.EXACT and (epsilon in (0.05, 0.37) or abs(index) > 2**62)


def test_per_cell_epsilons_of_the_grid_are_compiled() -> None:
    """Every ε ``round_up`` can give (the dyadic grid, up to 20), with the cap-step sensitivities
    of the CLIP mean (U c / S) and the variance (U^2 c / (4 S)), is drawn by the kernel: none
    falls back to the Python sampler, which would be slower by two orders of magnitude."""
    rng = np.random.default_rng(12)
    needed = np.concatenate([rng.uniform(1e-4, 20.0, 3_000), [1e-9, EPSILON_STEP, 0.37, 0.05]])
    eps = round_up(needed)
    assert len(np.unique(eps)) > 1_000
    caps, kept = rng.integers(1, 40, len(eps)), rng.integers(1, 5_000, len(eps))
    sens = np.where(np.arange(len(eps)) % 2 == 0, 65.0 * caps / kept, 65.0**2 * caps / (4 * kept))
    values = rng.uniform(0.0, 65.0, len(eps))
    kind, _, _, t, s = lk.grid_plans(values, sens, eps, GRID_BITS)
    assert np.all(kind == lk.DRAW)
    z, in_python = _source(4).discrete_laplace_batch(kind, t, s, {})
    assert in_python == {} and np.count_nonzero(z) > len(z) // 2


def test_release_each_is_release_in_turn() -> None:
    """One batch for all ε (several of the grid, one off it: the Python plan, sensitivity 0,
    non-finite entries left unreleased): exactly ``release`` entry after entry, same bits."""
    rng = np.random.default_rng(9)
    size = 400
    values = rng.uniform(0.0, 65.0, size)
    sens = 65.0 / rng.integers(1, 300, size)
    eps = rng.choice(np.array([3, 17, 47, 128, 300]) * EPSILON_STEP, size)
    eps[::37] = 0.05  # its scale does not fit in int64
    sens[::23] = 0.0
    values[5], sens[6], eps[7] = math.nan, math.inf, math.inf
    batch_source = _source(21)
    batch = LaplaceNoise(batch_source).release_each(values, sens, eps)
    one_by_one = _source(21)
    noise = LaplaceNoise(one_by_one)
    expected = [
        noise.release(v, s, e) if math.isfinite(v + s + e) else math.nan
        for v, s, e in zip(values.tolist(), sens.tolist(), eps.tolist(), strict=True)
    ]
    assert np.array_equal(batch, np.array(expected), equal_nan=True)
    assert np.isnan(batch[5:8]).all() and np.isfinite(np.delete(batch, [5, 6, 7])).all()
    assert batch_source.randbelow(2**64) == one_by_one.randbelow(2**64)  # same bits used
    drawn = (sens > 0) & np.isfinite(batch)
    assert np.all(batch[drawn] != values[drawn]) and np.all(batch[sens == 0] == values[sens == 0])


def test_release_each_refuses_bad_arguments() -> None:
    noise = LaplaceNoise(_source(2))
    with pytest.raises(ValueError, match="epsilon"):
        noise.release_each([1.0, 2.0], 1.0, [0.5, 0.0])
    with pytest.raises(ValueError, match="sensitivities"):
        noise.release_each([1.0, 2.0], [1.0, -1.0], 0.5)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 0.25])
def test_usual_plans_take_the_fast_path(epsilon: float) -> None:
    """Any sensitivity with a short epsilon, for values up to 2^20 scales: |n| <= 2^61."""
    rng = np.random.default_rng(1)
    sens = np.exp(rng.uniform(math.log(1e-300), math.log(1e300), 5_000))
    sens[:4] = [65.0 / 3, 65.0, 65.0**2 / 4, 1.0]
    values = rng.uniform(-1, 1, 5_000) * sens / max(epsilon, 1.0) * 2.0**20
    kind, *_ = lk.grid_plans(values, sens, _each(values, epsilon), GRID_BITS)
    assert np.all(kind == lk.DRAW)


def test_grid_indices_up_to_2_62_are_compiled() -> None:
    """Sensitivity 1, epsilon 1: grid 2^-40, so value 2^22 has index 2^62."""
    values = np.array([2.0**22, -(2.0**22), math.nextafter(2.0**22, 0), 2.0**22 + 2.0**-30])
    values = np.concatenate([values, [2.0**23, -(2.0**23), 2.0**24, 2.0**30]])
    kind, _, n, _, _ = lk.grid_plans(values, np.ones(len(values)), _each(values, 1.0), GRID_BITS)
    assert kind.tolist() == [lk.DRAW] * 3 + [lk.EXACT] * 5
    assert n[:3].tolist() == [_round_to_grid(v, -40) for v in values[:3].tolist()]


def test_epsilon_with_a_wide_mantissa_falls_back() -> None:
    """0.05 = 3602879701896397 / 2^56: the scale needs about 97 bits."""
    values = np.array([1.0, 2.0])
    kind, *_ = lk.grid_plans(values, np.array([65.0 / 3, 0.0]), _each(values, 0.05), GRID_BITS)
    assert kind.tolist() == [lk.EXACT, lk.SKIP]


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(-(2**62), 2**62),
    z=st.integers(-(2**63), 2**63 - 1),
    k=st.integers(-1200, 1000),
)
def test_grid_floats_are_correctly_rounded(n: int, z: int, k: int) -> None:
    kind = np.array([lk.DRAW, lk.SKIP], dtype=np.int8)
    out, exact = lk.grid_floats(
        kind,
        np.array([k, 0]),
        np.array([n, 0]),
        np.array([z, 0]),
        np.array([0.0, -0.0]),
    )
    assert math.copysign(1.0, out[1]) == -1.0 and not exact[1]  # SKIP: the value as is
    if not -TOP <= n + z < TOP:
        assert exact[0]
    if not exact[0]:
        assert out[0] == _grid_to_float(n + z, k)
        assert math.isfinite(out[0]) and (n + z == 0 or abs(out[0]) >= 2.0**-1022)


# -- draws -----------------------------------------------------------------------------------


def _mixed_plans(rng: np.random.Generator) -> tuple[np.ndarray, list[int], list[int]]:
    """Scales t/s in lowest terms from tiny to next to 2^63 (where int64 products overflow
    and the kernel hands the draw to Python), plus SKIP and EXACT entries."""
    pairs = [(1, 1), (3, 2), (2**42 + 2, 1), (6098624495401643, 2048), (1, TOP - 1)]
    pairs += [(TOP - 1, 1), (TOP - 25, 7), (2**62 + 3, 2**61 - 1), (2**60 + 1, 3)]
    for bits in (2, 10, 30, 50, 56, 60, 62, 63):
        for _ in range(10):
            t = int(rng.integers(1, 2**bits, dtype=np.uint64))
            s = int(rng.integers(1, 2**20))
            pairs.append(_lowest_terms(t, s))
    kind = [lk.DRAW] * len(pairs)
    pairs += [(0, 0), (0, 0)]
    kind += [lk.SKIP, lk.EXACT]
    order = rng.permutation(len(pairs))
    kinds = np.array([kind[j] for j in order], dtype=np.int8)
    return kinds, [pairs[j][0] for j in order], [pairs[j][1] for j in order]


def test_kernel_draws_are_the_python_draws_bit_for_bit() -> None:
    rng = np.random.default_rng(5)
    kinds, ts, ss = _mixed_plans(rng)
    wide = Fraction(2**70 + 1, 3)  # an EXACT entry: does not fit in int64
    exact_at = int(np.flatnonzero(kinds == lk.EXACT)[0])
    kinds, ts, ss = np.tile(kinds, 20), ts * 20, ss * 20
    exact_scales = {i: wide for i in np.flatnonzero(kinds == lk.EXACT).tolist()}
    assert exact_at in exact_scales
    batch = _source(11)
    z, in_python = batch.discrete_laplace_batch(
        kinds, np.array(ts, dtype=np.int64), np.array(ss, dtype=np.int64), exact_scales
    )
    drawn = [in_python[i] if i in in_python else int(z[i]) for i in range(len(kinds))]

    python = _source(11)
    expected = []
    for i, kind in enumerate(kinds.tolist()):
        if kind == lk.SKIP:
            expected.append(0)
        else:
            scale = exact_scales[i] if i in exact_scales else Fraction(ts[i], ss[i])
            expected.append(python.discrete_laplace(scale))
    assert drawn == expected
    # The same bits were consumed, no more, no fewer.
    assert batch.randbelow(2**64) == python.randbelow(2**64)
    # The near-2^63 scales made the kernel hand draws back to Python (int64 overflow).
    overflowed = set(in_python) - set(exact_scales)
    assert overflowed and all(ts[i] > 2**56 for i in overflowed)
    assert len(set(drawn)) > len(drawn) // 3


def test_a_word_at_a_time_gives_the_same_draws() -> None:
    """Refill and resume: with a one-word buffer the kernel runs out mid-draw again and
    again; every resumption must start that draw over on the same words."""
    rng = np.random.default_rng(6)
    t = np.array([2**42 + 2, 6098624495401643, 5, 2**61 + 1] * 100, dtype=np.int64)
    s = np.array([1, 2048, 3, 1] * 100, dtype=np.int64)
    kind = np.full(len(t), lk.DRAW, dtype=np.int8)
    kind[rng.integers(0, len(t), 20)] = lk.SKIP
    fetched = []

    def counting(seed: int):
        supply = _twister_words(seed)

        def words(n: int) -> np.ndarray:
            fetched.append(n)
            return supply(n)

        return words

    tiny = RandomSource._over(_WordBits(counting(3), 1, 1), seeded=True)
    small = _source(3, chunk_words=2, most_words=5)
    large = _source(3)
    results = [source.discrete_laplace_batch(kind, t, s, {}) for source in (tiny, small, large)]
    assert len(fetched) > len(t)  # the one-word pool was refilled many times
    first_z, first_python = results[0]
    for z, in_python in results[1:]:
        assert np.array_equal(z, first_z) and in_python == first_python
    follow = {source.randbelow(2**64) for source in (tiny, small, large)}
    assert len(follow) == 1


def test_release_many_is_release_in_turn() -> None:
    """Every kind of entry (compiled, Python plan, kernel overflow, subnormal or infinite
    output, sensitivity 0) in one batch: exactly ``release`` applied one after another."""
    rng = np.random.default_rng(7)
    values = np.concatenate(
        [rng.uniform(-100, 100, 300), [0.0, -0.0, 1.7976931348623157e308, 1e-310, 3.0, 7.5]]
    )
    sens = np.concatenate([rng.uniform(0, 10, 300), [5e-324, 0.0, 1e308, 5e-324, 0.0, 1.0]])
    sens[::9] = 0.0
    for epsilon in (0.5, 0.05, 3.0, 1e-9):
        kind, *_ = lk.grid_plans(values, sens, _each(values, epsilon), GRID_BITS)
        batch = LaplaceNoise(_source(8)).release_many(values, sens, epsilon)
        one_by_one = LaplaceNoise(_source(8))
        pairs = zip(values.tolist(), sens.tolist(), strict=True)
        expected = np.array([one_by_one.release(v, s, epsilon) for v, s in pairs])
        assert np.array_equal(batch, expected), epsilon
        assert np.array_equal(np.signbit(batch), np.signbit(expected))
        if epsilon == 0.5:  # only 1e-310 on the 2^-1114 grid has too wide an index
            assert np.flatnonzero(kind == lk.EXACT).tolist() == [len(values) - 3]
            assert set(kind.tolist()) == {lk.SKIP, lk.DRAW, lk.EXACT}
            assert np.isinf(batch).any() and ((batch != 0) & (np.abs(batch) < 2.0**-1022)).any()
        if epsilon == 0.05:
            assert set(kind.tolist()) == {lk.SKIP, lk.EXACT}


# The test forks on purpose (the child only draws and exits); Python 3.12+ warns on any fork of
# a process with threads, which is what the test must survive.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_does_not_reuse_the_batch_words() -> None:
    noise = LaplaceNoise()
    values, sens = np.zeros(200), np.ones(200)
    noise.release_many(values, sens, 0.5)  # leaves unread words in the pool
    assert len(noise.source._bits.words) > noise.source._bits.offset
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.write(write, noise.release_many(values, sens, 0.5).tobytes())
        os._exit(0)
    os.waitpid(pid, 0)
    child = np.frombuffer(os.read(read, 8 * len(values)), dtype=np.float64)
    parent = noise.release_many(values, sens, 0.5)
    assert np.all(child != parent)  # reused words would repeat the first draws exactly
