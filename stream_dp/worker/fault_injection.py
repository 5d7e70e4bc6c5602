"""Crash points for the release-once tests (``STREAM_DP_FAULT_INJECTION``; tests only).

``after-stored``: SIGKILL the worker right after a window's release is stored in the
release log, before it is published. ``after-published``: right after it is published.
Unset (always, in production) it does nothing.
"""

from __future__ import annotations

import os
import signal

ENV = "STREAM_DP_FAULT_INJECTION"


def crash_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
