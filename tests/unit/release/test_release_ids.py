"""A release id names one release event: never shared by two releases of a window."""

from __future__ import annotations

import uuid

from stream_dp.config import load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.engine import OfflineEngine
from stream_dp.release.records import RELEASE_NAMESPACE, release_id, release_ids
from tests.support.readings import synthetic_readings
from tests.support.settings import FIXED_EPSILON_MODE


def ids(records):
    return [r["release_id"] for r in records]


def run_offline(settings, readings):
    engine = OfflineEngine(settings, LaplaceNoise())
    return [r for rel in (*engine.feed(readings), *engine.finish()) for r in rel.records]


def test_two_releases_of_the_same_windows_share_no_id():
    """The same readings released twice (a service and an offline run, two apps with one
    app_id): every record's id is new, and within one release every id is distinct."""
    settings = load_settings(resolution=7, **FIXED_EPSILON_MODE)  # cells on this small data
    readings = synthetic_readings(n_vehicles=20, hours=2, per_hour=200, seed=31)
    first, second = run_offline(settings, readings), run_offline(settings, readings)
    assert [(r["window_start"], r.get("cell")) for r in first] == [
        (r["window_start"], r.get("cell")) for r in second
    ]
    assert len(set(ids(first))) == len(first) > 2
    assert not set(ids(first)) & set(ids(second))
    for value in ids(first):
        assert uuid.UUID(value).version == 5


def test_a_release_id_is_the_name_based_uuid_of_its_nonce_and_cell():
    expected = uuid.uuid5(RELEASE_NAMESPACE, "ab12|app|3600|8|872a10701ffffff")
    assert release_id("app", 3600, 8, "872a10701ffffff", "ab12") == str(expected)
    assert release_ids("app", 3600, 8, ["c", "*"], "n1") != release_ids(
        "app", 3600, 8, ["c", "*"], "n2"
    )
