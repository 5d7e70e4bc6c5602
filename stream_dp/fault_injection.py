"""Crash points for the release-once tests (``STREAM_DP_FAULT_INJECTION``; tests only).

``after-stored``: SIGKILL the worker right after a window's release is stored in the
release log, before it is published. ``after-published``: right after it is published.
``before-stored:PATH``: before storing the first window, create ``PATH.paused`` and wait
(without blocking the event loop) until ``PATH`` exists — a test can store a rival copy of
the window meanwhile. ``after-durable-batch:N``: SIGKILL the worker once its N-th ingest
batch's state is acknowledged, before that batch's offsets are committed (a kill in the
middle of ingestion). ``release-error:N``: raise :class:`InjectedReleaseError` inside the
release computation of the N-th window this process computes (offline or in the service;
the failed-window containment of :mod:`stream_dp.release.window` must absorb it). Around the
N-th state checkpoint of the process (:mod:`stream_dp.worker.checkpoints`):
``before-checkpoint:N`` (its windows' close records are durable, the checkpoint not
written), ``during-checkpoint:N`` (handed to the producer, killed a few milliseconds later
whether or not the broker has it), ``after-checkpoint:N`` (acknowledged; nothing after it
done). In ``stream-dp release``, once the N-th window's records are written (to the
temporary file, before it replaces ``--out``): ``release-written-error:N`` raises
:class:`InjectedReleaseError` out of the run, ``release-written-kill:N`` SIGKILLs it.
Unset (always, in production) it does nothing.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

ENV = "STREAM_DP_FAULT_INJECTION"


def crash_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


_calls: dict[str, int] = {}


def _count_reached(name: str) -> bool:
    """Count a call of the point ``name``: True on the N-th when the setting is ``name:N``."""
    value = os.environ.get(ENV, "")
    if not value.startswith(name + ":"):
        return False
    _calls[name] = _calls.get(name, 0) + 1
    return _calls[name] == int(value.split(":", 1)[1])


def crash_point_counted(name: str) -> None:
    """SIGKILL on the N-th call when the setting is ``name:N``."""
    if _count_reached(name):
        os.kill(os.getpid(), signal.SIGKILL)


class InjectedReleaseError(RuntimeError):
    """The failure ``release-error:N`` injects."""


def error_point_counted(name: str) -> None:
    """Raise :class:`InjectedReleaseError` on the N-th call when the setting is ``name:N``."""
    if _count_reached(name):
        raise InjectedReleaseError(f"fault injected at {name}")


async def crash_point_in_flight(name: str, delay: float = 0.005) -> None:
    """Like :func:`crash_point_counted`, but first lets the event loop run for ``delay``
    seconds (a record just sent is then on its way, its acknowledgement maybe not)."""
    if _count_reached(name):
        await asyncio.sleep(delay)
        os.kill(os.getpid(), signal.SIGKILL)


_paused: set[str] = set()


async def pause_point(name: str) -> None:
    value = os.environ.get(ENV, "")
    if not value.startswith(name + ":") or name in _paused:
        return
    _paused.add(name)  # once per process
    release = Path(value.split(":", 1)[1])
    Path(f"{release}.paused").touch()
    while not release.exists():
        await asyncio.sleep(0.05)
