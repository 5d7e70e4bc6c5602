"""Every record names the privacy model that protected it (issue 36): the public-occupancy
release's cells, summaries and failed summaries in each of its modes, beside the secret-routes
records (which carry their own name, tests/unit/secret_routes/)."""

from __future__ import annotations

import pytest

from stream_dp.config import PUBLIC_OCCUPANCY, load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine
from stream_dp.release.params import ReleaseParams
from stream_dp.release.window import failed_release
from stream_dp.sources.sample import load_sample
from tests.support.settings import FIXED_EPSILON_MODE, FIXED_MODE

MODES = {"budget profile": {}, "fixed": FIXED_MODE, "fixed-epsilon targeted": FIXED_EPSILON_MODE}


@pytest.mark.parametrize("mode", list(MODES))
def test_every_public_record_names_its_model(mode: str) -> None:
    settings = load_settings(**MODES[mode])
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(3)))
    releases = [*engine.feed(load_sample()[:30_000]), *engine.finish()]
    records = [record for release in releases for record in release.records]
    assert sum(record["type"] == "cell" for record in records) >= 3  # cells, not only summaries
    assert {record.get("privacy_model") for record in records} == {PUBLIC_OCCUPANCY}


def test_a_failed_window_names_its_model() -> None:
    params = ReleaseParams.from_settings(load_settings(**FIXED_MODE))
    release = failed_release(3600, RuntimeError("boom"), params, 0, None, None, [])
    assert release.summary["status"] == "failed"
    assert release.summary["privacy_model"] == PUBLIC_OCCUPANCY
