"""Seeded digests of the release in every mode, to check that a speed change or a
restructuring releases the same bytes (issues 25 and 35): the 1M-reading window
(benchmarks/release.py) with the vehicle budget (``last`` False and True), fixed ε and fixed-ε
targeted, and the bundled AIS week replayed offline in the fixed, targeted, masking-cap and
vehicle-budget modes. Run it on two checkouts
(``PYTHONPATH=<checkout> python benchmarks/budget_digest.py``) and compare; ``records``
lines are what is published, the others the ledger's inputs (never published).

Noise comes from ``RandomSource.seeded_for_tests``; the release nonce is fixed so that the
record ids compare too. Prints one line per part: its name and a SHA-256 of its content.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _plain(value: Any) -> Any:
    """A JSON-able, exact form of ``value`` (arrays as dtype and hex bytes)."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [str(v) for v in value.tolist()]
        return [str(value.dtype), list(value.shape), np.ascontiguousarray(value).tobytes().hex()]
    if is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return value.hex()
    return value if value is None or isinstance(value, int | str | bool) else repr(value)


def _release_parts(release: Any) -> dict[str, Any]:
    return {
        "records": _plain(release.records), "loss": _plain(release.loss),
        "carry": _plain(release.carry), "reads": _plain(release.reads),
    }  # fmt: skip


def _digest(part: Any) -> str:
    return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()


def main() -> int:
    import usefulness as u
    from release import WINDOW_START

    import stream_dp.release.window as window
    from stream_dp.commands.profile import BUDGET_PROFILE
    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.dp.randomness import RandomSource
    from stream_dp.engine import OfflineEngine
    from stream_dp.release.accounting import PrivacyAccountant
    from stream_dp.sources.sample import load_sample

    window.new_release_nonce = lambda: "fixed-nonce"  # type: ignore[assignment]
    print("stream_dp from", Path(window.__file__).parents[2], file=sys.stderr)
    columns = u.million_window()
    fixed = u.ROWS["fixed res 8, eps 1 (the defaults before issue 26)"]
    targeted = u.ROWS[u.TARGETED]
    million = [("budget", u.ROWS[u._budget_row(14.0)], last) for last in (False, True)]
    million += [("fixed", fixed, False), ("targeted", targeted, False)]
    for mode, settings_row, last in million:
        row = u.release_params(settings_row)
        ledger = PrivacyAccountant(row).new_ledger()
        noise = LaplaceNoise(RandomSource.seeded_for_tests(7))
        release = window.release_window(WINDOW_START, columns, row, noise, ledger=ledger, last=last)
        parts = _release_parts(release)
        for key, part in parts.items():
            print(f"1M {mode} last={last} {key} cells={len(release.cells)}", _digest(part))
    weeks = {
        "budget profile": BUDGET_PROFILE, "fixed": fixed, "targeted": targeted,
        "targeted cap": u.ROWS["targeted, cap 14 per 7 days (masking)"],
    }  # fmt: skip
    for mode, settings_row in weeks.items():
        engine = OfflineEngine(
            u.settings_of(settings_row), LaplaceNoise(RandomSource.seeded_for_tests(11))
        )
        week: list[Any] = []
        for batch in (engine.feed(load_sample()), engine.finish()):
            week.extend(_release_parts(release) for release in batch)
        records = [part["records"] for part in week]
        print(f"AIS week {mode} records windows={len(week)}", _digest(records))
        print(f"AIS week {mode} all windows={len(week)}", _digest(week))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
