"""The live map's basemap: which XYZ tiles the viewer's browser draws under the hexagons.

The ``map_tiles`` setting is ``osm`` (OpenStreetMap's standard tiles, credited as their
licence asks), ``none`` (no basemap: the page loads nothing from elsewhere) or an XYZ URL
template. Only the browser fetches tiles; the service passes the template on
(docs/dashboard.md, "Basemap"). Pure: no I/O.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

#: ``map_tiles`` naming OpenStreetMap's standard tile layer.
OSM = "osm"
OSM_TILE_URL = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
#: The credit OpenStreetMap's copyright page asks for, linked to it (HTML).
OSM_ATTRIBUTION = (
    '© <a href="https://www.openstreetmap.org/copyright">OpenStreetMap</a> contributors'
)
#: Placeholders Leaflet fills in a tile URL: each of {z}, {x} and {y} (or {-y}, TMS rows)
#: is required; {s} (a subdomain) and {r} (``@2x`` on high-density screens) are optional.
OPTIONAL_PLACEHOLDERS = ("s", "r")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class Basemap:
    """A tile layer as the page draws it: the URL template and its credit as HTML."""

    url: str
    attribution_html: str


def check_map_tiles(value: str) -> str:
    """``osm`` (any case), or an XYZ template of an http(s) URL; a ValueError saying why not."""
    text = value.strip()
    if text.lower() == OSM:
        return OSM
    parts = urlsplit(text)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ValueError(
            "must be osm, none or an http(s) tile URL template like "
            f"https://host/{{z}}/{{x}}/{{y}}.png, got {text!r}"
        )
    if any(c.isspace() for c in text):
        raise ValueError(f"a tile URL template holds no spaces, got {text!r}")
    found = set(_PLACEHOLDER.findall(text))
    needed = ("z", "x", "-y" if "-y" in found else "y")
    if missing := [p for p in needed if p not in found]:
        raise ValueError(f"needs {{z}}, {{x}} and {{y}}: no {_braced(missing)} in {text!r}")
    if unknown := sorted(found - {*needed, *OPTIONAL_PLACEHOLDERS}):
        raise ValueError(
            "may hold only {z}, {x}, {y} (or {-y}), {s} and {r}: "
            f"{_braced(unknown)} in {text!r}"
        )
    return text


def _braced(names: list[str]) -> str:
    return ", ".join("{" + name + "}" for name in names)


def basemap_of(map_tiles: str | None, attribution: str) -> Basemap | None:
    """The layer ``map_tiles`` names (None: no basemap). ``attribution`` is plain text,
    escaped here: for ``osm`` it follows OpenStreetMap's credit, else it is the credit."""
    if map_tiles is None:
        return None
    own = html.escape(attribution.strip())
    if map_tiles == OSM:
        return Basemap(OSM_TILE_URL, f"{OSM_ATTRIBUTION} · {own}" if own else OSM_ATTRIBUTION)
    return Basemap(map_tiles, own)
