"""`stream-dp produce` (placeholder until implemented)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("produce", help="(not implemented yet)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    raise SystemExit("stream-dp produce: not implemented yet")
