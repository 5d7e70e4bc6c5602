"""Internal-topic records: large payloads are split into parts and reassembled exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import orjson
import pytest

from stream_dp.windows.state import PartialColumns, PartitionState
from stream_dp.wire import column_codec
from stream_dp.wire import internal_records as rec


def many_pairs(n: int) -> PartialColumns:
    """``n`` pairs of 70 readings each (a full 64-reading prefix), unicode names included."""
    rows = [
        (f"cell{i % 7}", f"véh-{i}", float(j), float(i % 65)) for i in range(n) for j in range(70)
    ]
    cells, vehicles, ts, values = (list(col) for col in zip(*rows, strict=True))
    return PartialColumns.from_readings(cells, vehicles, ts, values, 64)


def same_partial(a: PartialColumns, b: PartialColumns) -> bool:
    return a.cell_names == b.cell_names and all(
        np.array_equal(getattr(a, name), getattr(b, name))
        for name in ("vehicle_names", "pair_cell", "pair_vehicle", "count", "total", "total_sq",
                     "reading_pair", "reading_ts", "reading_value")
    )  # fmt: skip


def test_big_partial_is_split_under_a_megabyte_and_reassembles():
    pairs = many_pairs(1500)
    parts = rec.encode_partial(3600, 2, pairs, "a1")
    assert len(parts) > 1 and max(len(p) for p in parts) < 1_000_000
    assembler = rec.PartAssembler()
    results = [assembler.add(rec.decode(p)) for p in parts]
    assert all(r is None for r in results[:-1])
    window, partition, back = rec.partial_payload(results[-1])
    assert (window, partition) == (3600, 2)
    assert same_partial(back, pairs)


def test_vehicle_names_travel_as_a_unicode_array_and_a_json_list_is_still_read():
    partial = many_pairs(50)
    parts = rec.encode_partial(3600, 1, partial, "a1")
    whole = rec.PartAssembler().add(rec.decode(parts[0]))
    back = rec.partial_payload(whole)[2]
    assert back.vehicle_names.dtype.kind == "U"
    assert back.vehicle_names.tolist() == partial.vehicle_names.tolist()
    as_list = dataclasses.replace(partial, vehicle_names=partial.vehicle_names.tolist())
    old = rec.PartAssembler().add(rec.decode(rec.encode_partial(3600, 1, as_list, "a1")[0]))
    assert same_partial(rec.partial_payload(old)[2], partial)
    as_ints = dataclasses.replace(partial, vehicle_names=np.arange(len(partial.vehicle_names)))
    bad = rec.PartAssembler().add(rec.decode(rec.encode_partial(3600, 1, as_ints, "a1")[0]))
    with pytest.raises(ValueError, match="vehicle_names"):
        rec.partial_payload(bad)


def test_delta_parts_carry_offset_late_counts_and_replay_exactly():
    state = PartitionState(window_seconds=3600, grace_seconds=600, prefix_limit=64)
    rows = [(f"v{i % 900}", float(i % 7000), f"c{i % 13}", float(i % 65)) for i in range(40_000)]
    vehicles, ts, cells, values = (list(col) for col in zip(*rows, strict=True))
    outcome = state.add_batch(vehicles, ts, cells, values, record_delta=True)
    parts = rec.encode_delta(41, 1234.5, outcome.delta, {0: 3})
    assert len(parts) > 1 and max(len(p) for p in parts) < 1_000_000
    assembler = rec.PartAssembler()
    whole = [assembler.add(rec.decode(p)) for p in parts][-1]
    payload = rec.delta_payload(whole)
    assert payload["offset"] == 41 and payload["max_ts"] == 1234.5 and payload["late"] == {0: 3}
    assert sorted(payload["windows"]) == [0, 3600]
    replayed = PartitionState(window_seconds=3600, grace_seconds=600, prefix_limit=64)
    replayed.apply_delta(payload["windows"], payload["max_ts"])
    for start in (0, 3600):
        assert same_partial(replayed.partial(start), state.partial(start))


def test_a_corrupt_column_blob_is_refused():
    blob = column_codec.pack({"a": 1}, {"x": np.arange(5.0), "names": ["p", "q"]})
    meta, columns = column_codec.unpack(blob)
    assert meta == {"a": 1} and columns["names"] == ["p", "q"]
    assert np.array_equal(columns["x"], np.arange(5.0))
    for bad in (blob[:-3], blob + b"x", b"nope" + blob[4:], blob[:10]):
        with pytest.raises(ValueError):
            column_codec.unpack(bad)


def test_an_interrupted_payload_is_never_assembled():
    first = rec.encode_partial(0, 1, many_pairs(600), "crashed")
    second = rec.encode_partial(0, 1, many_pairs(600), "retry")
    assembler = rec.PartAssembler()
    outcomes = [assembler.add(rec.decode(p)) for p in first[:-1]]  # the writer died here
    outcomes += [assembler.add(rec.decode(p)) for p in second]
    complete = [o for o in outcomes if o is not None]
    assert len(complete) == 1 and {p["id"] for p in complete[0]} == {"0/1/retry"}


def test_a_part_without_its_beginning_is_ignored():
    parts = rec.encode_partial(7, 1, many_pairs(1500), "x")
    assembler = rec.PartAssembler()
    assert all(assembler.add(rec.decode(p)) is None for p in parts[1:])


def test_release_log_parts_round_trip():
    release = {
        "window_start": 0,
        "cells": [{"cell": f"c{i}", "mean": i} for i in range(700)],
        "summary": {"K": 2},
    }
    parts = rec.encode_release(release)
    assert len(parts) == 3
    assembler = rec.PartAssembler()
    whole = [assembler.add(orjson.loads(p)) for p in parts][-1]
    assert rec.release_payload(whole) == release


@pytest.mark.parametrize("sizes", [[], [0], [5], [3, 0, 9, 1, 20], [16], [15, 1, 16, 17]])
def test_parts_cut_from_segments_equal_parts_cut_from_the_joined_blob(sizes, monkeypatch):
    """Cutting the pieces of a column blob into records copies each byte once and gives
    exactly the records of cutting the joined blob."""
    monkeypatch.setattr(rec, "BYTES_PER_PART", 8)
    rng = np.random.default_rng(len(sizes))
    segments = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
    views = [memoryview(s) for s in segments]
    joined = b"".join(views)
    parts = rec._binary_parts("x", 1, views)
    assert parts == rec._binary_parts("x", 1, joined)
    assert len(parts) == max(1, -(-len(joined) // 8))
    assembler = rec.PartAssembler()
    whole = [assembler.add(rec.decode(p)) for p in parts][-1]
    assert rec._blob(whole) == joined
