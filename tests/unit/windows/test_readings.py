"""Input validation: clamping, cells, timestamps, and clear reasons for bad readings."""

from __future__ import annotations

import h3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.windows.readings import (
    InvalidReading,
    ParsedBatch,
    ReadingValidator,
    decode_message,
    parse_timestamp,
)

GOOD = {"vehicle_id": "bus-1", "ts": 1606820400, "lat": 40.7, "lon": -74.0, "speed": 30.0}


def validate(obj):
    batch = ParsedBatch()
    ReadingValidator(upper=65.0, resolution=8).add(obj, batch)
    return batch


def test_speed_is_clamped_to_zero_and_upper():
    assert validate({**GOOD, "speed": 99.0}).speed == [65.0]
    assert validate({**GOOD, "speed": -3.0}).speed == [0.0]
    assert validate(GOOD).speed == [30.0]


def test_cell_is_the_h3_cell_at_the_configured_resolution():
    assert validate(GOOD).cell == [h3.latlng_to_cell(40.7, -74.0, 8)]


def test_integer_vehicle_ids_become_strings_and_extra_fields_are_ignored():
    assert validate({**GOOD, "vehicle_id": 367073680, "heading": 3}).vehicle == ["367073680"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1606820400, 1606820400.0),
        ("2020-12-01T11:00:00Z", 1606820400.0),
        ("2020-12-01T12:00:00+01:00", 1606820400.0),
        ("2020-12-01 11:00:00", 1606820400.0),
    ],
)
def test_timestamps(value, expected):
    assert parse_timestamp(value) == expected


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"lat": 91.0}, "lat out of range"),
        ({"lon": -181.0}, "lon out of range"),
        ({"lat": float("inf")}, "lat is not finite"),
        ({"speed": float("nan")}, "speed is not finite"),
        ({"speed": "fast"}, "speed must be a number"),
        ({"vehicle_id": ""}, "vehicle_id must be a non-empty string"),
        ({"vehicle_id": "bus\x00"}, "vehicle_id must not contain NUL"),
        ({"vehicle_id": True}, "vehicle_id must be a string"),
        ({"ts": "yesterday"}, "ts is not RFC 3339"),
        ({"ts": None}, "ts must be epoch seconds"),
        ({"ts": -1.0}, "ts is before 1970"),
        ({"ts": "1969-12-31T23:59:59Z"}, "ts is before 1970"),
        ({"ts": 3e11}, "ts is after 9000-01-01"),
        ({"ts": 10**18}, "ts is after 9000-01-01"),
        ({"ts": "9999-12-31T23:00:00Z"}, "ts is after 9000-01-01"),
    ],
)
def test_invalid_readings_name_the_field(change, reason):
    with pytest.raises(InvalidReading, match=reason):
        validate({**GOOD, **change})


def test_missing_field_is_invalid():
    obj = dict(GOOD)
    del obj["speed"]
    with pytest.raises(InvalidReading, match="speed"):
        validate(obj)


def test_messages_carry_one_reading_or_an_array():
    assert decode_message(b'{"a": 1}') == [{"a": 1}]
    assert decode_message(b'[{"a": 1}, {"a": 2}]') == [{"a": 1}, {"a": 2}]
    for bad, reason in [(b"", "empty message"), (b"[]", "empty array"), (b"{", "not JSON")]:
        with pytest.raises(InvalidReading, match=reason):
            decode_message(bad)


def outcome(add, obj):
    batch = ParsedBatch()
    try:
        add(obj, batch)
    except InvalidReading as exc:
        return ("invalid", str(exc))
    return (batch.vehicle, batch.ts, batch.cell, batch.speed)


field_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**400), 10**400),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.sampled_from(
        [40.7, -74.0, 1606820400, 1606820400.5, 2**53, -(2**53), "2020-12-01T11:00:00Z"]
    ),
    st.sampled_from([0, -0.0, 1606821000, 1606821000.0, 1606821000.5, 221845392000.0]),
)
NOW = 1_606_820_400.0  # the clock of the limited validators below: limit 1606821000


def validators():
    return [
        ReadingValidator(upper=65.0, resolution=8),
        ReadingValidator(65.0, 8, max_future_seconds=600.0, clock=lambda: NOW),
    ]


vehicle_ids = st.one_of(st.text(max_size=300), st.integers(), st.none(), st.just("bus\x00"))


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "vehicle_id": vehicle_ids,
            "ts": field_values,
            "lat": field_values,
            "lon": field_values,
            "speed": field_values,
        },
    )
)
@settings(max_examples=1000, deadline=None)
def test_the_fast_path_agrees_with_the_checked_path(obj):
    for validator in validators():
        assert outcome(validator.add, obj) == outcome(validator._add_checked, obj)


@pytest.mark.parametrize("field", ["ts", "lat", "speed"])
def test_huge_integers_are_invalid_not_a_crash(field):
    with pytest.raises(InvalidReading, match=f"{field} is not finite"):
        validate({**GOOD, field: 10**400})


@given(
    st.sampled_from(["vehicle_id", "ts", "lat", "lon", "speed"]),
    st.one_of(field_values, vehicle_ids),
)
@settings(max_examples=1000, deadline=None)
def test_the_fast_path_agrees_with_the_checked_path_one_field_off(field, value):
    obj = {**GOOD, field: value}
    for validator in validators():
        assert outcome(validator.add, obj) == outcome(validator._add_checked, obj)


def test_readings_far_ahead_of_the_wall_clock_are_invalid_on_both_paths():
    now = [1_606_820_400.0]
    validator = ReadingValidator(65.0, 8, max_future_seconds=600.0, clock=lambda: now[0])
    batch = ParsedBatch()
    validator.add({**GOOD, "ts": now[0] + 600.0}, batch)  # at the limit: accepted
    validator.add({**GOOD, "ts": "2020-12-01T11:10:00Z"}, batch)  # same limit, checked path
    for ahead in ({**GOOD, "ts": now[0] + 601.0}, {**GOOD, "ts": "2020-12-01T11:10:01Z"}):
        with pytest.raises(InvalidReading, match="600 s ahead of the wall clock"):
            validator.add(ahead, batch)
    now[0] += 60.0  # the limit moves only when the clock is read again (once per batch)
    later = {**GOOD, "ts": now[0] + 600.0}
    with pytest.raises(InvalidReading):
        validator.add(later, batch)
    validator.refresh_clock()
    validator.add(later, batch)
    assert batch.ts == [1_606_821_000.0, 1_606_821_000.0, 1_606_821_060.0]


def test_every_accepted_time_formats_as_a_window_bound():
    """A window's end is formatted as RFC 3339 at release; no accepted time may break it."""
    from stream_dp.release.records import rfc3339
    from stream_dp.windows.state import window_start_of

    batch = ParsedBatch()
    validator = ReadingValidator(65.0, 8)  # no wall-clock limit: the fixed range only
    for ts in (0, 0.0, 221845392000.0, "8999-12-31T23:59:59Z"):
        validator.add({**GOOD, "ts": ts}, batch)
    for ts in batch.ts:
        assert rfc3339(window_start_of(ts, 86400) + 86400).endswith("Z")
