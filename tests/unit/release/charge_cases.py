"""Released, empty and failed windows in both modes, and a digest of what each charges
(loss and reads): the fixture of ``test_pipelines``' one-charge test. It uses only the
release's entry points (``release_window``, ``failed_release``), so the digests it gives on
this code can be compared with those it gave before the charge was made one method."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from stream_dp.dp.budget_ledger import WindowLoss
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams
from stream_dp.release.window import failed_release, release_window
from stream_dp.windows.columns import WindowColumns
from stream_dp.windows.state import PartialColumns
from tests.unit.release.test_vehicle_budget import _busy_windows, _params, _window

HOUR = 3600


def _partial(columns: WindowColumns) -> PartialColumns:
    """The window's pairs as one partition's partial."""
    return PartialColumns(
        list(columns.cell_names), np.asarray(columns.vehicle_names), columns.cell_code,
        columns.vehicle_code, columns.count, columns.total, columns.total_sq,
        columns.reading_pair, columns.reading_ts, columns.reading_value,
    )  # fmt: skip


def digest(loss: WindowLoss | None, reads: Any = None) -> str:
    """SHA-256 of the charge's bytes and, with per-cell ε, of its reads."""
    h = hashlib.sha256(b"none" if loss is None else loss.to_bytes())
    if reads is not None:
        names, vehicle, eps = reads
        h.update("\n".join(names).encode())
        h.update(np.asarray(vehicle, dtype=np.int64).tobytes())
        h.update(np.asarray(eps, dtype=np.float64).tobytes())
    return h.hexdigest()


def _modes() -> Iterator[tuple[str, ReleaseParams]]:
    fixed = _params(vehicle_budget=None, vehicle_budget_burst=None, budget_cap=4.0)
    yield "fixed", fixed
    yield "budget", _params(vehicle_budget=6.0, max_span_hours=3)


def charge_digests() -> dict[str, str]:
    """Per case (mode and outcome), the digest of what the window charges."""
    out: dict[str, str] = {}
    for mode, params in _modes():
        windows = _busy_windows(3, 7)
        ledger, carry = PrivacyAccountant(params).new_ledger(), None
        for hour, readings in enumerate(windows[:2]):
            noise = LaplaceNoise(RandomSource.seeded_for_tests(hour))
            release = release_window(
                hour * HOUR, _window(hour * HOUR, readings), params, noise, 0, ledger, carry
            )
            assert release.loss is not None
            ledger.record_released(release.loss)
            carry = release.carry
        start, columns = 2 * HOUR, _window(2 * HOUR, windows[2])
        noise = LaplaceNoise(RandomSource.seeded_for_tests(9))
        released = release_window(start, columns, params, noise, 0, ledger, carry)
        out[f"{mode} released"] = digest(released.loss, released.reads)
        failed = failed_release(start, RuntimeError(), params, 0, ledger, columns, [], carry)
        out[f"{mode} failed"] = digest(failed.loss)
        partials = [_partial(columns)]
        unmerged = failed_release(start, RuntimeError(), params, 0, ledger, None, partials, carry)
        out[f"{mode} failed unmerged"] = digest(unmerged.loss)
        none_chosen = ReleaseParams(**{**_fields(params), "min_vehicles": 10_000})
        empty = release_window(start, columns, none_chosen, noise, 0, ledger, carry)
        out[f"{mode} empty"] = digest(empty.loss, empty.reads)
        failed_empty = failed_release(start, RuntimeError(), none_chosen, 0, ledger, columns, [])
        out[f"{mode} failed empty"] = digest(failed_empty.loss)
    return out


def _fields(params: ReleaseParams) -> dict[str, Any]:
    """The parameters' settings by name (what ``ReleaseParams`` is built from)."""
    names = ReleaseParams.__dataclass_fields__
    return {name: getattr(params, name) for name, f in names.items() if f.init}


if __name__ == "__main__":
    for case, value in charge_digests().items():
        print(f"{case!r}: {value!r},")
