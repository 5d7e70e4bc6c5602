"""Each vehicle's privacy loss over a whole run (``stream-dp release``; docs/math.md §13.4):
basic (summed ε of the cells it was read in; under a vehicle budget its own share of each,
docs/math.md §13.1) and PLD (a Laplace release per read at that ε, composed,
at ``accounting_delta``). A failed window's per-vehicle charge (no cells read) is added to
both as is, so the figures agree with the ledger. An audit of the operator's promise; never
published."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from stream_dp.dp.epsilon_grid import EPSILON_STEP
from stream_dp.dp.pld_accounting import mixed_pld_loss
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import WindowRelease


@dataclass
class RunLosses:
    """Per vehicle, its released cells counted by ε over the run."""

    params: ReleaseParams
    cells: defaultdict[str, Counter[float]] = field(default_factory=lambda: defaultdict(Counter))
    #: Per vehicle, ε charged without cells to compose (a failed window's per-vehicle charge
    #: under a vehicle budget): added to both figures as is (basic composition).
    charged: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, release: WindowRelease) -> None:
        """Count a stored release's cells (its per-cell ε, or every cell at ``epsilon``); a
        failed window's per-vehicle ε charge (``WindowLoss.losses``), as the ledger has it."""
        if release.reads is not None:
            names, vehicle, eps = release.reads
            if not len(vehicle):
                return
            ticks = np.rint(eps / EPSILON_STEP).astype(np.int64)  # per-cell ε: on the grid
            width = int(ticks.max()) + 1
            key = vehicle.astype(np.int64) * width + ticks
            unique, counts = np.unique(key, return_counts=True)
            for k, n in zip(unique.tolist(), counts.tolist(), strict=True):
                self.cells[names[k // width]][(k % width) * EPSILON_STEP] += n
            return
        loss = release.loss
        if loss is None:
            return
        if loss.losses is not None:
            for name, x in zip(loss.vehicles, loss.losses.tolist(), strict=True):
                self.charged[name] += x
            return
        epsilon = self.params.epsilon
        for name, n in zip(loss.vehicles, loss.cells.tolist(), strict=True):
            self.cells[name][epsilon] += n

    def basic(self, name: str) -> float:
        cells = self.cells.get(name, Counter())
        return sum(eps * n for eps, n in cells.items()) + self.charged.get(name, 0.0)

    def pld(self, name: str) -> float | None:
        params = self.params
        if not params.mechanism.pld_composes:
            return None
        composed = mixed_pld_loss(
            dict(self.cells.get(name, Counter())), params.variance_share, params.accounting_delta
        )
        if composed is None:
            return None
        return composed + self.charged.get(name, 0.0)

    def _names(self) -> set[str]:
        return set(self.cells) | set(self.charged)

    def busiest(self) -> tuple[float, float | None]:
        """The largest basic loss of a vehicle over the run and that vehicle's PLD loss."""
        names = self._names()
        if not names:
            return 0.0, 0.0
        name = max(sorted(names), key=self.basic)
        return self.basic(name), self.pld(name)

    def rows(self) -> Iterator[dict[str, object]]:
        """``{"vehicle_id", "loss", "loss_pld"}`` per vehicle, in name order."""
        for name in sorted(self._names()):
            yield {"vehicle_id": name, "loss": self.basic(name), "loss_pld": self.pld(name)}
