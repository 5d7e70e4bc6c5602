"""`stream-dp plan` (placeholder until implemented)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("plan", help="(not implemented yet)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    raise SystemExit("stream-dp plan: not implemented yet")
