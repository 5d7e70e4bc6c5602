"""A noise that adds nothing: the release's noise-free values (benchmarks and tests only)."""

from __future__ import annotations

from typing import Any

import numpy as np

from stream_dp.dp.noise import LaplaceNoise


class NoNoise(LaplaceNoise):
    """The release's values as they are (an experiment's tool: never for a release). The
    cells, their ε, caps and spans do not read the noise, so a release with it has the same
    records as a noisy one, each with its noise-free mean."""

    def release_each(self, values: Any, sensitivities: Any, epsilons: Any) -> np.ndarray:
        vals = np.array(values, dtype=np.float64)
        ok = np.isfinite(vals) & np.isfinite(np.broadcast_to(sensitivities, vals.shape))
        ok &= np.isfinite(np.broadcast_to(epsilons, vals.shape))
        vals[~ok] = np.nan
        return vals
