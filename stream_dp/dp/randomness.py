"""The single source of randomness for every mechanism, with exact integer-only samplers.

``RandomSource()`` draws from the operating system's CSPRNG (``os.urandom``), read as 64-bit
words. A reproducible source exists only through ``RandomSource.seeded_for_tests`` (words from
a Mersenne Twister) and reports ``is_seeded``, so the service can refuse it (docs/math.md §4.3).
Every bit of either stream is used at most once, by ``getrandbits`` or by the compiled batch
sampler (``discrete_laplace_batch``), which read the words through the same pool.

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
from collections.abc import Callable, Mapping
from fractions import Fraction
from numbers import Rational

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp import laplace_kernel

__all__ = ["RandomSource"]


def _as_fraction(x: Rational | int, name: str) -> Fraction:
    """``x`` as an exact Fraction; floats are refused so callers stay in exact arithmetic."""
    if isinstance(x, bool) or not isinstance(x, Rational):
        raise TypeError(f"{name} must be an int or fractions.Fraction, got {type(x).__name__}")
    return Fraction(x)


class RandomSource:
    """Uniform bits plus exact samplers built on them.

    Every sampler consumes only bits of one word pool (``_WordBits``): through its
    ``getrandbits``, or in the compiled ``discrete_laplace_batch`` through the same pool.
    """

    __slots__ = ("_bits", "_getrandbits", "_seeded")

    def __init__(self) -> None:
        """A cryptographically secure source (``os.urandom``)."""
        self._attach(_WordBits(_urandom_words), seeded=False)

    @classmethod
    def seeded_for_tests(cls, seed: int) -> RandomSource:
        """A reproducible, NOT cryptographically secure source (Mersenne Twister words).

        For tests and experiments only: never use it for a release. ``is_seeded`` is True so
        the service can refuse it.
        """
        return cls._over(_WordBits(_twister_words(seed)), seeded=True)

    @classmethod
    def _over(cls, bits: _WordBits, *, seeded: bool) -> RandomSource:
        """A source reading ``bits`` (tests use it for other word streams and chunk sizes)."""
        source = cls.__new__(cls)
        source._attach(bits, seeded=seeded)
        return source

    def _attach(self, bits: _WordBits, *, seeded: bool) -> None:
        self._bits = bits
        self._getrandbits = bits.getrandbits
        self._seeded = seeded

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

    def discrete_laplace_batch(
        self,
        kind: NDArray[np.int8],
        numerators: NDArray[np.int64],
        denominators: NDArray[np.int64],
        exact_scales: Mapping[int, Fraction],
    ) -> tuple[NDArray[np.int64], dict[int, int]]:
        """``discrete_laplace`` for many entries, in index order, on this source's bits.

        Entry ``i`` is skipped (``kind[i] == laplace_kernel.SKIP``), drawn by the compiled
        CKS20 Alg. 1/2 with scale ``numerators[i] / denominators[i]`` (lowest terms, int64;
        ``DRAW``), or drawn by ``discrete_laplace(exact_scales[i])`` (``EXACT``). The draws are
        the ones ``discrete_laplace`` would make one after another on the same bits (the kernel
        reads the words through this pool); an entry the kernel cannot finish in int64 is
        drawn again in Python from its first bit. Returns ``z`` (0 where not drawn by the
        kernel) and ``{i: draw}`` for the entries drawn in Python.
        """
        size = len(kind)
        z = np.zeros(size, dtype=np.int64)
        in_python: dict[int, int] = {}
        pool = self._bits
        state = np.empty(3, dtype=np.uint64)
        i = 0
        while i < size:
            state[0], state[1], state[2] = pool.offset, pool.pool, pool.bits
            i, status = laplace_kernel.discrete_laplace_run(
                kind, numerators, denominators, i, pool.words, state, z
            )
            pool.offset, pool.pool, pool.bits = int(state[0]), int(state[1]), int(state[2])
            if status == laplace_kernel.OUT_OF_WORDS:
                pool.extend(8 * (size - i))  # a draw of scale < 2^53 takes about 5 words
            elif status != laplace_kernel.DONE:
                scale = exact_scales.get(i)
                if scale is None:  # an int64 product would overflow: same draw, exactly
                    scale = Fraction(int(numerators[i]), int(denominators[i]))
                in_python[i] = self.discrete_laplace(scale)
                i += 1
        return z, in_python


def _as_words(data: bytes) -> NDArray[np.uint64]:
    """``data`` as little-endian 64-bit words (a writable array the kernel can take)."""
    return np.frombuffer(bytearray(data), dtype="<u8").astype(np.uint64, copy=False)


def _urandom_words(n: int) -> NDArray[np.uint64]:
    return _as_words(os.urandom(8 * n))


def _twister_words(seed: int) -> Callable[[int], NDArray[np.uint64]]:
    """Reproducible words: the same stream whatever the sizes asked for."""
    twister = random.Random(operator.index(seed))
    return lambda n: _as_words(twister.randbytes(8 * n))


_NO_WORDS = np.zeros(0, dtype=np.uint64)
_POOLS: weakref.WeakSet[_WordBits] = weakref.WeakSet()


def _forget_all_pools() -> None:
    for pool in list(_POOLS):
        pool._forget()


class _WordBits:
    """``getrandbits`` over a stream of 64-bit words fetched ``chunk_words`` at a time (4 KiB:
    one system call per 32,768 bits for ``os.urandom``), moved into a pool one word at a
    time, low bits first, so a draw never shifts a large integer. ``laplace_kernel`` reads
    ``words[offset:]`` through the same pool (``pool`` holds ``bits < 64`` bits between
    draws). Every bit is used once; a forked child discards what it inherited, so two
    processes never share bits."""

    __slots__ = ("__weakref__", "_chunk", "_most", "_supply", "bits", "offset", "pool", "words")

    def __init__(
        self,
        supply: Callable[[int], NDArray[np.uint64]],
        chunk_words: int = 512,
        most_words: int = 1 << 16,
    ) -> None:
        """``supply(n)``: ``n`` fresh words. ``getrandbits`` fetches ``chunk_words`` at a time,
        ``extend`` between ``chunk_words`` and ``most_words`` (tests make both tiny)."""
        if not 1 <= chunk_words <= most_words:
            raise ValueError(
                f"need 1 <= chunk_words <= most_words, got {chunk_words}, {most_words}"
            )
        self._supply = supply
        self._chunk = chunk_words
        self._most = most_words
        self._forget()
        _POOLS.add(self)

    def _forget(self) -> None:
        """Drop every unused bit (called in a forked child)."""
        self.words, self.offset, self.pool, self.bits = _NO_WORDS, 0, 0, 0

    def extend(self, wanted: int) -> None:
        """Keep the unread words and append ``wanted`` fresh ones, within ``[chunk_words,
        most_words]`` (for the kernel, which must see a whole draw's words in one array)."""
        fresh = self._supply(min(max(self._chunk, wanted), self._most))
        self.words, self.offset = np.concatenate((self.words[self.offset :], fresh)), 0

    def getrandbits(self, k: int) -> int:
        if k <= 0:
            if k < 0:
                raise ValueError("number of bits must be non-negative")
            return 0
        while self.bits < k:
            if self.offset >= len(self.words):
                self.words, self.offset = self._supply(self._chunk), 0
            self.pool |= int(self.words[self.offset]) << self.bits
            self.offset += 1
            self.bits += 64
        value = self.pool & ((1 << k) - 1)
        self.pool >>= k
        self.bits -= k
        return value


os.register_at_fork(after_in_child=_forget_all_pools)
