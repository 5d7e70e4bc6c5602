"""Installs the stand-in span policy (tests/e2e/span_stub.py) in a worker subprocess."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.e2e.span_stub import install_from_env  # noqa: E402

install_from_env()
