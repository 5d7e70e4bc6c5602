"""Compiled (numba) fast path of the exact Laplace release of many values (``noise.py``).

Three steps of ``LaplaceNoise.release_many`` / ``release_each``, each exact or refusing an
entry to the Python path of ``noise.py`` / ``randomness.py``, never approximating:

- :func:`grid_plans`: per entry (each with its own ε) the grid exponent ``k``, the grid index
  ``n`` of the value (round half to even) and the discrete Laplace scale ``t / s`` in lowest
  terms, identical to ``noise._plan`` and ``noise._round_to_grid`` (construction: module
  docstring of ``noise.py``) whenever ``t``, ``s`` and ``|n| <= 2^62`` fit in int64;
  otherwise the entry is ``EXACT``;
- :func:`discrete_laplace_run`: CKS20 Alg. 1 and 2 exactly as ``RandomSource`` runs them, on
  the same bits: the caller's 64-bit words go through the same bit pool as
  ``randomness._WordBits.getrandbits`` (one word per refill, low bits first, each bit used
  once). It stops at an entry it cannot finish -- out of words, or a product that would
  overflow int64 -- and restores the pool to that entry's start, so the caller refills (or
  lets Python draw the entry from the same bits) and resumes;
- :func:`grid_floats`: the float of ``(n + z) 2^k``; ``float(int64)`` is correctly rounded and
  the scaling by ``2^k`` is exact while the result is a normal float; anything else (int64
  overflow, subnormal or infinite result) is left to ``noise._grid_to_float``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: Entry kinds: nothing to draw (sensitivity 0), drawn here, or drawn by the Python path.
SKIP, DRAW, EXACT = 0, 1, 2
#: Status of :func:`discrete_laplace_run`: finished, needs more words, entry needs Python.
DONE, OUT_OF_WORDS = 0, 1

_MAX = np.int64(2**63 - 1)
_MIN = np.int64(-(2**63))
_N_LIMIT = 2.0**62  # grid indices handled here: |n| <= 2^62
_SMALLEST_NORMAL = 2.0**-1022
# Internal sampler codes (valid results are >= 0).
_OUT = -1
_OVERFLOW = -2


@njit(cache=True)
def _bit_length(x: int) -> int:  # pragma: no cover - compiled
    """Bits of a non-negative int64."""
    n = 0
    while x >= 256:
        x >>= 8
        n += 8
    while x > 0:
        x >>= 1
        n += 1
    return n


@njit(cache=True)
def _gcd(a: int, b: int) -> int:  # pragma: no cover - compiled
    while b:
        a, b = b, a % b
    return a


@njit(cache=True)
def _odd_mantissa(x: float) -> tuple[int, int]:  # pragma: no cover - compiled
    """``(m, e)`` with ``x = m 2^e``, ``m`` odd, for a finite ``x > 0``."""
    f, e = math.frexp(x)
    m = np.int64(math.ldexp(f, 53))
    e -= 53
    while m & 1 == 0:
        m >>= 1
        e += 1
    return m, e


@njit(cache=True)
def _round_half_even(x: float) -> int:  # pragma: no cover - compiled
    """The integer nearest to ``x`` (ties to even), for ``|x| <= 2^62``; exact."""
    f = math.floor(x)
    r = x - f  # exact: f and x share their exponent range
    n = np.int64(f)
    if r > 0.5 or (r == 0.5 and n & 1 == 1):
        n += 1
    return n


@njit(cache=True)
def grid_plans(
    values: np.ndarray, sensitivities: np.ndarray, epsilons: np.ndarray, grid_bits: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """``(kind, k, n, t, s)`` per entry for validated finite values, sensitivities >= 0 and
    each entry's own ``epsilons[i] > 0``. For ``DRAW`` entries, ``2^k`` is the grid, ``n`` the
    value's grid index and ``t / s`` (lowest terms) the discrete Laplace scale
    ``(sensitivity 2^-k + 1) / epsilon``: each entry's plan is ``noise._plan`` of its own
    (sensitivity, epsilon), whatever the other entries hold."""
    size = len(values)
    kind = np.full(size, EXACT, dtype=np.int8)
    k_out = np.zeros(size, dtype=np.int64)
    n_out = np.zeros(size, dtype=np.int64)
    t_out = np.zeros(size, dtype=np.int64)
    s_out = np.zeros(size, dtype=np.int64)
    epsilon = math.nan  # the ε whose mantissas are held (recomputed when it changes)
    me, ee, fe, e_exp = np.int64(1), 0, 0.5, 0
    for i in range(size):
        sens = sensitivities[i]
        if sens == 0.0:
            kind[i] = SKIP
            continue
        if epsilons[i] != epsilon:
            epsilon = epsilons[i]
            me, ee = _odd_mantissa(epsilon)
            fe, e_exp = math.frexp(epsilon)
        fs, s_exp = math.frexp(sens)
        # k = floor(log2(sens / max(eps, 1))) - grid_bits, from the frexp mantissas.
        if epsilon <= 1.0:
            k = s_exp - 1 - grid_bits
        elif fs >= fe:
            k = s_exp - e_exp - grid_bits
        else:
            k = s_exp - e_exp - 1 - grid_bits
        ms, es = _odd_mantissa(sens)
        # sens 2^-k + 1 = p / 2^c, p an integer.
        a = es - k
        if a >= 0:
            if _bit_length(ms) + a > 62:
                continue
            p = (ms << a) + 1
            c = 0
        else:
            c = -a
            if c > 62:
                continue
            p = ms + (np.int64(1) << c)
        # scale = p / (2^c me 2^ee) = p 2^d / me, reduced.
        g = _gcd(p, me)
        p //= g
        q = me // g
        d = -c - ee
        if d >= 0:
            if _bit_length(p) + d > 63:
                continue
            t = p << d
            s = q
        else:
            shift = 0  # common factors of two of p and 2^-d
            while shift < -d and p & 1 == 0:
                p >>= 1
                shift += 1
            up = -d - shift
            if _bit_length(q) + up > 63:
                continue
            t = p
            s = q << up
        x = math.ldexp(values[i], -k)  # exact unless |x| < 2^-1022, where n = 0 anyway
        if not abs(x) <= _N_LIMIT:
            continue
        kind[i] = DRAW
        k_out[i] = k
        n_out[i] = _round_half_even(x)
        t_out[i] = t
        s_out[i] = s
    return kind, k_out, n_out, t_out, s_out


@njit(cache=True)
def _take_bits(words: np.ndarray, state: np.ndarray, k: int) -> int:  # pragma: no cover
    """``k`` (1..63) uniform bits as in ``_WordBits.getrandbits``, or ``_OUT``.

    ``state`` = (next word, pool, bits in the pool); the pool holds fewer than 64 bits."""
    width = np.uint64(k)
    held = state[2]
    pool = state[1]
    if held >= width:
        state[1] = pool >> width
        state[2] = held - width
        return np.int64(pool & ((np.uint64(1) << width) - np.uint64(1)))
    at = state[0]
    if at >= np.uint64(len(words)):
        return _OUT
    word = words[at]
    state[0] = at + np.uint64(1)
    need = width - held  # 1..63
    low = word & ((np.uint64(1) << need) - np.uint64(1))
    state[1] = word >> need
    state[2] = np.uint64(64) - need
    return np.int64(pool | (low << held))


@njit(cache=True)
def _below(n: int, words: np.ndarray, state: np.ndarray) -> int:  # pragma: no cover
    """``RandomSource._randbelow``: uniform on ``[0, n)``, ``1 <= n < 2^63``, or ``_OUT``."""
    if n == 1:
        return 0
    width = _bit_length(n - 1)
    while True:
        r = _take_bits(words, state, width)
        if r < n:  # also _OUT
            return r


@njit(cache=True)
def _bernoulli_exp_neg_unit(
    num: int, den: int, words: np.ndarray, state: np.ndarray
) -> int:  # pragma: no cover
    """CKS20 Alg. 1 for ``exp(-num/den)``, ``0 <= num <= den``: 1 or 0, or a code."""
    k = 1
    while True:
        if den > _MAX // k:
            return _OVERFLOW
        r = _below(den * k, words, state)
        if r < 0:
            return r
        if r >= num:
            return k & 1
        k += 1


@njit(cache=True)
def _geometric(s: int, t: int, words: np.ndarray, state: np.ndarray) -> int:  # pragma: no cover
    """CKS20 Alg. 2 (first part) for ``exp(-s/t)``, as ``RandomSource._geometric``."""
    while True:
        u = _below(t, words, state)
        if u < 0:
            return u
        accept = _bernoulli_exp_neg_unit(u, t, words, state)
        if accept < 0:
            return accept
        if accept == 1:
            break
    v = 0
    while True:
        more = _bernoulli_exp_neg_unit(1, 1, words, state)
        if more < 0:
            return more
        if more == 0:
            break
        v += 1
    if v > (_MAX - u) // t:
        return _OVERFLOW
    return (u + t * v) // s


@njit(cache=True)
def _discrete_laplace(
    t: int, s: int, words: np.ndarray, state: np.ndarray
) -> tuple[int, int]:  # pragma: no cover
    """CKS20 Alg. 2 for scale ``t / s``, as ``RandomSource.discrete_laplace``: (code, z)."""
    while True:
        y = _geometric(s, t, words, state)
        if y < 0:
            return y, 0
        negative = _take_bits(words, state, 1)
        if negative < 0:
            return negative, 0
        if negative == 0:
            return 0, y
        if y != 0:
            return 0, -y


@njit(cache=True)
def discrete_laplace_run(
    kind: np.ndarray,
    t: np.ndarray,
    s: np.ndarray,
    start: int,
    words: np.ndarray,
    state: np.ndarray,
    z: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Draw ``z[i]`` for the ``DRAW`` entries from ``start`` on, in order, from ``words``
    (uint64) and ``state`` (uint64: next word, pool, bits in the pool; updated).

    Returns ``(len, DONE)``, or ``(i, OUT_OF_WORDS)`` / ``(i, EXACT)`` with ``state`` as at
    the start of entry ``i``: refill and resume at ``i``, or draw ``i`` in Python."""
    saved = np.empty(3, dtype=np.uint64)
    for i in range(start, len(kind)):
        if kind[i] == SKIP:
            continue
        if kind[i] != DRAW:
            return i, EXACT
        saved[:] = state
        code, value = _discrete_laplace(t[i], s[i], words, state)
        if code != 0:
            state[:] = saved
            return i, OUT_OF_WORDS if code == _OUT else EXACT
        z[i] = value
    return len(kind), DONE


@njit(cache=True)
def grid_floats(
    kind: np.ndarray, k: np.ndarray, n: np.ndarray, z: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``(out, exact)``: ``values`` for ``SKIP`` entries, the correctly rounded float of
    ``(n + z) 2^k`` for ``DRAW`` entries; ``exact[i]`` marks what is left to Python."""
    size = len(kind)
    out = np.empty(size, dtype=np.float64)
    exact = np.zeros(size, dtype=np.bool_)
    for i in range(size):
        if kind[i] == SKIP:
            out[i] = values[i]
            continue
        if kind[i] != DRAW:
            exact[i] = True
            continue
        a = n[i]
        b = z[i]
        if (b > 0 and a > _MAX - b) or (b < 0 and a < _MIN - b):
            exact[i] = True
            continue
        m = a + b
        r = math.ldexp(float(m), k[i])
        if m != 0 and not (_SMALLEST_NORMAL <= abs(r) < math.inf):
            exact[i] = True
            continue
        out[i] = r
    return out, exact
