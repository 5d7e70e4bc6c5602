"""The breakdown scripts (``benchmarks/coverage_breakdown.py``, ``withheld_breakdown.py``)
wrap the vehicle-budget stages' span helpers by name: the release must call their wrappers,
so a helper moved or renamed breaks these tests rather than the scripts."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

# The benchmarks are scripts importing their neighbours by name (``from usefulness import``).
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import coverage_breakdown  # noqa: E402
import usefulness  # noqa: E402
import withheld_breakdown  # noqa: E402
from expected_usefulness import B14  # noqa: E402

from stream_dp.release.vehicle_budget import stages as budget_stages  # noqa: E402
from stream_dp.sources.sample import load_sample  # noqa: E402
from tests.support.noise_free import NoNoise  # noqa: E402

#: The AIS week's first 60,000 readings: spans pool there and carried readings are withheld.
READINGS = 60_000


@pytest.fixture(scope="module")
def readings() -> list[dict[str, Any]]:
    return load_sample()[:READINGS]


def test_coverage_breakdown_counts_through_the_pooling_the_release_calls(
    readings: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: Counter[str] = Counter()
    counted = _counted(budget_stages.choose_pooling, "choose_pooling", calls)
    monkeypatch.setattr(budget_stages, "choose_pooling", counted)
    settings = usefulness.settings_of(usefulness.ROWS[B14])
    records, _, withheld = coverage_breakdown.noise_free_week(settings, readings)
    assert records and calls  # its wrapper delegated to the helper the release calls
    assert budget_stages.choose_pooling is counted  # and put it back
    assert withheld > 0


def test_withheld_breakdown_labels_readings_from_every_hook(
    readings: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: Counter[str] = Counter()
    for name in ("fresh_carry", "choose_pooling", "deferred_pairs"):
        helper = getattr(budget_stages, name)
        monkeypatch.setattr(budget_stages, name, _counted(helper, name, calls))  # restored after
    truth = usefulness.Truth(readings)
    settings = usefulness.settings_of(usefulness.ROWS[B14])
    tracker = withheld_breakdown.Tracker(truth, settings.resolution)
    withheld_breakdown.install(tracker)
    usefulness.release_week(settings, readings, noise=NoNoise())
    # every wrapper delegated to the helper the release calls, and labelled readings
    assert set(calls) == {"fresh_carry", "choose_pooling", "deferred_pairs"}
    assert tracker.events  # choose_pooling's: carried readings lost to the pool
    assert Counter(tracker.label)["end of input"] > 0  # carried on, or set aside


def _counted(helper: Any, name: str, calls: Counter[str]) -> Any:
    def counted(*args: Any) -> Any:
        calls[name] += 1
        return helper(*args)

    return counted
