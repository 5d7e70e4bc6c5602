"""The basemap options of the commands that serve the live map (serve, demo, dashboard)."""

from __future__ import annotations

import argparse

#: The settings the options set (``--map-tiles`` sets ``map_tiles``, ...).
BASEMAP_SETTINGS = ("map_tiles", "map_tiles_attribution")


def add_basemap_options(parser: argparse.ArgumentParser) -> None:
    """``--map-tiles`` and ``--map-tiles-attribution`` (over ``STREAM_DP_MAP_TILES*``)."""
    group = parser.add_argument_group("live map basemap (override STREAM_DP_MAP_TILES*)")
    group.add_argument(
        "--map-tiles",
        metavar="URL",
        help="tiles under the live map's hexagons, fetched by the viewer's browser: osm "
        "(OpenStreetMap's standard tiles), none, or an XYZ tile URL template "
        "https://host/{z}/{x}/{y}.png (default osm)",
    )
    group.add_argument(
        "--map-tiles-attribution",
        metavar="TEXT",
        help="the tiles' credit, plain text: required with a tile URL; with osm shown after "
        "OpenStreetMap's (default none)",
    )


def basemap_values(args: argparse.Namespace) -> dict[str, str | None]:
    """The options' values by setting name (None: not given)."""
    return {name: getattr(args, name, None) for name in BASEMAP_SETTINGS}
