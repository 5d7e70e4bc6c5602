"""The per-window release step and the offline engine (pure, no Kafka)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from stream_dp.config import load_settings
from stream_dp.dp.clip_user import clip_user
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.pseudo_user import pseudo_user_step
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine
from stream_dp.kafka.partitioner import partition_for
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import SCHEMA_VERSION
from stream_dp.release.statistics import kept_sums
from stream_dp.release.window import release_window
from stream_dp.windows.columns import WindowColumns
from tests.support.readings import unclamped_readings
from tests.support.settings import fixed_mode_settings

SCHEMA = json.loads(
    (Path(__file__).parents[3] / "stream_dp/schemas/release-record.schema.json").read_text()
)
CELLS = ["872a10701ffffff", "872a10703ffffff", "872a10705ffffff", "872a10707ffffff"]


def window_of(readings: list[tuple[str, str, float, float]], limit: int = 64) -> WindowColumns:
    """A window holding ``(cell, vehicle, ts, value)`` readings, in this arrival order."""
    cells, vehicles, ts, values = (list(col) for col in zip(*readings, strict=True))
    return WindowColumns.from_readings(cells, vehicles, ts, values, limit)


def random_pairs(seed: int, n_vehicles: int = 12, limit: int = 4):
    """A random window (readings in random arrival order) and each pair's sorted readings."""
    rng = random.Random(seed)
    readings = []
    raw = {}
    for v in range(n_vehicles):
        for cell in rng.sample(CELLS, rng.randint(1, len(CELLS))):
            values = []
            for _ in range(rng.choice([1, 2, 3, 8, 30])):
                ts, speed = rng.uniform(0, 3600), rng.uniform(0, 65)
                readings.append((cell, f"v{v}", ts, speed))
                values.append((ts, speed))
            raw[(cell, f"v{v}")] = sorted(values)
    rng.shuffle(readings)
    return window_of(readings, limit), raw


def seeded_noise(seed: int = 0) -> LaplaceNoise:
    return LaplaceNoise(RandomSource.seeded_for_tests(seed))


@pytest.mark.parametrize("seed", range(5))
def test_release_uses_clip_user_and_the_cap_exactly(seed):
    settings = fixed_mode_settings(prefix_limit=4, epsilon=0.7)
    pairs, raw = random_pairs(seed)
    release = release_window(0, pairs, ReleaseParams.from_settings(settings), seeded_noise(seed))
    keys = sorted(raw)
    occupancy = Occupancy.from_arrays(
        [c for c, _ in keys], [v for _, v in keys], [len(raw[k]) for k in keys]
    )
    clip = clip_user(occupancy, settings.upper, settings.epsilon)
    capped = pseudo_user_step(clip, settings.upper, settings.epsilon, prefix_limit=4)
    assert release.summary["K"] == clip.k and release.summary["G1"] == clip.g1
    assert release.summary["privacy_loss"] == pytest.approx(clip.k * settings.epsilon)
    by_cell = {r["cell"]: r for r in release.cells}
    for g, cell in enumerate(occupancy.cells):
        assert by_cell[cell]["error_bound"] == pytest.approx(capped.error[g])
        assert by_cell[cell]["error_bound"] <= clip.error_bound * (1 + 1e-9)
        assert by_cell[cell]["cap"] == capped.cap[g]
    # the kept readings are the first Gamma' of each vehicle, in event-time order
    index = pairs.pair_index()
    entries = np.array([index[k] for k in keys])
    total, total_sq = kept_sums(pairs, entries, capped.kept_count)
    for i, key in enumerate(keys):
        first = [v for _, v in raw[key][: capped.kept_count[i]]]
        assert total[i] == pytest.approx(sum(first))
        assert total_sq[i] == pytest.approx(sum(v * v for v in first))
    for record in release.records:
        jsonschema.validate(record, SCHEMA)


def test_noise_scale_follows_the_sensitivity():
    """Mean noise has E|noise| = 2 D_mu / eps with D_mu = U top / S (eq. 9)."""
    settings = fixed_mode_settings(epsilon=1.0, pseudo_user=False)
    rng = random.Random(8)
    stats = window_of(
        [(CELLS[0], f"v{v}", rng.uniform(0, 3600), rng.uniform(25, 40)) for v in range(40)] * 10
    )
    true_mean = stats.total.sum() / 400
    scale = 2 * settings.upper * 10 / 400 / settings.epsilon  # 3.25: far from the clamps
    noise = seeded_noise(11)
    n = 2000
    deviations = [
        abs(
            release_window(0, stats, ReleaseParams.from_settings(settings), noise).cells[0]["mean"]
            - true_mean
        )
        for _ in range(n)
    ]
    assert np.mean(deviations) == pytest.approx(scale, abs=5 * scale / np.sqrt(n))


def test_selection_uses_public_counts_only():
    settings = fixed_mode_settings(min_vehicles=3)
    pairs, _ = random_pairs(4, n_vehicles=10)
    release = release_window(0, pairs, ReleaseParams.from_settings(settings), seeded_noise())
    for record in release.cells:
        assert record["n_vehicles"] >= 3
    top = fixed_mode_settings(top_cells=1)
    assert (
        len(release_window(0, pairs, ReleaseParams.from_settings(top), seeded_noise()).cells) == 1
    )


def test_outputs_are_clamped():
    settings = fixed_mode_settings(epsilon=0.01)  # huge noise
    pairs, _ = random_pairs(5)
    records = release_window(0, pairs, ReleaseParams.from_settings(settings), seeded_noise(5)).cells
    assert all(0 <= r["mean"] <= 65 and 0 <= r["variance"] <= 65**2 / 4 for r in records)
    assert any(r["mean"] in (0.0, 65.0) for r in records)


def test_a_non_default_mean_mechanism_is_named_and_bounded():
    settings = fixed_mode_settings(mean_mechanism="array-averaging-bestfit")
    pairs, _ = random_pairs(6)
    release = release_window(0, pairs, ReleaseParams.from_settings(settings), seeded_noise(6))
    assert {r["mechanism"] for r in release.records} == {"array-averaging-bestfit"}
    assert all(0 <= r["mean"] <= 65 for r in release.cells)
    for record in release.records:
        jsonschema.validate(record, SCHEMA)


def test_unknown_mechanism_fails_naming_the_field():
    """The release's parameters check what the mechanism's spec asks (at start: the commands
    that run the release check the settings they load)."""
    from stream_dp.config import ConfigError
    from stream_dp.release.params import checked_settings

    with pytest.raises(ConfigError, match="^invalid setting mean_mechanism .*unknown"):
        checked_settings(load_settings(mean_mechanism="nope"))
    with pytest.raises(ConfigError, match="^invalid setting delta .*required"):
        checked_settings(load_settings(mean_mechanism="cummings", vehicle_budget="none"))
    with pytest.raises(ConfigError, match="^invalid setting mean_mechanism .*--fixed-epsilon"):
        checked_settings(load_settings(mean_mechanism="cummings", delta=1e-6))  # the budget's
    with pytest.raises(ValueError, match="target_mean_error"):
        ReleaseParams(target_mean_error=10.0, mean_mechanism="baseline")


def test_offline_engine_partitioning_does_not_change_the_release():
    data = unclamped_readings(6000)
    results = []
    for partitions in (1, 4):
        settings = fixed_mode_settings(resolution=7, partitions=partitions)
        engine = OfflineEngine(settings, seeded_noise())
        out = [r for rr in (engine.feed(data), engine.finish()) for r in rr]
        results.append(
            [
                (
                    r.window_start,
                    r.summary["K"],
                    sorted((c["cell"], c["n_readings"]) for c in r.cells),
                )
                for r in out
            ]  # fmt: skip
        )
        assert engine.counts.accepted == len(data)
    assert results[0] == results[1]


def test_partition_for_matches_kafkas_default_partitioner():
    from aiokafka.partitioner import DefaultPartitioner

    partitioner = DefaultPartitioner()
    for key in ("veh-1", "367073680", "x" * 40):
        assert partition_for(key, 4) == partitioner(key.encode(), [0, 1, 2, 3], [0, 1, 2, 3])


def test_release_cli_writes_valid_records(tmp_path):
    from stream_dp.cli import main

    source = tmp_path / "readings.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in unclamped_readings(2000, seed=2)))
    out = tmp_path / "releases.jsonl"
    assert main(["release", str(source), "--out", str(out), "--resolution", "7"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all(r["schema_version"] == SCHEMA_VERSION == 2 for r in records)
    assert all(r["status"] == "released" for r in records if r["type"] == "window")
    for record in records:
        jsonschema.validate(record, SCHEMA)
    assert main(["release", str(source), "--out", str(out), "--epsilon", "-1"]) == 2


def test_merged_vehicle_order_is_python_string_order():
    """The merge sorts names with numpy; CLIP-USER's tie-break order is Python's."""
    from stream_dp.windows.state import PartialColumns

    names = ["b", "a", "ä", "Z", "a b", "ab", "𝔘", "10", "9", "é", "e\u0301"]
    partials = [
        PartialColumns.from_readings(["c"] * 2, names[i::3][:2], [1.0, 2.0], [3.0, 4.0], 4)
        for i in range(3)
    ]
    merged = WindowColumns.from_partials(partials)
    used = [n for i in range(3) for n in names[i::3][:2]]
    assert list(merged.vehicle_names) == sorted(used)
    index = merged.pair_index()
    assert sorted(index) == sorted(("c", v) for v in used)


@pytest.mark.parametrize("cell", ["872a10701ffffff", "*", "é", ""])
def test_release_id_is_the_rfc4122_name_based_uuid(cell):
    import uuid

    from stream_dp.release.records import RELEASE_NAMESPACE, release_id

    expected = uuid.uuid5(RELEASE_NAMESPACE, f"app|3600|8|{cell}")
    assert release_id("app", 3600, 8, cell) == str(expected)


def test_release_ids_of_a_window_are_each_cells_uuid5():
    import uuid

    from stream_dp.release.records import RELEASE_NAMESPACE, release_ids

    cells = ["872a10701ffffff", "*", "é", "", "872a10701ffffff"]
    expected = [str(uuid.uuid5(RELEASE_NAMESPACE, f"app|7200|9|{c}")) for c in cells]
    assert release_ids("app", 7200, 9, cells) == expected


def test_kept_sums_refuse_a_cap_beyond_the_stored_prefix():
    """Only each pair's first C readings are stored: keeping 3 of 5 with C = 2 cannot be summed
    exactly, and says so instead of summing what is there."""
    columns = WindowColumns.from_readings(
        ["c"] * 5, ["v"] * 5, [5.0, 1.0, 4.0, 2.0, 3.0], [50.0, 10.0, 40.0, 20.0, 30.0], 2
    )
    entries = np.array([0])
    total, total_sq = kept_sums(columns, entries, np.array([2]))
    assert (total[0], total_sq[0]) == (30.0, 500.0)  # the first two by event time
    assert kept_sums(columns, entries, np.array([5]))[0][0] == 150.0  # all: the pair's total
    with pytest.raises(ValueError, match="beyond the stored prefix"):
        kept_sums(columns, entries, np.array([3]))


def test_readings_late_for_a_window_still_open_elsewhere_are_counted_in_its_summary():
    """One partition closes hour 0 and drops a late reading for it while another partition
    still holds hour 0 open: the window's summary reports that reading."""
    settings = fixed_mode_settings(resolution=7, partitions=2, grace_seconds=600)
    ids = [f"veh-{i}" for i in range(50)]
    ahead = next(v for v in ids if partition_for(v, 2) == 0)
    behind = [v for v in ids if partition_for(v, 2) == 1][:3]
    point = {"lat": 40.71, "lon": -74.0, "speed": 30.0}
    data = [{"vehicle_id": v, "ts": 100.0 + i, **point} for i, v in enumerate([ahead, *behind])]
    data += [
        {"vehicle_id": ahead, "ts": 3600.0 + 601.0, **point},  # partition 0 closes hour 0
        {"vehicle_id": ahead, "ts": 200.0, **point},  # late there
        {"vehicle_id": ahead, "ts": 300.0, **point},  # late there
    ]
    engine = OfflineEngine(settings, seeded_noise())
    released = list(engine.feed(data))
    assert released == []  # partition 1 still holds hour 0 open
    released = list(engine.finish())
    summaries = {r.window_start: r.summary for r in released}
    assert summaries[0]["readings_dropped_late"] == 2
    assert summaries[3600]["readings_dropped_late"] == 0
    assert engine.counts.late == 2 and engine.counts.accepted == len(data) - 2
    assert summaries[0]["cells_released"] == 1


def test_the_offline_engine_does_not_read_the_wall_clock():
    """A file replayed offline gives the same release whenever it is run: readings stamped
    after today are accepted there (the service refuses them; see test_readings)."""
    import time

    later = (int(time.time()) // 3600 + 48) * 3600  # two days from now
    data = [{**r, "ts": later + i} for i, r in enumerate(unclamped_readings(50))]
    engine = OfflineEngine(fixed_mode_settings(resolution=7, max_future_seconds=60), seeded_noise())
    out = [r for rr in (engine.feed(data), engine.finish()) for r in rr]
    assert engine.counts.accepted == 50 and engine.counts.invalid == 0
    assert [r.window_start for r in out] == [later]


@pytest.mark.parametrize(("seed", "epsilon"), [(0, 1.0), (1, 0.05), (2, 0.7), (3, 2.0)])
def test_the_release_and_the_clip_mechanism_are_one_clip_mean(seed, epsilon):
    """The window release (every cell in one batch) and the ``clip`` mean mechanism (one cell)
    are the same CLIP mean (docs/math.md §7.2): on the same random bits, each record's mean,
    error bound and error bar are the mechanism's release of that cell's kept readings.
    (No variance share: the mean draws are then the window's first.)"""
    from stream_dp.dp.error_bars import mechanism_mean_error
    from stream_dp.dp.grid_error import ErrorModel
    from stream_dp.dp.mechanisms import CellData, get_mean_mechanism

    settings = fixed_mode_settings(prefix_limit=4, epsilon=epsilon, variance_share=0.0)
    pairs, raw = random_pairs(seed)
    release = release_window(0, pairs, ReleaseParams.from_settings(settings), seeded_noise(seed))
    keys = sorted(raw)
    occupancy = Occupancy.from_arrays(
        [c for c, _ in keys], [v for _, v in keys], [len(raw[k]) for k in keys]
    )
    model = ErrorModel.split(epsilon, 0.0)
    clip = clip_user(occupancy, settings.upper, epsilon, model=model)
    kept = pseudo_user_step(clip, settings.upper, epsilon, prefix_limit=4).kept_count
    source, mechanism = RandomSource.seeded_for_tests(seed), get_mean_mechanism("clip")
    assert len(release.cells) == len(occupancy.cells)
    for record in release.cells:  # in the release's cell order: the order of its draws
        entries = [i for i, (cell, _) in enumerate(keys) if cell == record["cell"]]
        data = CellData.from_readings(
            [[v for _, v in raw[keys[i]]] for i in entries], settings.upper, None, kept[entries]
        )
        one = mechanism.release(data, settings.upper, epsilon, source)
        assert record["mean"] == pytest.approx(one.value, rel=1e-12, abs=1e-12)
        assert record["error_bound"] == pytest.approx(one.worst_case_error, rel=1e-12)
        participants = int(data.counts[kept[entries] > 0].sum())
        bar = mechanism_mean_error(
            "clip", one.parameters, one.worst_case_error, one.sensitivity, settings.upper,
            participants, record["n_readings"],
        )  # fmt: skip
        assert record["mean_error"] == pytest.approx(min(bar, settings.upper), rel=1e-9)
        assert (record["n_readings_used"], record["cap"]) == (
            one.parameters["kept"], one.parameters["top"],
        )  # fmt: skip
