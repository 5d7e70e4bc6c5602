"""Internal-topic records: large payloads are split into parts and reassembled exactly."""

from __future__ import annotations

import orjson

from stream_dp.window_state import PairStats, pairs_to_rows
from stream_dp.worker import internal_records as rec


def many_pairs(n: int) -> dict:
    pairs = {}
    for i in range(n):
        stats = PairStats()
        for j in range(70):
            stats.add(float(j), float(i % 65), 64)
        pairs[(f"cell{i % 7}", f"veh{i}")] = stats
    return pairs


def test_big_partial_is_split_under_a_megabyte_and_reassembles():
    pairs = many_pairs(1500)
    parts = rec.encode_partial(3600, 2, pairs, "a1")
    assert len(parts) > 1 and max(len(p) for p in parts) < 1_000_000
    assembler = rec.PartAssembler()
    results = [assembler.add(rec.decode(p)) for p in parts]
    assert all(r is None for r in results[:-1])
    window, partition, back = rec.partial_payload(results[-1])
    assert (window, partition) == (3600, 2)
    assert back == pairs_to_rows(pairs)


def test_delta_parts_carry_offset_and_late_counts():
    rows = {0: pairs_to_rows(many_pairs(600)), 3600: pairs_to_rows(many_pairs(10))}
    parts = rec.encode_delta(41, 1234.5, rows, {0: 3})
    assembler = rec.PartAssembler()
    whole = [assembler.add(rec.decode(p)) for p in parts][-1]
    payload = rec.delta_payload(whole)
    assert payload["offset"] == 41 and payload["max_ts"] == 1234.5 and payload["late"] == {0: 3}
    assert sorted(payload["windows"]) == [0, 3600]
    assert sum(len(v) for v in payload["windows"].values()) == 610


def test_an_interrupted_payload_is_never_assembled():
    first = rec.encode_partial(0, 1, many_pairs(600), "crashed")
    second = rec.encode_partial(0, 1, many_pairs(600), "retry")
    assembler = rec.PartAssembler()
    outcomes = [assembler.add(rec.decode(p)) for p in first[:-1]]  # the writer died here
    outcomes += [assembler.add(rec.decode(p)) for p in second]
    complete = [o for o in outcomes if o is not None]
    assert len(complete) == 1 and {p["id"] for p in complete[0]} == {"0/1/retry"}


def test_a_part_without_its_beginning_is_ignored():
    parts = rec.encode_delta(7, 1.0, {0: pairs_to_rows(many_pairs(600))}, {})
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
