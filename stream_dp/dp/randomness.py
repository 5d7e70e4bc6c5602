"""The single source of randomness for every mechanism, with exact integer-only samplers.

``RandomSource()`` draws from the operating system's CSPRNG (``secrets.SystemRandom``).
A reproducible source exists only through ``RandomSource.seeded_for_tests`` and reports
``is_seeded``, so the service can refuse it (MATH.md, "Noise").

The Bernoulli(exp(-x)), geometric and discrete Laplace samplers follow Canonne, Kamath and
Steinke (2020), "The Discrete Gaussian for Differential Privacy" (CKS20), Sec. 5, Alg. 1 and
Alg. 2. They use integers and uniform integer draws only, never floating point, so every
output probability is exactly the stated one.
"""

from __future__ import annotations

import operator
import os
import random
import weakref
from fractions import Fraction
from numbers import Rational

__all__ = ["RandomSource"]


def _as_fraction(x: Rational | int, name: str) -> Fraction:
    """``x`` as an exact Fraction; floats are refused so callers stay in exact arithmetic."""
    if isinstance(x, bool) or not isinstance(x, Rational):
        raise TypeError(f"{name} must be an int or fractions.Fraction, got {type(x).__name__}")
    return Fraction(x)


class RandomSource:
    """Uniform bits plus exact samplers built on them.

    Every sampler consumes only ``getrandbits`` of the underlying generator.
    """

    __slots__ = ("_getrandbits", "_seeded")

    def __init__(self) -> None:
        """A cryptographically secure source (``secrets.SystemRandom``, i.e. ``os.urandom``)."""
        self._getrandbits = _UrandomBits().getrandbits
        self._seeded = False

    @classmethod
    def seeded_for_tests(cls, seed: int) -> RandomSource:
        """A reproducible, NOT cryptographically secure source (Mersenne Twister).

        For tests and experiments only: never use it for a release. ``is_seeded`` is True so
        the service can refuse it.
        """
        source = cls.__new__(cls)
        source._getrandbits = random.Random(operator.index(seed)).getrandbits
        source._seeded = True
        return source

    @property
    def is_seeded(self) -> bool:
        """True for a reproducible test source, which a release must refuse."""
        return self._seeded

    def __repr__(self) -> str:
        kind = "seeded_for_tests" if self._seeded else "secure"
        return f"RandomSource({kind})"

    # -- uniform primitives --------------------------------------------------------------

    def randbelow(self, n: int) -> int:
        """Uniform integer on ``[0, n)`` for any ``n >= 1`` (rejection sampling on bits)."""
        n = operator.index(n)
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        return self._randbelow(n)

    def _randbelow(self, n: int) -> int:
        if n == 1:
            return 0
        bits = (n - 1).bit_length()
        r = self._getrandbits(bits)
        while r >= n:  # accepted with probability > 1/2
            r = self._getrandbits(bits)
        return r

    def fair_coin(self) -> bool:
        """Bernoulli(1/2)."""
        return self._getrandbits(1) == 1

    def bernoulli(self, p: Fraction | int) -> bool:
        """Exact Bernoulli(p) for rational ``0 <= p <= 1``."""
        p = _as_fraction(p, "p")
        if not 0 <= p <= 1:
            raise ValueError(f"p must be in [0, 1], got {p}")
        return self._randbelow(p.denominator) < p.numerator

    # -- CKS20 exact samplers ------------------------------------------------------------

    def bernoulli_exp_neg(self, x: Fraction | int) -> bool:
        """Exact Bernoulli(exp(-x)) for rational ``x >= 0`` (CKS20, Alg. 1)."""
        x = _as_fraction(x, "x")
        if x < 0:
            raise ValueError(f"x must be >= 0, got {x}")
        return self._bernoulli_exp_neg(x.numerator, x.denominator)

    def _bernoulli_exp_neg(self, num: int, den: int) -> bool:
        """Bernoulli(exp(-num/den)): floor(x) coins of exp(-1), then one of exp(-frac(x))."""
        whole, rem = divmod(num, den)
        for _ in range(whole):
            if not self._bernoulli_exp_neg_unit(1, 1):
                return False
        return self._bernoulli_exp_neg_unit(rem, den)

    def _bernoulli_exp_neg_unit(self, num: int, den: int) -> bool:
        """Bernoulli(exp(-g)), g = num/den in [0, 1]: the first K with A_K = 0, A_k ~ B(g/k).

        P(K > k) = g^k / k!, so P(K odd) = sum_k (-g)^k / k! = exp(-g) (CKS20, Alg. 1).
        """
        k = 1
        while self._randbelow(den * k) < num:
            k += 1
        return k % 2 == 1

    def geometric_exp_neg(self, x: Fraction | int) -> int:
        """Exact geometric on {0, 1, ...} with P(Y = y) = (1 - exp(-x)) exp(-x y), rational x > 0.

        CKS20 Alg. 2 (first part): with x = s/t, draw X ~ Geometric(exp(-1/t)) as
        U + t V (U uniform on [0, t) kept w.p. exp(-U/t), V ~ Geometric(exp(-1))), then
        Y = floor(X / s).
        """
        x = _as_fraction(x, "x")
        if x <= 0:
            raise ValueError(f"x must be > 0, got {x}")
        return self._geometric(x.numerator, x.denominator)

    def _geometric(self, s: int, t: int) -> int:
        while True:
            u = self._randbelow(t)
            if self._bernoulli_exp_neg_unit(u, t):
                break
        v = 0
        while self._bernoulli_exp_neg_unit(1, 1):
            v += 1
        return (u + t * v) // s

    def discrete_laplace(self, scale: Fraction | int) -> int:
        """Exact discrete Laplace: P(Z = z) proportional to exp(-|z| / scale), rational scale > 0.

        CKS20 Alg. 2: a geometric magnitude with parameter exp(-1/scale) and a fair sign,
        rejecting "negative zero" so that zero is not counted twice.
        """
        scale = _as_fraction(scale, "scale")
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        # 1/scale = s/t with s = denominator, t = numerator of scale.
        s, t = scale.denominator, scale.numerator
        while True:
            y = self._geometric(s, t)
            negative = self._getrandbits(1) == 1
            if negative:
                if y != 0:
                    return -y
            else:
                return y


_POOLS: weakref.WeakSet[_UrandomBits] = weakref.WeakSet()


def _forget_all_pools() -> None:
    for pool in list(_POOLS):
        pool._forget()


class _UrandomBits:
    """``getrandbits`` over ``os.urandom`` read 4 KiB at a time (one system call per 32,768
    bits instead of one per draw), moved into a small pool 64 bits at a time so a draw never
    shifts a large integer. Every bit is used once; a forked child discards what it
    inherited, so two processes never share bits."""

    _CHUNK_BYTES = 4096

    def __init__(self) -> None:
        self._pool = 0
        self._bits = 0
        self._buffer = b""
        self._offset = 0
        _POOLS.add(self)

    def _forget(self) -> None:
        """Drop every unused bit (called in a forked child)."""
        self._pool, self._bits, self._buffer, self._offset = 0, 0, b"", 0

    def getrandbits(self, k: int) -> int:
        if k <= 0:
            if k < 0:
                raise ValueError("number of bits must be non-negative")
            return 0
        while self._bits < k:
            if self._offset >= len(self._buffer):
                self._buffer, self._offset = os.urandom(self._CHUNK_BYTES), 0
            word = int.from_bytes(self._buffer[self._offset : self._offset + 8], "little")
            self._offset += 8
            self._pool |= word << self._bits
            self._bits += 64
        value = self._pool & ((1 << k) - 1)
        self._pool >>= k
        self._bits -= k
        return value


os.register_at_fork(after_in_child=_forget_all_pools)
