"""``--clock-start`` / ``--clock-speed``: the declared replay clock of ``serve`` and ``demo``
(secret routes, docs/math.md §14.7; settings ``clock_start``, ``clock_speed``)."""

from __future__ import annotations

import argparse

#: The settings the options set (read by ``settings_from_args``).
CLOCK_SETTINGS = ("clock_start", "clock_speed")


def add_clock_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("replay clock (secret-routes only; docs/math.md §14.7)")
    group.add_argument(
        "--clock-start",
        metavar="TIME",
        help="the public clock starts here (RFC 3339 or epoch seconds) when the worker starts, "
        "to replay old data (default none: the wall clock)",
    )
    group.add_argument(
        "--clock-speed",
        metavar="X",
        help="replay clock seconds per real second, > 0 (default 1; needs --clock-start)",
    )
