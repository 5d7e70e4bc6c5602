"""`stream-dp serve` (placeholder until implemented)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("serve", help="(not implemented yet)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    raise SystemExit("stream-dp serve: not implemented yet")
