"""`stream-dp map RELEASES.jsonl --window START --out map.png`: one window as a picture.

Draws the released cells whose span covers the window (a record pooled over several hours,
e.g. 07:00-13:00, covers each of them) as their H3 hexagons, coloured by the released mean on
the live map's scale (viridis over [0, U], U as the records state it) and faded by
``mean_error`` as there, with a legend. A --window that no released cell covers is refused
(its summary's counts say why); a file whose records state different U is refused. Needs
matplotlib (the plotting extra).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from stream_dp.commands.shared import (
    CliError,
    cannot_read,
    check_writable,
    plain_text,
    require_extra,
)
from stream_dp.dashboard.span_text import span_text


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "map", help="render one released window to a PNG", description=plain_text(__doc__)
    )
    parser.add_argument(
        "releases",
        type=Path,
        metavar="RELEASES",
        help="releases JSONL (stream-dp release --out)",
    )
    parser.add_argument(
        "--window",
        metavar="START",
        help="window_start, or a unique prefix of it; draws the released cells whose span "
        "covers it (default the newest window)",
    )
    parser.add_argument(
        "--out", type=Path, required=True, metavar="FILE", help="output PNG (its name ends in .png)"
    )
    parser.add_argument(
        "--upper",
        type=float,
        metavar="X",
        help="U of records that state none (written before records carried upper); records "
        "that state U are drawn on their own (default 65)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    _check_out(args.out)
    require_extra("matplotlib", "plot")
    import matplotlib

    matplotlib.use("Agg")
    from stream_dp.config import ConfigError, load_settings
    from stream_dp.dashboard.follower import read_releases_file
    from stream_dp.dashboard.store import ReleaseStore, common_upper

    try:
        default_upper = load_settings(upper=args.upper).upper
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    store = ReleaseStore(max_windows=1_000_000)
    try:
        records = read_releases_file(args.releases)
        upper = common_upper(records, default_upper)
        store.add(records)
    except OSError as exc:
        raise cannot_read("RELEASES", args.releases, exc) from None
    except ValueError as exc:
        raise CliError(f"RELEASES: {exc}") from None
    windows = {w["window_start"]: w for w in store.index()}
    start = _pick_window(sorted(windows), args.window)
    cells = store.cells_covering(start)
    if not cells and args.window is not None:
        raise CliError(f"--window {args.window!r}: {_nothing_covers(windows[start])}")
    try:
        draw_map(windows[start], cells, upper, args.out)
    except OSError as exc:
        raise CliError(f"--out: cannot write {args.out}: {exc.strerror}") from None
    print(f"window {start}: {_cells(len(cells))} -> {args.out}", file=sys.stderr)
    return 0


def _spans(window: dict[str, Any], cells: list[dict[str, Any]]) -> str:
    """The cells' spans, e.g. " (spans 07:00–13:00)", unless all are the window's own."""
    own = span_text(window["window_start"], window.get("window_end", ""))
    spans = sorted({span_text(c["window_start"], c["window_end"]) for c in cells})
    return "" if spans in ([], [own]) else f" (spans {', '.join(spans)})"


def _check_out(out: Path) -> None:
    """Before any work: the map is a PNG, so ``--out`` must name a writable ``.png`` file."""
    if out.suffix.lower() != ".png":
        raise CliError(f"--out: {out} must end in .png (the map is a PNG image)")
    check_writable("--out", out)


def _cells(count: int) -> str:
    return "1 cell" if count == 1 else f"{count} cells"


def _nothing_covers(window: dict[str, Any]) -> str:
    """Why no released cell covers ``window``, from its summary's counts."""
    said = [
        f"{window[field]} {what}"
        for field, what in (
            ("cells_held", "cells held to pool with later hours"),
            ("cells_withheld", "cells withheld"),
        )
        if window.get(field)
    ]
    return f"no released cell covers window {window['window_start']}" + (
        f" ({', '.join(said)})" if said else ""
    )


def _pick_window(starts: list[str], wanted: str | None) -> str:
    if not starts:
        raise CliError("RELEASES: no released window (no window summary record)")
    if wanted is None:
        return starts[-1]
    matches = [s for s in starts if s.startswith(wanted)]
    if len(matches) != 1:
        found = "none" if not matches else f"{len(matches)}: {', '.join(matches[:3])}"
        raise CliError(f"--window {wanted!r} must match one released window, matched {found}")
    return matches[0]


def draw_map(window: dict[str, Any], cells: list[dict[str, Any]], upper: float, out: Path) -> None:
    """Hexagons in longitude/latitude (aspect corrected at the mean latitude), a colour bar
    in the units of U, the window and its budget in the title."""
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import LinearSegmentedColormap, Normalize

    from stream_dp.dashboard.colour_scale import UNITS, VIRIDIS_STOPS, error_opacity

    cmap = LinearSegmentedColormap.from_list("stream-dp", list(VIRIDIS_STOPS))
    norm = Normalize(0.0, upper)
    fig, ax = plt.subplots(figsize=(9, 7), dpi=120)
    if cells:
        polygons = [[(lng, lat) for lat, lng in c["boundary"]] for c in cells]
        colours = cmap(norm([c["mean"] for c in cells]))
        colours[:, 3] = [error_opacity(c.get("mean_error"), upper) for c in cells]
        ax.add_collection(PolyCollection(polygons, facecolors=colours, edgecolors="white",
                                         linewidths=0.4))  # fmt: skip
        lats = [lat for c in cells for lat, _ in c["boundary"]]
        lngs = [lng for c in cells for _, lng in c["boundary"]]
        pad_lat = (max(lats) - min(lats)) * 0.05 + 1e-3
        pad_lng = (max(lngs) - min(lngs)) * 0.05 + 1e-3
        ax.set_xlim(min(lngs) - pad_lng, max(lngs) + pad_lng)
        ax.set_ylim(min(lats) - pad_lat, max(lats) + pad_lat)
        ax.set_aspect(1.0 / math.cos(math.radians((min(lats) + max(lats)) / 2)))
    ax.set_facecolor("#f3f3ef")
    ax.set_xlabel("longitude (°)")
    ax.set_ylabel("latitude (°)")
    bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, shrink=0.8)
    bar.set_label(f"released mean ({UNITS}); faded: larger ± mean_error")
    loss = window.get("privacy_loss")
    ax.set_title(
        f"{window['window_start']} · {_cells(len(cells))} covering it{_spans(window, cells)} · "
        f"U = {upper:g} {UNITS}" + (f" · K·ε = {loss:.2f}" if isinstance(loss, int | float) else "")
    )
    fig.tight_layout()
    fig.savefig(out, format="png")
    plt.close(fig)
