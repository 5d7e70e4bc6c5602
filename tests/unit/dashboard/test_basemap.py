"""Issue 34, item 9: the live map's basemap. ``map_tiles`` is osm (the default, credited to
OpenStreetMap's contributors), none, or an http(s) XYZ template with its attribution; a bad
value stops every command that serves the map with one line naming the setting; the page
gets the layer from ``/api/dashboard/config``. No test here fetches a tile."""

from __future__ import annotations

import os
import re

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from stream_dp.cli import build_parser, main
from stream_dp.commands.demo import demo_settings, worker_env
from stream_dp.commands.serve import serve_settings
from stream_dp.config import ConfigError, load_settings
from stream_dp.dashboard.app import page_config
from stream_dp.dashboard.routes import ReleaseFeed, add_dashboard_routes
from stream_dp.web.basemap import OSM_ATTRIBUTION, OSM_TILE_URL, basemap_of, check_map_tiles

STUB = "http://127.0.0.1:8099/{z}/{x}/{y}.png"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("STREAM_DP_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    "template",
    [
        "https://tile.example.org/{z}/{x}/{y}.png",
        STUB,
        "https://{s}.tiles.example.org/{z}/{x}/{y}{r}.png?key=abc",
        "https://tms.example.org/{z}/{x}/{-y}.png",
    ],
)
def test_a_tile_url_template_is_accepted_as_written(template: str) -> None:
    assert check_map_tiles(f"  {template} ") == template
    settings = load_settings(map_tiles=template, map_tiles_attribution="© Example")
    assert settings.map_tiles == template


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("ftp://tile.example.org/{z}/{x}/{y}.png", "must be osm, none or an http(s) tile URL"),
        ("javascript:alert(1)//{z}/{x}/{y}", "must be osm, none or an http(s) tile URL"),
        ("tile.example.org/{z}/{x}/{y}.png", "must be osm, none or an http(s) tile URL"),
        ("https:///{z}/{x}/{y}.png", "must be osm, none or an http(s) tile URL"),
        ("openstreetmap", "must be osm, none or an http(s) tile URL"),
        ("https://tile.example.org/{z}/{x}.png", "no {y}"),
        ("https://tile.example.org/{x}/{y}.png", "no {z}"),
        ("https://tile.example.org/{z}/{y}/{y}.png", "no {x}"),
        ("https://tile.example.org/{z}/{x}/{y}/{key}.png", "may hold only {z}, {x}, {y}"),
        ("https://tile.example.org/{z}/{x}/{y}.png {s}", "holds no spaces"),
    ],
)
def test_a_bad_map_tiles_fails_fast_naming_the_setting(value: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        check_map_tiles(value)
    with pytest.raises(ConfigError) as raised:
        load_settings(map_tiles=value, map_tiles_attribution="© Example")
    message = str(raised.value)
    assert message.startswith("invalid setting map_tiles (STREAM_DP_MAP_TILES): "), message
    assert reason in message and "\n" not in message


def test_a_tile_url_needs_an_attribution_and_none_takes_none() -> None:
    with pytest.raises(ConfigError, match=r"^invalid setting map_tiles_attribution \(STREAM_"):
        load_settings(map_tiles=STUB)
    with pytest.raises(ConfigError, match="map_tiles_attribution .*no effect with map_tiles none"):
        load_settings(map_tiles="none", map_tiles_attribution="© Example")


def test_osm_is_the_default_and_none_survives_a_child_process(monkeypatch) -> None:
    assert load_settings().map_tiles == "osm"
    assert load_settings(map_tiles="OSM").map_tiles == "osm"
    unset = load_settings(map_tiles="none")
    assert unset.map_tiles is None
    for name, value in unset.to_env().items():  # as the demo passes it to its worker
        monkeypatch.setenv(name, value)
    assert load_settings().map_tiles is None


def test_osm_is_credited_to_its_contributors_with_a_link() -> None:
    osm = basemap_of("osm", "")
    assert osm is not None and osm.url == OSM_TILE_URL == (
        "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
    )
    assert osm.attribution_html == (
        '© <a href="https://www.openstreetmap.org/copyright">OpenStreetMap</a> contributors'
    )
    extra = basemap_of("osm", "speeds: <b>stream-dp</b>")
    assert extra is not None
    assert extra.attribution_html == f"{OSM_ATTRIBUTION} · speeds: &lt;b&gt;stream-dp&lt;/b&gt;"
    assert basemap_of(None, "") is None
    own = basemap_of(STUB, "Tiles © <Stub>")
    assert own is not None and (own.url, own.attribution_html) == (STUB, "Tiles © &lt;Stub&gt;")


@pytest.mark.parametrize(
    ("overrides", "tile_url", "attribution"),
    [
        ({}, OSM_TILE_URL, OSM_ATTRIBUTION),
        ({"map_tiles": "none"}, None, ""),
        ({"map_tiles": STUB, "map_tiles_attribution": "stub & co"}, STUB, "stub &amp; co"),
    ],
)
async def test_the_page_gets_the_layer_from_the_config_endpoint(
    overrides: dict[str, str], tile_url: str | None, attribution: str
) -> None:
    app = web.Application()
    config = page_config(load_settings(**overrides), "dashboard", live=False)
    add_dashboard_routes(app, ReleaseFeed(), config)
    async with TestClient(TestServer(app)) as client:
        answer = await client.get("/api/dashboard/config")
        served = await answer.json()
        page = await client.get("/dashboard")
    assert (served["tile_url"], served["tile_attribution"]) == (tile_url, attribution)
    # No Content-Security-Policy is set, so nothing keeps the browser from the tile host; a
    # policy added later must let the tiles in (img-src naming the host): this fails first.
    assert page.headers.get("Content-Security-Policy") is None


async def test_a_workers_own_map_gets_the_default_osm_layer(worker_web) -> None:
    _, client = worker_web
    served = await (await client.get("/api/dashboard/config")).json()
    assert (served["tile_url"], served["tile_attribution"]) == (OSM_TILE_URL, OSM_ATTRIBUTION)


@pytest.mark.parametrize("command", ["serve", "demo", "dashboard"])
def test_each_command_serving_the_map_takes_the_basemap_flags(command: str, capsys) -> None:
    bad = ["--map-tiles", "ftp://tile.example.org/{z}/{x}/{y}.png"]
    assert main([command, *bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "invalid setting map_tiles (--map-tiles / STREAM_DP_MAP_TILES)" in err[0]
    no_credit = ["--map-tiles", STUB]
    assert main([command, *no_credit]) == 2
    assert "invalid setting map_tiles_attribution" in capsys.readouterr().err


def test_the_demo_hands_its_basemap_to_its_worker_and_serve_takes_it() -> None:
    flags = ["--map-tiles", STUB, "--map-tiles-attribution", "Stub"]
    demo = demo_settings(build_parser("demo").parse_args(["demo", *flags]))
    env = worker_env(demo)
    assert (env["STREAM_DP_MAP_TILES"], env["STREAM_DP_MAP_TILES_ATTRIBUTION"]) == (STUB, "Stub")
    served = serve_settings(build_parser("serve").parse_args(["serve", *flags]))
    assert (served.map_tiles, served.map_tiles_attribution) == (STUB, "Stub")
    assert serve_settings(build_parser("serve").parse_args(["serve"])).map_tiles == "osm"
