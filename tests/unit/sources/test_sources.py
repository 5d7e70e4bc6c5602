"""Readers of CSV, JSON Lines and tracktable .traj files (plain and gzipped)."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest

from stream_dp.sources import READING_FIELDS, SourceError, iter_readings
from stream_dp.sources.traj import haversine_km

# 2020-12-01T11:31:39Z
T0 = 1606822299.0


def write(path: Path, text: str) -> Path:
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as stream:
            stream.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def traj_line(points: list[tuple[str, str, float, float]], n: int | None = None) -> str:
    count = len(points) if n is None else n
    header = f"*T*,b6dfc4cd,terrestrial,{count},0,*P*,terrestrial,2,1,1,0"
    body = ",".join(f"{vid},{stamp},{lon},{lat}" for vid, stamp, lon, lat in points)
    return f"{header},{body}\n"


# --- CSV -------------------------------------------------------------------------------------


CSV_TEXT = (
    "vehicle_id,ts,lat,lon,speed,extra\n"
    f"v1,{T0},40.7,-74.0,12.5,x\n"
    "v2,2020-12-01T11:31:39Z,40.71,-74.01,0,y\n"
    "v3,2020-12-01T12:31:39+01:00,40.72,-74.02,3.25,z\n"
    "v4,2020-12-01 11:31:39,40.73,-74.03,7,w\n"
)


@pytest.mark.parametrize("name", ["r.csv", "r.csv.gz", "R.CSV"])
def test_csv_epoch_and_rfc3339_timestamps(tmp_path: Path, name: str) -> None:
    readings = list(iter_readings(write(tmp_path / name, CSV_TEXT)))
    assert [r["vehicle_id"] for r in readings] == ["v1", "v2", "v3", "v4"]
    assert [r["ts"] for r in readings] == [T0, T0, T0, T0]  # Z, offset and naive (UTC) agree
    assert readings[0] == {"vehicle_id": "v1", "ts": T0, "lat": 40.7, "lon": -74.0, "speed": 12.5}
    assert all(tuple(r) == READING_FIELDS for r in readings)
    assert all(isinstance(r[k], float) for r in readings for k in ("ts", "lat", "lon", "speed"))


def test_csv_bad_value_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", CSV_TEXT + "v5,not-a-time,40.7,-74.0,1\n")
    with pytest.raises(SourceError) as info:
        list(iter_readings(path))
    assert info.value.line == 6
    assert str(info.value).startswith(f"{path}:6: ")


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ("v5,1.0,40.7,-74.0", "missing speed"),
        ("v5,1.0,40.7,-74.0,1,2,3", "more fields"),
        ("v5,1.0,40.7,-74.0,fast", "speed must be a number"),
        ("v5,1.0,nan,-74.0,1", "lat is not finite"),
        (",1.0,40.7,-74.0,1", "vehicle_id"),
    ],
)
def test_csv_malformed_rows(tmp_path: Path, row: str, reason: str) -> None:
    path = write(tmp_path / "r.csv", "vehicle_id,ts,lat,lon,speed\n" + row + "\n")
    with pytest.raises(SourceError, match=reason) as info:
        list(iter_readings(path))
    assert info.value.line == 2


def test_csv_header_must_name_all_fields(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", "vehicle_id,time,lat,lon,speed\nv1,1,2,3,4\n")
    with pytest.raises(SourceError, match="header lacks ts") as info:
        list(iter_readings(path))
    assert info.value.line == 1


def test_csv_empty_file(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no CSV header"):
        list(iter_readings(write(tmp_path / "r.csv", "")))


# --- JSON Lines ------------------------------------------------------------------------------


JSONL_TEXT = (
    f'{{"vehicle_id": "v1", "ts": {T0}, "lat": 40.7, "lon": -74.0, "speed": 12.5, "x": 1}}\n'
    "\n"
    '{"vehicle_id": 367073680, "ts": "2020-12-01T11:31:39Z", "lat": 40, "lon": -74, "speed": 0}\n'
    '{"vehicle_id": "v3", "ts": "1606822299", "lat": "40.7", "lon": "-74.0", "speed": "1.5"}\n'
)


@pytest.mark.parametrize("name", ["r.jsonl", "r.ndjson", "r.jsonl.gz", "r.ndjson.gz"])
def test_jsonl(tmp_path: Path, name: str) -> None:
    readings = list(iter_readings(write(tmp_path / name, JSONL_TEXT)))
    assert readings == [
        {"vehicle_id": "v1", "ts": T0, "lat": 40.7, "lon": -74.0, "speed": 12.5},
        {"vehicle_id": "367073680", "ts": T0, "lat": 40.0, "lon": -74.0, "speed": 0.0},
        {"vehicle_id": "v3", "ts": T0, "lat": 40.7, "lon": -74.0, "speed": 1.5},
    ]
    assert all(isinstance(r["speed"], float) for r in readings)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"vehicle_id": "v1", "ts": 1, ', "invalid JSON"),
        ("[1, 2, 3]", "expected a JSON object"),
        ('{"vehicle_id": "v1", "ts": 1, "lat": 1, "lon": 2}', "missing speed"),
        ('{"vehicle_id": "v1", "ts": 1, "lat": 1, "lon": 2, "speed": true}', "speed must be"),
        ('{"vehicle_id": "v1", "ts": true, "lat": 1, "lon": 2, "speed": 1}', "timestamp"),
        ('{"vehicle_id": 1.5, "ts": 1, "lat": 1, "lon": 2, "speed": 1}', "vehicle_id"),
    ],
)
def test_jsonl_malformed_line(tmp_path: Path, line: str, reason: str) -> None:
    path = write(tmp_path / "r.jsonl", JSONL_TEXT + line + "\n")
    with pytest.raises(SourceError, match=reason) as info:
        list(iter_readings(path))
    assert info.value.line == 5
    assert info.value.path == str(path)


def test_unknown_suffix_is_rejected_at_once(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="unknown file type"):
        iter_readings(write(tmp_path / "r.txt", "x\n"))


# --- tracktable .traj ------------------------------------------------------------------------


def test_haversine_against_hand_computation() -> None:
    # 0.01 degree along a meridian: R * pi / 180 * 0.01 with R = 6371.0088 km.
    assert haversine_km(40.0, -74.0, 40.01, -74.0) == pytest.approx(1.1119508, abs=1e-6)
    # Diagonal: the haversine formula written out.
    p1, p2, dl = math.radians(40.7), math.radians(40.71), math.radians(0.01)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    expected = 2 * 6371.0088 * math.asin(math.sqrt(a))
    assert haversine_km(40.7, -74.0, 40.71, -73.99) == pytest.approx(expected, rel=1e-12)
    # Hand check, flat-earth at this scale: hypot(1.11195, 1.11195 * cos(40.705 deg)) = 1.39530 km.
    assert expected == pytest.approx(1.39530, abs=1e-4)


def test_traj_speeds_first_fix_and_duplicates(tmp_path: Path) -> None:
    text = traj_line(
        [
            ("111", "2020-12-01 11:31:39", -74.0, 40.0),
            ("111", "2020-12-01 11:32:39", -74.0, 40.01),  # 1.1119508 km in 60 s
            ("111", "2020-12-01 11:32:39", -74.0, 40.5),  # same time: skipped
            ("111", "2020-12-01 11:34:39", -74.0, 40.01),  # not moved in 120 s
        ]
    )
    readings = list(iter_readings(write(tmp_path / "t.traj", text)))
    assert [r["ts"] for r in readings] == [T0, T0 + 60, T0 + 180]
    speed = 1.1119508 / (60 / 3600)  # 66.717 km/h
    assert readings[0]["speed"] == pytest.approx(speed, abs=1e-4)  # first fix: next segment
    assert readings[1]["speed"] == pytest.approx(speed, abs=1e-4)
    assert readings[2]["speed"] == 0.0
    assert readings[1] == {
        "vehicle_id": "111",
        "ts": T0 + 60,
        "lat": 40.01,
        "lon": -74.0,
        "speed": readings[1]["speed"],
    }


def test_traj_sorted_by_time_then_vehicle_and_gz(tmp_path: Path) -> None:
    text = (
        traj_line(
            [
                ("222", "2020-12-01 11:31:39", -74.0, 40.0),
                ("222", "2020-12-01 11:33:39", -74.0, 40.0),
            ]
        )
        + traj_line(
            [
                ("111", "2020-12-01 11:31:39", -74.0, 40.0),
                ("111", "2020-12-01 11:32:39", -74.0, 40.0),
            ]
        )
        + traj_line([("333", "2020-12-01 11:00:00", -74.0, 40.0)])  # one fix: no speed, dropped
    )
    readings = list(iter_readings(write(tmp_path / "t.traj.gz", text)))
    assert [(r["ts"] - T0, r["vehicle_id"]) for r in readings] == [
        (0, "111"),
        (0, "222"),
        (60, "111"),
        (120, "222"),
    ]


def test_traj_field_count_mismatch_names_line(tmp_path: Path) -> None:
    good = traj_line([("1", "2020-12-01 11:31:39", -74, 40), ("1", "2020-12-01 11:32:39", -74, 40)])
    bad = traj_line(
        [("2", "2020-12-01 11:31:39", -74, 40), ("2", "2020-12-01 11:32:39", -74, 40)], 3
    )
    path = write(tmp_path / "t.traj", good + bad)
    with pytest.raises(SourceError, match="19 fields, expected 23") as info:
        list(iter_readings(path))
    assert info.value.line == 2
    assert str(info.value).startswith(f"{path}:2: ")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("hello,world\n", "not a tracktable trajectory"),
        (traj_line([("1", "yesterday", -74, 40)]), "Invalid isoformat"),
        (traj_line([("1", "2020-12-01 11:31:39", "east", 40)]), "could not convert"),
        (
            traj_line(
                [("1", "2020-12-01 11:31:39", -74, 40), ("2", "2020-12-01 11:32:39", -74, 40)]
            ),
            "mixes several object ids",
        ),
    ],
)
def test_traj_malformed_lines(tmp_path: Path, line: str, reason: str) -> None:
    with pytest.raises(SourceError, match=reason) as info:
        list(iter_readings(write(tmp_path / "t.traj", line)))
    assert info.value.line == 1


def test_traj_point_properties_are_skipped(tmp_path: Path) -> None:
    line = (
        "*T*,u,terrestrial,2,0,*P*,terrestrial,2,1,1,2,heading,1,vessel-name,2,"
        "9,2020-12-01 11:31:39,-74.0,40.0,189,SHIP,"
        "9,2020-12-01 11:32:39,-74.0,40.01,190,SHIP\n"
    )
    readings = list(iter_readings(write(tmp_path / "t.traj", line)))
    assert [(r["vehicle_id"], r["lat"]) for r in readings] == [("9", 40.0), ("9", 40.01)]
    assert readings[1]["speed"] == pytest.approx(66.717, abs=1e-3)


def test_an_upper_case_gz_suffix_is_gunzipped(tmp_path: Path) -> None:
    line = '{"vehicle_id": "a", "ts": 1606820400, "lat": 40.7, "lon": -74.0, "speed": 3.5}\n'
    path = tmp_path / "readings.jsonl.GZ"
    with gzip.open(path, "wt", encoding="utf-8") as stream:
        stream.write(line * 3)
    readings = list(iter_readings(path))
    assert [r["speed"] for r in readings] == [3.5] * 3


@pytest.mark.parametrize("name", ["r.csv.gz", "r.jsonl.gz", "r.traj.gz"])
def test_a_truncated_gzip_file_raises_one_source_error(tmp_path: Path, name: str) -> None:
    if name.startswith("r.csv"):
        text = "vehicle_id,ts,lat,lon,speed\n" + "v1,100,52.5,13.4,30\n" * 5000
    elif name.startswith("r.jsonl"):
        text = '{"vehicle_id":"v1","ts":100,"lat":52.5,"lon":13.4,"speed":30}\n' * 5000
    else:
        fixes = [("1", "2020-12-01 11:31:39", -74, 40), ("1", "2020-12-01 11:32:39", -74, 40)]
        text = traj_line(fixes) * 3000
    packed = gzip.compress(text.encode(), mtime=0)
    path = tmp_path / name
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(SourceError, match="truncated or corrupt gzip data$") as info:
        list(iter_readings(path))
    assert info.value.line is None and info.value.code is None


def test_a_line_that_is_not_utf8_is_a_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_bytes(
        b"vehicle_id,ts,lat,lon,speed\nv1,100,52.5,13.4,30\n\xff\xfe,100,52.5,13.4,30\n"
    )
    from stream_dp.sources import numbered_readings

    numbered = list(numbered_readings(path))
    assert numbered[0] == (
        2,
        {"vehicle_id": "v1", "ts": 100.0, "lat": 52.5, "lon": 13.4, "speed": 30.0},
    )
    line, error = numbered[1]
    assert line == 3 and isinstance(error, SourceError) and error.code == "not_utf8"
