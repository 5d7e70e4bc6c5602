"""The README's demo claims, generated: what ``stream-dp demo --hours 6`` releases, the live
map's caption and the Output section's sample records.

Each claim runs through the offline engine (``stream-dp release``'s, the same windows and
release as the service) with the demo's own settings (its parser and defaults, any
``STREAM_DP_*`` variable ignored) and seeded noise, so the same code gives the same text.
The cells, their ε and the vessels' losses depend only on the public occupancy and the
ledger; the seed fixes only the noisy means. The README's blocks between
``<!-- generated:NAME -->`` and ``<!-- /generated -->`` are rewritten; ``--check`` rewrites
nothing and exits 1 when a block differs (after a change of the release or the demo's
defaults, run ``python benchmarks/readme_samples.py`` and commit the README).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import stream_dp.release.window as release_window
from stream_dp.commands import demo
from stream_dp.config import ENV_PREFIX, Settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine
from stream_dp.kafka.embedded_broker import free_loopback_port
from stream_dp.release.records import WindowRelease

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' DevTools client drives the browser (--figure)
from tests.e2e.cdp_browser import Browser  # noqa: E402

README = ROOT / "README.md"
FIGURE = "docs/dashboard-map.png"
#: Noise seed of every generated release (a sample, never a release to publish).
SEED = 34
#: The short replay the README's quick start describes (``stream-dp demo --hours 6``).
DEMO_HOURS = 6
#: The release ids derive from a per-release random nonce; a fixed one keeps them stable.
FIXED_NONCE = "readme-sample"
BLOCK = re.compile(r"(<!-- generated:([\w-]+) -->\n)(.*?)(<!-- /generated -->)", re.DOTALL)
#: Values on the 1/128 grid (docs/math.md §13), printed exactly; other floats are rounded.
EXACT = frozenset({"epsilon", "privacy_loss", "privacy_loss_unclipped", "max_vehicle_loss"})
#: The window summary's fields the sample shows (the rest: docs/output.md).
SUMMARY_FIELDS = (
    "type", "schema_version", "status", "window_start", "window_end", "G1", "K",
    "privacy_loss", "cells_released", "cells_withheld", "readings_withheld",
    "vehicle_budget", "max_vehicle_loss", "target_mean_error", "error",
)  # fmt: skip
WIDTH = 95


@dataclass(frozen=True)
class Window:
    """One released window: its summary and the cell records released with it."""

    summary: dict[str, Any]
    cells: list[dict[str, Any]]


def demo_settings(argv: list[str]) -> Settings:
    """The settings ``stream-dp demo ARGV`` runs with (its own parser and defaults)."""
    parser = argparse.ArgumentParser(prog="stream-dp")
    demo.register(parser.add_subparsers())
    return demo.demo_settings(parser.parse_args(["demo", *argv]))


def released_windows(settings: Settings, readings: list[dict[str, Any]]) -> list[Window]:
    """Every window the offline engine releases from ``readings``, in order (seeded)."""
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(SEED)))
    releases: list[WindowRelease] = [
        release for batch in (engine.feed(readings), engine.finish()) for release in batch
    ]
    return [
        Window(
            next(r for r in release.records if r["type"] == "window"),
            [r for r in release.records if r["type"] == "cell"],
        )
        for release in releases
    ]


def _time(rfc3339: str) -> str:
    """``2020-12-03T15:00:00Z`` → ``2020-12-03 15:00``."""
    return rfc3339[:16].replace("T", " ")


def _cell_words(cell: dict[str, Any]) -> str:
    return (
        f"the resolution-{cell['resolution']} cell `{cell['cell']}` ({cell['n_vehicles']} "
        f"vessels, ε {cell['epsilon']:.2f})"
    )


def demo_hours_block(hours: int = DEMO_HOURS) -> str:
    """What ``stream-dp demo --hours N --keep-running`` replays and releases."""
    readings = demo.replayed_readings(hours)
    windows = released_windows(demo_settings(["--hours", str(hours)]), readings)
    first = _time(windows[0].summary["window_start"])
    end = _time(windows[-1].summary["window_end"])[-5:]
    releasing = [w for w in windows if w.cells]
    text = (
        f"`stream-dp demo --hours {hours} --keep-running` replays {first}–{end} UTC "
        f"({len(readings):,} readings) and leaves the map up: "
    )
    if not releasing:
        return _wrapped(text + "no cell meets the target, so it releases nothing.")
    parts = []
    for window in releasing:
        cells = window.cells
        spans = {(c["window_start"], c["window_end"]) for c in cells}
        pooled = (
            f" pooled over {_time(cells[0]['window_start'])[-5:]}–"
            f"{_time(cells[0]['window_end'])[-5:]}"
            if len(spans) == 1 and cells[0]["window_start"] != window.summary["window_start"]
            else ""
        )
        parts.append(
            f"the window {_time(window.summary['window_start'])[-5:]} releases "
            f"{_count(len(cells), 'cell')}{pooled}: " + " and ".join(map(_cell_words, cells))
        )
    return _wrapped(
        text + "; ".join(parts) + ". A cell's ε is the most any vessel in it loses there "
        "(each pays its own share)."
    )


def _wrapped(text: str) -> str:
    """A paragraph wrapped at :data:`WIDTH` columns, as the README is."""
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False) + "\n"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _map_window(windows: list[Window]) -> Window:
    """The week's window with the most released cells (the earliest of those)."""
    ranked = [(len(w.cells), -i, w) for i, w in enumerate(windows) if w.cells]
    return max(ranked, key=lambda entry: entry[:2])[2]


@functools.cache
def week_windows() -> list[Window]:
    """The whole bundled week, released with the demo's settings (once per process)."""
    return released_windows(demo_settings([]), demo.replayed_readings(None))


def map_caption_block(windows: list[Window]) -> str:
    """The live map's caption: the week's window with the most cells, as the demo shows it."""
    window = _map_window(windows)
    start = window.summary["window_start"]
    cells = "; ".join(
        f"resolution {c['resolution']} `{c['cell']}`, {_time(c['window_start'])[-5:]}–"
        f"{_time(c['window_end'])[-5:]}: {c['mean']:.2f} ± {c['mean_error']:.2f} km/h "
        f"(ε {c['epsilon']:.2f})"
        for c in window.cells
    )
    resolutions = ", ".join(str(c["resolution"]) for c in window.cells)
    return (
        f"![The map of stream-dp demo --keep-running, window {_time(start)}: "
        f"{_count(len(window.cells), 'cell')} (resolution {resolutions}) coloured by released "
        f"mean, the budget panel and the legend]({FIGURE})\n\n"
    ) + _wrapped(
        "*The map `stream-dp demo --keep-running` serves (the demo's per-vehicle budget "
        "profile), drawn by headless Chromium from the week released offline with the demo's "
        f"settings (`stream-dp dashboard --releases-file`), window {_time(start)} "
        f"(`/dashboard#window={start}`): "
        f"{_count(len(window.cells), 'cell')} pooled over the hours shown to meet the "
        f"{window.summary['target_mean_error']:g} km/h target ({cells}). The means are from "
        "seeded noise (a live run draws its own): `python benchmarks/readme_samples.py "
        "--figure` writes this text and the figure.*"
    )


def _rounded(key: str, value: Any) -> Any:
    if isinstance(value, float) and key not in EXACT:
        return round(value, 2)
    return value


def record_lines(record: dict[str, Any], keys: tuple[str, ...] | None = None) -> list[str]:
    """``record`` as JSON wrapped at :data:`WIDTH` between fields (only ``keys``, then
    ``…``, when given)."""
    shown = keys if keys is not None else tuple(record)
    items = [f"{json.dumps(k)}: {json.dumps(_rounded(k, record[k]))}" for k in shown]
    if keys is not None:
        items.append("…")
    lines, line = [], "{"
    for i, item in enumerate(items):
        piece = item + ("}" if i == len(items) - 1 else ",")
        if len(line) + len(piece) + 1 > WIDTH and line not in ("{", " "):
            lines.append(line)
            line = " "
        line += piece if line in ("{", " ") else " " + piece
    return [*lines, line]


def output_sample_block(windows: list[Window]) -> str:
    """A cell record and the summary of the map's window, as ``stream-dp release`` writes."""
    window = _map_window(windows)
    lines = [
        *record_lines(window.cells[0]),
        *record_lines(window.summary, SUMMARY_FIELDS),
    ]
    intro = _wrapped(
        f"Window {_time(window.summary['window_start'])} of the bundled week (`stream-dp "
        "release` with the demo's settings, seeded noise; numbers rounded, the summary "
        "shortened):"
    )
    return intro + "\n```\n" + "\n".join(lines) + "\n```\n"


def write_figure(windows: list[Window], out: Path) -> None:
    """The live map of the caption's window, as headless Chromium draws it: ``stream-dp
    dashboard`` serving the week's seeded release from a file."""
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    if browser is None:
        raise SystemExit("--figure needs Chromium (Debian package chromium)")
    start = _map_window(windows).summary["window_start"]
    port = free_loopback_port()
    with tempfile.TemporaryDirectory() as tmp:
        releases = Path(tmp) / "releases.jsonl"
        releases.write_text(
            "".join(json.dumps(r) + "\n" for w in windows for r in [*w.cells, w.summary])
        )
        command = [sys.executable, "-m", "stream_dp", "dashboard", "--releases-file",
                   str(releases), "--web-port", str(port)]  # fmt: skip
        dashboard = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}/dashboard"
            _wait_until_served(url, dashboard)
            with Browser(browser) as page:
                page.navigate(f"{url}#window={start}")
                page.wait_for(f"document.body?.dataset.renderedWindow === {start!r}", 120)
                page.screenshot(out)
        finally:
            dashboard.terminate()
            dashboard.wait(timeout=30)


def _wait_until_served(url: str, process: subprocess.Popen[bytes], limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except (urllib.error.URLError, OSError):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"stream-dp dashboard did not serve {url}") from None
            time.sleep(0.2)


def generated_blocks() -> dict[str, Callable[[], str]]:
    """Each marked block's name and what writes it."""
    return {
        "demo-hours-6": demo_hours_block,
        "live-map-caption": lambda: map_caption_block(week_windows()),
        "output-sample": lambda: output_sample_block(week_windows()),
    }


def rewrite(text: str, blocks: dict[str, Callable[[], str]]) -> str:
    """``text`` with each marked block's body replaced; a marker without a writer, or a writer
    without a marker, is an error."""
    named = {match.group(2) for match in BLOCK.finditer(text)}
    if named != set(blocks):
        raise SystemExit(
            f"README markers {sorted(named)} do not match the generated blocks {sorted(blocks)}"
        )
    return BLOCK.sub(lambda m: m.group(1) + blocks[m.group(2)]() + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the README differs")
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument(
        "--figure", action="store_true", help=f"also draw {FIGURE} (needs Chromium)"
    )
    args = parser.parse_args(argv)
    for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
        del os.environ[name]  # the demo's settings, whatever this shell configures
    release_window.new_release_nonce = lambda: FIXED_NONCE  # type: ignore[assignment]
    text = args.readme.read_text()
    new = rewrite(text, generated_blocks())
    if args.check:
        if new != text:
            print(f"{args.readme}: generated blocks out of date; run {Path(__file__).name}")
            return 1
        return 0
    args.readme.write_text(new)
    if args.figure:
        write_figure(week_windows(), ROOT / FIGURE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
