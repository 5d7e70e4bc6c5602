"""`stream-dp experiment NAME --out DIR`: reproducible experiments of the papers."""

from __future__ import annotations

import argparse
import importlib

EXPERIMENT_MODULES = (
    "stream_dp.experiments.clip_user",
    "stream_dp.experiments.mean_estimators",
)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("experiment", help="reproduce the papers' experiments (plots + CSV)")
    names = parser.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    for module_name in EXPERIMENT_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        module.add_parser(names)
