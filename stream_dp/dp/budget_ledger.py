"""The per-vehicle privacy-loss ledger across windows, and the per-window cell allowance.

Within one window each released cell is ``eps``-DP, so by basic composition (composition paper,
Thm II.2, refined per user by Thm II.3) a vehicle whose readings are used in ``c`` cells loses
``c * eps``; CLIP-USER bounds ``c <= K`` for every vehicle (Prop. V.1: the window is
``K * eps``-DP). Across windows the losses add (Thm II.2 again). Which cells a vehicle is
counted in is a function of the public occupancy array, so the losses, the ledger and
everything derived from it (allowances, masks) are public and cost no privacy.

:class:`BudgetLedger` records one :class:`WindowLoss` per window and answers, for the window
about to be released, what each vehicle has already spent in the rolling period and how many
cells it may still be counted in under the cap. :func:`limit_to_budget` turns those allowances
into a mask over the occupancy entries (applied before CLIP-USER, which only suppresses
further); :func:`cells_used` gives the per-vehicle cell counts to record after the release.

Pure and synchronous: numpy (and orjson for the serialization header); no Kafka, no I/O.
"""

from __future__ import annotations

import bisect
import math
import numbers
import operator
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice, repeat
from typing import Any

import numpy as np
import orjson
from numpy.typing import ArrayLike, NDArray

from stream_dp.dp.occupancy import Occupancy

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: The allowance reported when there is no cap ("unlimited"); every allowance is clipped to it.
UNLIMITED_CELLS = int(np.iinfo(np.int32).max)
#: Relative slack on the cap in :meth:`BudgetLedger.allowed_cells`, so that float rounding in
#: ``cap - spent`` never costs a whole cell (e.g. ``0.3 / 0.1 == 2.9999999999999996``).
CAP_RTOL = 1e-9

_MAGIC = b"SDPL"
_FORMAT_VERSION = 2  # 2 adds per-vehicle ε losses (per-cell ε); 1 is still read
_PREFIX = 12  # magic (4) + crc32 (4) + header length (4)
_UINT_DTYPES = ("<u2", "<u4", "<u8")
_HEADER_KEYS = frozenset(
    {"version", "window_start", "epsilon", "n", "length_dtype", "count_dtype", "names_bytes"}
)
_HEADER_KEYS_V2 = _HEADER_KEYS | {"has_losses"}


def _as_int(value: object, name: str) -> int:
    """``value`` as a Python int (numpy integers accepted; bools and floats refused)."""
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _as_positive_float(value: object, name: str) -> float:
    """``value`` as a finite float ``> 0``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    number = float(value)
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def _as_int_array(values: ArrayLike, name: str, length: int | None = None) -> IntArray:
    """A 1-D int64 copy of ``values`` (integer dtype required; an empty list is fine)."""
    arr = np.asarray(values)
    if arr.size == 0 and arr.dtype.kind not in "iu":
        arr = arr.astype(np.int64)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise ValueError(
            f"{name} must be a 1-D integer array, got {arr.dtype} of shape {arr.shape}"
        )
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{name} has values beyond int64")
    if length is not None and arr.shape[0] != length:
        raise ValueError(f"{name} must have length {length}, got {arr.shape[0]}")
    return arr.astype(np.int64)  # always a copy


def _strictly_ascending(names: Sequence[str]) -> bool:
    return all(map(operator.lt, names, islice(names, 1, None)))


def take_names(names: Sequence[str], index: IntArray) -> tuple[str, ...]:
    """``tuple(names[i] for i in index)``, at C speed."""
    if len(index) == 0:
        return ()
    picked = operator.itemgetter(*index.tolist())(names)
    return picked if len(index) > 1 else (picked,)


def _smallest_uint(largest: int) -> str:
    for dtype in _UINT_DTYPES:
        if largest <= np.iinfo(np.dtype(dtype)).max:
            return dtype
    raise ValueError(f"value {largest} does not fit in uint64")


@dataclass(frozen=True, eq=False, repr=False)
class WindowLoss:
    """The privacy loss of one released window: vehicle ``vehicles[i]`` was counted in
    ``cells[i] > 0`` cells, each released at ``epsilon``, so it lost ``cells[i] * epsilon``
    (Thm II.3; at most ``K * epsilon`` after CLIP-USER, Prop. V.1).

    ``vehicles`` are strictly ascending (Python string order, as in :class:`Occupancy`); vehicles
    counted in no cell are omitted. ``cells`` is a read-only int64 copy. Equality is exact
    (window, epsilon, names and counts); that is what makes a replayed record a no-op.

    With per-cell ε (a vehicle budget, docs/math.md §13) the cells' ε differ: ``losses[i]``
    is then what vehicle ``i`` was charged: its own share of each of its cells' ε, summed
    (Thm II.3; docs/math.md §13.1, "The loss"), and ``epsilon`` the largest such charge.
    """

    window_start: int
    epsilon: float
    vehicles: tuple[str, ...]
    cells: IntArray
    losses: FloatArray | None = None

    def __post_init__(self) -> None:
        window_start = _as_int(self.window_start, "window_start")
        if not -(2**63) <= window_start < 2**63:
            raise ValueError(f"window_start must fit in int64, got {window_start}")
        epsilon = _as_positive_float(self.epsilon, "epsilon")
        vehicles = tuple(self.vehicles)
        if not set(map(type, vehicles)) <= {str}:
            if not all(isinstance(v, str) for v in vehicles):
                raise ValueError("vehicles must be strings")
            vehicles = tuple(map(str, vehicles))  # e.g. numpy str_ -> str
        cells = _as_int_array(self.cells, "cells", len(vehicles))
        if cells.size and int(cells.min()) <= 0:
            raise ValueError("cells must be > 0 (omit vehicles counted in no cell)")
        if not _strictly_ascending(vehicles):
            raise ValueError("vehicles must be sorted ascending and unique")
        if self.losses is not None:
            losses = np.array(self.losses, dtype=np.float64)
            if losses.shape != cells.shape or not np.all(np.isfinite(losses) & (losses > 0)):
                raise ValueError("losses must be finite, > 0, one per vehicle")
            losses.setflags(write=False)
            object.__setattr__(self, "losses", losses)
        cells.setflags(write=False)
        object.__setattr__(self, "window_start", window_start)
        object.__setattr__(self, "epsilon", epsilon)
        object.__setattr__(self, "vehicles", vehicles)
        object.__setattr__(self, "cells", cells)

    @classmethod
    def from_counts(
        cls,
        window_start: int,
        epsilon: float,
        vehicle_names: Sequence[str],
        cells_per_vehicle: ArrayLike,
    ) -> WindowLoss:
        """From per-vehicle cell counts (e.g. ``occupancy.vehicles`` and :func:`cells_used`):
        zeros are dropped, names sorted if they are not; negative counts or repeated names
        raise ValueError."""
        names = tuple(vehicle_names)
        cells = _as_int_array(cells_per_vehicle, "cells_per_vehicle", len(names))
        if cells.size and int(cells.min()) < 0:
            raise ValueError("cells_per_vehicle must be >= 0")
        if not _strictly_ascending(names):
            order = np.asarray(sorted(range(len(names)), key=names.__getitem__), dtype=np.int64)
            names = take_names(names, order)
            if not _strictly_ascending(names):
                raise ValueError("vehicle_names must be unique")
            cells = cells[order]
        used = np.flatnonzero(cells > 0)
        if len(used) < len(names):
            names = take_names(names, used)
            cells = cells[used]
        return cls(window_start, epsilon, names, cells)

    @classmethod
    def of_occupancy(
        cls,
        window_start: int,
        epsilon: float,
        occupancy: Occupancy,
        kept: ArrayLike | None,
        cells: IntArray | None = None,
    ) -> WindowLoss:
        """The loss of releasing ``occupancy`` with the ``kept`` entries (:func:`cells_used`
        per vehicle; or ``cells``, those counts if already known, e.g. CLIP-USER's ``G_l``).
        The names are an :class:`Occupancy`'s, strictly ascending strings by construction, so
        they are not checked again (a window has ~10^5 of them)."""
        if cells is None:
            cells = cells_used(occupancy, kept)
        elif cells.shape != (len(occupancy.vehicles),):
            raise ValueError(f"cells must have one count per vehicle, got {cells.shape}")
        else:
            cells = np.array(cells, dtype=np.int64)
        names = occupancy.vehicles
        used = np.flatnonzero(cells > 0)
        if len(used) < len(names):
            names, cells = take_names(names, used), cells[used]
        return cls._unchecked_names(window_start, epsilon, tuple(names), cells)

    @classmethod
    def of_occupancy_losses(
        cls,
        window_start: int,
        occupancy: Occupancy,
        cells_per_vehicle: IntArray,
        losses: FloatArray,
    ) -> WindowLoss:
        """:meth:`of_losses` of ``occupancy``'s vehicles, whose names are not checked again
        (as in :meth:`of_occupancy`); the counts and losses are."""
        names = occupancy.vehicles
        cells = _as_int_array(cells_per_vehicle, "cells_per_vehicle", len(names))
        loss = np.array(losses, dtype=np.float64)
        used = np.flatnonzero(cells > 0)
        if len(used) < len(names):
            names, cells, loss = take_names(names, used), cells[used], loss[used]
        if loss.shape != cells.shape or not np.all(np.isfinite(loss) & (loss > 0)):
            raise ValueError("losses must be finite, > 0, one per vehicle")
        top = float(loss.max()) if len(used) else 1.0
        loss.setflags(write=False)
        return cls._unchecked_names(window_start, top, tuple(names), cells, loss)

    @classmethod
    def _unchecked_names(
        cls,
        window_start: int,
        epsilon: float,
        vehicles: tuple[str, ...],
        cells: IntArray,
        losses: FloatArray | None = None,
    ) -> WindowLoss:
        """A loss of an occupancy's vehicle names, which :meth:`__post_init__` would check
        again (sorted unique strings by construction; a window has ~10^5 of them): ``cells``
        (> 0, int64, this loss's own copy) become read-only."""
        cells.setflags(write=False)
        loss = object.__new__(cls)
        object.__setattr__(loss, "window_start", _as_int(window_start, "window_start"))
        object.__setattr__(loss, "epsilon", _as_positive_float(epsilon, "epsilon"))
        object.__setattr__(loss, "vehicles", vehicles)
        object.__setattr__(loss, "cells", cells)
        object.__setattr__(loss, "losses", losses)
        return loss

    @classmethod
    def of_losses(
        cls,
        window_start: int,
        vehicle_names: Sequence[str],
        cells_per_vehicle: ArrayLike,
        losses: ArrayLike,
    ) -> WindowLoss:
        """From per-vehicle cell counts and summed ε (per-cell ε); vehicles of 0 cells are
        dropped. ``vehicle_names`` must be strictly ascending (an :class:`Occupancy`'s)."""
        cells = _as_int_array(cells_per_vehicle, "cells_per_vehicle", len(vehicle_names))
        loss = np.asarray(losses, dtype=np.float64)
        used = np.flatnonzero(cells > 0)
        names = take_names(tuple(vehicle_names), used)
        top = float(loss[used].max()) if len(used) else 1.0
        epsilon = top if top > 0 else 1.0
        return cls(window_start, epsilon, names, cells[used], loss[used])

    @property
    def loss(self) -> FloatArray:
        """Each vehicle's privacy loss in this window: ``losses``, else ``cells * epsilon``."""
        if self.losses is not None:
            return self.losses
        return self.cells * self.epsilon

    @property
    def max_loss(self) -> float:
        """The largest loss of a vehicle in this window (``K * epsilon``; 0 if none)."""
        if not self.cells.size:
            return 0.0
        return float(self.loss.max())

    def __len__(self) -> int:
        return len(self.vehicles)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WindowLoss):
            return NotImplemented
        return (
            self.window_start == other.window_start
            and self.epsilon == other.epsilon
            and self.vehicles == other.vehicles
            and np.array_equal(self.cells, other.cells)
            and (self.losses is None) == (other.losses is None)
            and (self.losses is None or np.array_equal(self.losses, other.losses))
        )

    def __hash__(self) -> int:
        return hash((self.window_start, self.epsilon, self.vehicles, self.cells.tobytes()))

    def __repr__(self) -> str:
        top = int(self.cells.max()) if self.cells.size else 0
        return (
            f"WindowLoss(window_start={self.window_start}, epsilon={self.epsilon!r}, "
            f"vehicles={len(self.vehicles)}, max_cells={top})"
        )

    # -- serialization -----------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Compact, exact encoding.

        Layout: ``b"SDPL"`` | crc32 of everything after it (uint32 LE) | header length (uint32
        LE) | orjson header | per-name lengths in code points | the names concatenated, UTF-8
        with ``surrogatepass`` | the cell counts. Lengths and counts use the smallest unsigned
        little-endian dtype that holds them (named in the header). Length-prefixed names keep
        every Python string representable (vehicle ids may contain newlines).
        """
        lengths = np.fromiter(map(len, self.vehicles), dtype=np.int64, count=len(self.vehicles))
        length_dtype = _smallest_uint(int(lengths.max()) if lengths.size else 0)
        count_dtype = _smallest_uint(int(self.cells.max()) if self.cells.size else 0)
        names = "".join(self.vehicles).encode("utf-8", "surrogatepass")
        header = orjson.dumps(
            {
                "version": _FORMAT_VERSION,
                "window_start": self.window_start,
                "epsilon": self.epsilon,
                "n": len(self.vehicles),
                "length_dtype": length_dtype,
                "count_dtype": count_dtype,
                "names_bytes": len(names),
                "has_losses": self.losses is not None,
            }
        )
        losses = b"" if self.losses is None else self.losses.astype("<f8").tobytes()
        body = b"".join(
            (
                len(header).to_bytes(4, "little"),
                header,
                lengths.astype(length_dtype).tobytes(),
                names,
                self.cells.astype(count_dtype).tobytes(),
                losses,
            )
        )
        return _MAGIC + zlib.crc32(body).to_bytes(4, "little") + body

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> WindowLoss:
        """Decode :meth:`to_bytes` output; anything else (truncated, altered, trailing bytes,
        or a well-formed encoding of an invalid entry) raises ValueError."""
        buf = bytes(data)
        if len(buf) < _PREFIX or buf[:4] != _MAGIC:
            raise ValueError("not a WindowLoss encoding (bad magic or too short)")
        if zlib.crc32(buf[8:]) != int.from_bytes(buf[4:8], "little"):
            raise ValueError("WindowLoss encoding is corrupt (checksum mismatch)")
        try:
            return cls._decode(buf)
        except ValueError:
            raise
        except Exception as exc:  # e.g. a KeyError/TypeError from a malformed header
            raise ValueError(f"malformed WindowLoss encoding: {exc!r}") from exc

    @classmethod
    def _decode(cls, buf: bytes) -> WindowLoss:
        header_len = int.from_bytes(buf[8:12], "little")
        pos = _PREFIX + header_len
        if pos > len(buf):
            raise ValueError("WindowLoss header runs past the end")
        header: Any = orjson.loads(buf[_PREFIX:pos])
        if not isinstance(header, dict) or header.get("version") not in (1, _FORMAT_VERSION):
            version = header.get("version") if isinstance(header, dict) else None
            raise ValueError(f"unsupported WindowLoss format version {version!r}")
        if set(header) != (_HEADER_KEYS if header["version"] == 1 else _HEADER_KEYS_V2):
            raise ValueError("malformed WindowLoss header")
        has_losses = header.get("has_losses", False)
        if not isinstance(has_losses, bool):
            raise ValueError("malformed WindowLoss header field 'has_losses'")
        n = header["n"]
        names_bytes = header["names_bytes"]
        length_dtype, count_dtype = header["length_dtype"], header["count_dtype"]
        for key, value in (("n", n), ("names_bytes", names_bytes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"malformed WindowLoss header field {key!r}")
        if length_dtype not in _UINT_DTYPES or count_dtype not in _UINT_DTYPES:
            raise ValueError("malformed WindowLoss header dtype")
        if not isinstance(header["epsilon"], float | int) or isinstance(header["epsilon"], bool):
            raise ValueError("malformed WindowLoss header field 'epsilon'")
        length_size = n * np.dtype(length_dtype).itemsize
        count_size = n * np.dtype(count_dtype).itemsize
        loss_size = 8 * n if has_losses else 0
        if len(buf) != pos + length_size + names_bytes + count_size + loss_size:
            raise ValueError("WindowLoss encoding has the wrong length")
        lengths = np.frombuffer(buf, dtype=length_dtype, count=n, offset=pos).astype(np.int64)
        pos += length_size
        text = buf[pos : pos + names_bytes].decode("utf-8", "surrogatepass")
        pos += names_bytes
        if int(lengths.sum()) != len(text):
            raise ValueError("WindowLoss name lengths do not match the names")
        ends = np.cumsum(lengths)
        starts = ends - lengths
        vehicles = tuple(map(text.__getitem__, map(slice, starts.tolist(), ends.tolist())))
        counts = np.frombuffer(buf, dtype=count_dtype, count=n, offset=pos)
        losses = None
        if has_losses:
            losses = np.frombuffer(buf, dtype="<f8", count=n, offset=pos + count_size)
        return cls(header["window_start"], header["epsilon"], vehicles, counts, losses)


@dataclass
class _Entry:
    """A recorded window with its vehicles' ledger-wide ids and losses."""

    window: WindowLoss
    ids: IntArray
    loss: FloatArray


class BudgetLedger:
    """Per-vehicle privacy loss over recorded windows, with an optional cap over a rolling
    period (basic composition across windows, composition paper Thm II.2).

    The window about to be released at ``t`` may use, per vehicle, what is left of ``cap``
    after the recorded windows ``w`` with ``|w - t| < period_seconds``. Every rolling interval
    of length ``period_seconds`` then holds at most ``cap`` (up to ``CAP_RTOL``) per vehicle:
    the window recorded last in it was checked against all the others (in any order).

    Vehicle names are mapped to ledger-wide integer ids once, at :meth:`record`, so a query is
    one dict lookup per name plus one numpy scatter-add per window.
    """

    def __init__(self, period_seconds: int, cap: float | None) -> None:
        period = _as_int(period_seconds, "period_seconds")
        if period <= 0:
            raise ValueError(f"period_seconds must be > 0, got {period_seconds!r}")
        self.period_seconds = period
        self.cap = None if cap is None else _as_positive_float(cap, "cap")
        self._entries: dict[int, _Entry] = {}
        self._starts: list[int] = []  # sorted window starts of _entries
        self._forgotten_through: int | None = None  # entries with w <= this were pruned
        self._ids: dict[str, int] = {}
        self._names: list[str] = []  # id -> name
        self._refs = np.zeros(0, dtype=np.int64)  # id -> number of entries holding it

    @classmethod
    def from_entries(
        cls, period_seconds: int, cap: float | None, entries: Iterable[WindowLoss]
    ) -> BudgetLedger:
        """A ledger holding ``entries`` (e.g. restored from :meth:`entries` after a restart)."""
        ledger = cls(period_seconds, cap)
        for entry in entries:
            ledger.record(entry)
        return ledger

    def __len__(self) -> int:
        return len(self._starts)

    def __repr__(self) -> str:
        return (
            f"BudgetLedger(period_seconds={self.period_seconds}, cap={self.cap!r}, "
            f"windows={len(self._starts)}, vehicles={int((self._refs > 0).sum())})"
        )

    def entries(self) -> tuple[WindowLoss, ...]:
        """The recorded windows in ascending ``window_start`` (for persistence)."""
        return tuple(self._entries[w].window for w in self._starts)

    def record(self, window_loss: WindowLoss) -> bool:
        """Add a released window's losses. Returns False (and changes nothing) if an identical
        entry is already recorded — an idempotent replay after a restart; a different entry for
        the same window raises ValueError (a window is released once)."""
        if not isinstance(window_loss, WindowLoss):
            raise ValueError(f"window_loss must be a WindowLoss, got {type(window_loss).__name__}")
        start = window_loss.window_start
        existing = self._entries.get(start)
        if existing is not None:
            if existing.window == window_loss:
                return False
            raise ValueError(
                f"window {start} is already recorded with a different loss "
                f"({existing.window!r} vs {window_loss!r})"
            )
        ids = self._intern(window_loss.vehicles)
        self._entries[start] = _Entry(window_loss, ids, window_loss.loss)
        bisect.insort(self._starts, start)
        return True

    def record_released(self, window_loss: WindowLoss) -> bool:
        """:meth:`record` a released window, then :meth:`prune` what is more than one period
        older than the period it checks: a window released up to one budget period out of
        order is still checked against everything around it (an older one gets no budget,
        see :meth:`spent`)."""
        added = self.record(window_loss)
        self.prune(window_loss.window_start - self.period_seconds)
        return added

    def spent(self, vehicle_names: Sequence[str], at_window_start: int) -> FloatArray:
        """Each vehicle's summed loss over the recorded windows ``w != at_window_start`` with
        ``|w - at_window_start| < period_seconds`` (0 for unknown vehicles).

        Looking both ways keeps the cap when windows are released out of order (an older
        window completing late): every rolling period holding the new window lies inside
        that span. Released in order, there is nothing after ``at_window_start``. If
        :meth:`prune` already dropped windows inside the span, every vehicle's spend is +inf
        (unknown, so no budget left)."""
        at = _as_int(at_window_start, "at_window_start")
        return self._spent_by_id(self._lookup(vehicle_names), at)

    def _spent_by_id(self, ids: IntArray, at: int) -> FloatArray:
        """:meth:`spent` of the vehicles of ledger ids ``ids`` (-1: unknown)."""
        period = self.period_seconds
        if self._forgotten_through is not None and at - period < self._forgotten_through:
            # Windows this one must be checked against were pruned: the spend is unknown, so
            # it counts as unlimited (a capped vehicle gets no cell; privacy never pays).
            return np.full(len(ids), np.inf)
        totals = self._totals(at - period, at + period, inclusive=False, skip=at)
        return totals[ids]

    def allowed_cells(
        self, vehicle_names: Sequence[str], at_window_start: int, epsilon: float
    ) -> IntArray:
        """How many cells each vehicle may be counted in at ``at_window_start`` when each cell
        costs ``epsilon``: ``floor((cap - spent + CAP_RTOL * cap) / epsilon)``, clipped to
        ``[0, UNLIMITED_CELLS]``; ``UNLIMITED_CELLS`` for everyone when there is no cap."""
        eps = _as_positive_float(epsilon, "epsilon")
        if self.cap is None:
            _as_int(at_window_start, "at_window_start")
            return np.full(len(vehicle_names), UNLIMITED_CELLS, dtype=np.int64)
        left = self.cap - self.spent(vehicle_names, at_window_start) + CAP_RTOL * self.cap
        cells = np.floor(np.clip(left / eps, 0.0, float(UNLIMITED_CELLS)))
        return cells.astype(np.int64)

    def budget_room(
        self, vehicle_names: Sequence[str], at_window_start: int, budget: float, burst: float
    ) -> FloatArray:
        """The ε each vehicle may still spend at ``at_window_start`` under a per-vehicle budget
        B over any rolling period (docs/math.md §13): ``B - spent`` (:meth:`spent`, both ways),
        and pacing, a token bucket of capacity ``burst`` refilled at ``B / period`` per
        second, full at first sight. The bucket is read off the ledger's own entries: a spend
        ``x`` at ``t`` conforms iff for every recorded window ``s <= t`` in the period, the
        spends in ``[s, t)`` plus ``x`` are at most ``burst + rate (t - s)`` (the bucket's
        interval form; the minimum over ``s`` sits at a spend), so no state is kept besides
        the losses. Slack ``CAP_RTOL * B`` absorbs float rounding of summed ε."""
        at = _as_int(at_window_start, "at_window_start")
        budget = _as_positive_float(budget, "budget")
        burst = _as_positive_float(burst, "burst")
        ids = self._lookup(vehicle_names)  # once: a window names ~10^5 vehicles
        room = budget - self._spent_by_id(ids, at) + CAP_RTOL * budget
        known = ids >= 0
        if not known.any() or not np.isfinite(room).any():
            return np.minimum(np.maximum(room, 0.0), burst + CAP_RTOL * budget)
        rate = budget / self.period_seconds
        bucket = np.full(len(vehicle_names), burst + CAP_RTOL * budget)
        cum = np.zeros(len(self._names) + 1, dtype=np.float64)
        lo = bisect.bisect_right(self._starts, at - self.period_seconds)
        hi = bisect.bisect_left(self._starts, at)
        for start in reversed(self._starts[lo:hi]):
            entry = self._entries[start]
            cum[entry.ids] += entry.loss
            bound = burst + rate * (at - start) - cum[ids] + CAP_RTOL * budget
            np.minimum(bucket, np.where(known, bound, bucket), out=bucket)
        return np.maximum(np.minimum(room, bucket), 0.0)

    def max_loss(self, at_window_start_inclusive: int) -> float:
        """The largest per-vehicle loss over the windows ``w`` with
        ``at - period_seconds < w <= at`` (0.0 if none), e.g. for a gauge."""
        at = _as_int(at_window_start_inclusive, "at_window_start_inclusive")
        totals = self._totals(at - self.period_seconds, at, inclusive=True)
        return float(totals.max()) if totals.size else 0.0

    def prune(self, before_window_start: int) -> int:
        """Forget what no query at a window ``>= before_window_start`` can see: the entries with
        ``w <= before_window_start - period_seconds``. Returns how many were dropped.

        (Passing the window about to be released is always safe; entries in its rolling period
        are kept.)
        """
        cutoff = _as_int(before_window_start, "before_window_start") - self.period_seconds
        if self._forgotten_through is None or cutoff > self._forgotten_through:
            self._forgotten_through = cutoff
        stop = bisect.bisect_right(self._starts, cutoff)
        if stop == 0:
            return 0
        for start in self._starts[:stop]:
            self._refs[self._entries.pop(start).ids] -= 1
        del self._starts[:stop]
        live = self._refs > 0
        n_live = int(live.sum())
        if 2 * n_live <= len(self._names):  # compact the name index (amortised O(1))
            new_id = np.cumsum(live) - 1
            for entry in self._entries.values():
                entry.ids = new_id[entry.ids]
            self._names = [self._names[i] for i in np.flatnonzero(live).tolist()]
            self._ids = dict(zip(self._names, range(n_live), strict=True))
            self._refs = self._refs[live]
        return stop

    # -- internals ---------------------------------------------------------------------------

    def _intern(self, names: tuple[str, ...]) -> IntArray:
        """Ledger-wide ids of ``names`` (unique), adding the new ones; counts the reference."""
        ids = self._lookup(names)
        missing = np.flatnonzero(ids < 0)
        if len(missing):
            first = len(self._names)
            new_names = take_names(names, missing)
            self._ids.update(zip(new_names, range(first, first + len(new_names)), strict=True))
            self._names.extend(new_names)
            ids[missing] = np.arange(first, first + len(new_names))
            self._refs = np.concatenate((self._refs, np.zeros(len(new_names), dtype=np.int64)))
        self._refs[ids] += 1
        return ids

    def _lookup(self, names: Sequence[str]) -> IntArray:
        """Ids of ``names``; -1 for names the ledger does not hold."""
        if not self._ids:  # nothing recorded yet (a fresh ledger): no name to look up
            return np.full(len(names), -1, dtype=np.int64)
        return np.fromiter(map(self._ids.get, names, repeat(-1)), dtype=np.int64, count=len(names))

    def _totals(
        self, after: int, until: int, *, inclusive: bool, skip: int | None = None
    ) -> FloatArray:
        """Summed loss per id over windows in ``(after, until)`` (``]`` if inclusive) other
        than ``skip``, in ascending window order; one extra trailing 0 so that id -1 reads 0."""
        lo = bisect.bisect_right(self._starts, after)
        hi = (bisect.bisect_right if inclusive else bisect.bisect_left)(self._starts, until)
        totals = np.zeros(len(self._names) + 1, dtype=np.float64)
        for start in self._starts[lo:hi]:
            if start == skip:
                continue
            entry = self._entries[start]
            totals[entry.ids] += entry.loss  # ids are unique within an entry
        return totals


def limit_to_budget(occupancy: Occupancy, allowed: ArrayLike) -> BoolArray:
    """Mask over ``occupancy`` entries: a vehicle ``l`` with more than ``allowed[l]`` cells
    keeps only its ``allowed[l]`` cells with the most readings (ties to the smaller cell
    index); vehicles within their allowance keep everything.

    ``allowed`` is indexed like ``occupancy.vehicles`` (e.g. :meth:`BudgetLedger.allowed_cells`
    of ``occupancy.vehicles``). The mask is a deterministic function of the public occupancy
    array and the public ledger, so applying it before CLIP-USER costs no privacy; CLIP-USER
    then only suppresses more, so each vehicle's loss in the window is ``<= allowed[l] * eps``.
    """
    n_vehicles = len(occupancy.vehicles)
    limit = _as_int_array(allowed, "allowed", n_vehicles)
    if limit.size and int(limit.min()) < 0:
        raise ValueError("allowed must be >= 0")
    vehicle = occupancy.vehicle_index
    keep = np.ones(occupancy.n_entries, dtype=bool)
    grids = np.bincount(vehicle, minlength=n_vehicles)
    over = grids > limit
    if not over.any():
        return keep
    sel = np.flatnonzero(over[vehicle])  # entries of the vehicles over their allowance
    v, count, cell = vehicle[sel], occupancy.count[sel], occupancy.cell_index[sel]
    n, hi = len(sel), int(count.max())
    span = hi - int(count.min()) + 1
    if n_vehicles * span * n < 2**63 and bool(np.all(cell[1:] >= cell[:-1])):
        # Entries come in cell order (Occupancy's invariant), so the position in ``sel`` breaks
        # ties by cell; sorting unique int64 keys that carry the position is much faster than
        # an argsort or a lexsort.
        order = np.sort((v * span + (hi - count)) * n + np.arange(n)) % n
    else:
        order = np.lexsort((cell, -count, v))
    v_sorted = v[order]
    size = np.where(over, grids, 0)
    rank = np.arange(n) - (np.cumsum(size) - size)[v_sorted]  # position within the vehicle
    keep[sel[order]] = rank < limit[v_sorted]
    return keep


def cells_used(occupancy: Occupancy, kept: ArrayLike) -> IntArray:
    """Per vehicle (indexed like ``occupancy.vehicles``) the number of kept entries, i.e. the
    cells its readings are used in — its loss in the window is this times ``eps`` (Thm II.3)."""
    mask = np.asarray(kept)
    if mask.dtype != np.bool_ or mask.shape != (occupancy.n_entries,):
        raise ValueError(
            f"kept must be a boolean array of shape ({occupancy.n_entries},), "
            f"got {mask.dtype} of shape {mask.shape}"
        )
    used = np.bincount(occupancy.vehicle_index[mask], minlength=len(occupancy.vehicles))
    return used.astype(np.int64)
