"""When a cell is released: the price of a record of a short span (docs/math.md §13.3).

Pure and public: a function of each cell's span (the windows of its pairs: occupancy), the
configuration and its vehicles' rooms (the ledger). A cell whose ε meets T within its rooms
is released at this window's close when its ε is at most its *release price*:

- the *paced share* ``burst · (h/m)^p`` of a record of ``h`` of at most ``m`` windows: a
  record of a few hours may take only a small part of what a whole span may (a full span, the
  burst), so a vehicle's allowance pays for most of its hours instead of its first ones;
- or the *overflow* ``room + pace · (m − h) − burst``: what its vehicles (the
  reading-weighted median room of the cell) would lose to a full token bucket by the span's
  end if they spent nothing now. Budget that would overflow is free to spend now.

Above its price a cell pools with its next window (its span grows, its price with it); at
``h = m`` the price is the burst, so any cell its vehicles can afford is released then.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: The exponent ``p`` of the paced share ``(h/m)^p`` (measured: docs/math.md §13.3).
SHARE_EXPONENT = 3.0


def release_price(
    span_windows: IntArray,
    max_span: int,
    burst: float,
    pace: float,
    cell_room: FloatArray,
    exponent: float = SHARE_EXPONENT,
) -> FloatArray:
    """Per cell, the most ε it may take now (module docstring): ``span_windows`` its span so
    far in windows (``1``: this window only), ``pace`` the refill per window (B per ledger
    period), ``cell_room`` the reading-weighted median room of its vehicles."""
    share = np.clip(span_windows / max_span, 0.0, 1.0) ** exponent
    waiting = np.clip(max_span - span_windows, 0, None)
    overflow = np.clip(cell_room + pace * waiting - burst, 0.0, None)
    return np.minimum(np.maximum(burst * share, overflow), burst)
