"""What one vehicle loses in one released cell: its own share of the cell's ε (docs/math.md
§13.1, "The loss").

Neighbours share the occupancy (§2.1): they differ only in the values of one vehicle ``l``.
In a CLIP cell with cap ``c`` and kept readings ``S`` the mean's noise is calibrated to the
sensitivity ``U c / S`` (eq. (9)), the change the *most* prolific kept vehicle can make, plus
the float rounding allowance ``R = U (c + 8) 2^-52`` (§4.2, "Float inputs"). A vehicle with
``k < c`` kept readings moves the float mean by at most ``U k / S`` (times ``(1 + 2^-53)^(k-1)``)
plus the rounding ``R`` covers. On the exact sampler's grid (§4.2: values rounded to
``2^k_g ≤ 2^-40 Δ``, scale ``(Δ + 2^k_g)/ε_μ``) the probability ratio over ``l``'s neighbours
is then at most ``exp(ε_μ (k / c + slack))`` with
``slack = 2^-40 + (c + 8) S / c · 2^-51`` (:func:`~stream_dp.dp.float_mean.share_slack`). The
variance's share ``ε s`` is charged whole (the release charges shares only with ``s = 0``:
``PrivacyAccountant.charge``).

So vehicle ``l`` loses ``ε_μ (k / c + slack) + ε s``, rounded *up* to the ε grid
(``EPSILON_STEP``: ledger sums stay exact) and at most the cell's ε; a vehicle at the cap
loses at most the cell's ε. Every quantity here (``k``, ``c``, ``S``, ε) is a function of the
occupancy and the configuration: public, so charging it reveals nothing. Per vehicle these
losses compose by basic composition as the cells' ε do (Thm II.3 with each vehicle's own
ε_g); the PLD accountant composes each as a Laplace mechanism of that ε.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.epsilon_grid import round_up
from stream_dp.dp.float_mean import share_slack


def entry_epsilons(
    cell_epsilon: NDArray[np.float64],
    kept_count: NDArray[np.int64],
    cap: NDArray[np.int64],
    cell_kept: NDArray[np.int64],
    mean_share: float,
) -> NDArray[np.float64]:
    """Per read entry, what its vehicle loses (module docstring): ``cell_epsilon``, the
    entry's ``kept_count``, and its cell's ``cap`` and kept readings ``cell_kept`` (S) given
    per entry; ``mean_share`` = 1 − s."""
    eps = np.asarray(cell_epsilon, dtype=np.float64)
    k = np.asarray(kept_count, dtype=np.int64)
    c = np.asarray(cap, dtype=np.int64)
    below = (k < c) & (c > 0)
    if not below.any():
        return eps.copy()
    ratio = k / np.where(c > 0, c, 1)
    slack = share_slack(c, cell_kept)
    own = round_up(eps * mean_share * (ratio + slack) + eps * (1.0 - mean_share))
    return np.where(below, np.minimum(eps, own), eps)
