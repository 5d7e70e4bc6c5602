"""When a quiet input partition may be treated as idle (its open windows force-closed).

Pure: no Kafka, and the decision reads no clock. The ingest's timer
(:meth:`~stream_dp.worker.ingest.IngestProcessor.tick`) observes each partition once a
second and calls :func:`decide_idle` with what the consumer last heard from
the broker. The rule is evidence-based: a partition is idle only when the broker itself has
kept confirming, by successful fetches without a break, for ``idle_close_seconds``, that
nothing more is there. A broker that is unreachable (no fetch answered), a failed fetch, or
a high watermark remembered from before an outage confirms nothing, so it never closes a
window: readings produced during an outage arrive afterwards and are counted, not late. That
holds too when no observation fell inside the outage (the timer itself waited on the broker
through it): two confirmations further apart than :func:`unseen_limit` restart the span.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

#: A partition whose input is fetched but not all applied (offsets without records, such as
#: transaction markers, or fetched records still queued in Faust) is idle after this many
#: times ``idle_close_seconds`` of confirmed quiet.
FETCHED_FACTOR = 3
#: A partition confirmed quiet this many times ``idle_close_seconds`` is idle whatever its
#: offsets say (an end that can never be reached, e.g. expired input, must not hold every
#: release back for ever). The broker must still be answering.
STALE_FACTOR = 10
#: Longest gap between two fetch confirmations, as a fraction of ``idle_close_seconds``
#: (and never more than ``MAX_CONFIRM_GAP_S``): a longer gap is an outage and restarts the
#: quiet span. A caught-up consumer is answered every fetch wait (0.5 s by default).
CONFIRM_GAP_FRACTION = 0.5
MAX_CONFIRM_GAP_S = 2.0
#: How often the ingest's timer observes each partition (seconds).
TICK_SECONDS = 1.0


class InputState(NamedTuple):
    """What an ingest consumer reports about one input partition (None: not known):
    the high watermark of the last successful fetch, the consumer's position, and how many
    seconds ago that fetch succeeded."""

    end: int | None
    position: int | None
    fetched_age: float | None


UNKNOWN_INPUT = InputState(None, None, None)


def input_state_from(
    end: int | None, position: int | None, stamped_ms: int | None, wall_now: float | None = None
) -> InputState:
    """An :class:`InputState` from aiokafka's per-partition fetch state: ``stamped_ms`` is
    the wall-clock time (ms) of the last successful Fetch of the partition
    (``last_poll_timestamp``); ``wall_now`` defaults to ``time.time()``."""
    if stamped_ms is None:
        return InputState(end, position, None)
    wall_now = time.time() if wall_now is None else wall_now
    return InputState(end, position, max(0.0, wall_now - stamped_ms / 1000.0))


@dataclass(frozen=True)
class InputObservation:
    """What the consumer knows about one input partition at ``now`` (monotonic seconds).

    ``fetched_at``: when a fetch of the partition last succeeded (None: never, or unknown);
    ``end``: the high watermark that fetch reported; ``position``: the consumer's position
    (next offset it hands out); ``applied_next``: one past the last input offset whose
    effect is in the partition's state; ``last_applied_at``: when readings were last applied.
    """

    now: float
    fetched_at: float | None
    end: int | None
    position: int | None
    applied_next: int
    last_applied_at: float


@dataclass(frozen=True)
class IdleDecision:
    """The verdict, and the start of the confirmed-quiet span to carry to the next call."""

    idle: bool
    quiet_since: float | None
    #: The broker confirmed an end below what this partition already applied: its log was
    #: lost or truncated (e.g. an empty broker came back). Never idle; the caller reports it.
    input_lost: bool = False
    #: The confirmation this decision read (None: none fresh), to carry to the next call.
    confirmed_at: float | None = None


def confirm_gap(idle_close_seconds: float) -> float:
    """The longest gap between fetch confirmations that still counts as one quiet span."""
    return min(idle_close_seconds * CONFIRM_GAP_FRACTION, MAX_CONFIRM_GAP_S)


def unseen_limit(idle_close_seconds: float) -> float:
    """The longest time between the confirmations two successive observations read that
    still counts as quiet: the freshness allowed at each (:func:`confirm_gap`) plus one
    tick. Longer, and no observation saw what the broker did in between (the observer was
    held up, e.g. waiting on a paused broker), so the span restarts."""
    return confirm_gap(idle_close_seconds) + TICK_SECONDS


def decide_idle(
    obs: InputObservation,
    quiet_since: float | None,
    idle_close_seconds: float,
    last_confirmed_at: float | None = None,
) -> IdleDecision:
    """Idle iff, for ``idle_close_seconds`` (``FETCHED_FACTOR``/``STALE_FACTOR`` times that
    for the weaker evidence), every observation found a fresh fetch confirmation showing the
    partition's input all applied, and nothing was applied meanwhile.

    ``quiet_since`` and ``last_confirmed_at`` are the previous decision's ``quiet_since``
    and ``confirmed_at`` (None at first): the first fresh confirmation starts the span, a
    stale or missing confirmation ends it, a confirmation more than :func:`unseen_limit`
    after the previous one restarts it, readings applied restart it. The span counts up to
    the latest confirmation, not to ``now``: the moments since then are not confirmed yet.
    """
    fresh = obs.fetched_at is not None and obs.now - obs.fetched_at <= confirm_gap(
        idle_close_seconds
    )
    if not fresh or obs.end is None:
        return IdleDecision(False, None)
    if obs.end < obs.applied_next:
        return IdleDecision(False, None, input_lost=True, confirmed_at=obs.fetched_at)
    applied_all = obs.end <= obs.applied_next
    fetched_all = obs.position is not None and obs.position >= obs.end
    confirmed_at = obs.fetched_at
    assert confirmed_at is not None  # fresh
    unseen = last_confirmed_at is not None and confirmed_at - last_confirmed_at > unseen_limit(
        idle_close_seconds
    )
    start = confirmed_at if quiet_since is None or unseen else quiet_since
    since = max(start, obs.last_applied_at)
    quiet = confirmed_at - since  # confirmed by the broker, not merely elapsed
    idle = (
        (applied_all and quiet >= idle_close_seconds)
        or (fetched_all and quiet >= idle_close_seconds * FETCHED_FACTOR)
        or quiet >= idle_close_seconds * STALE_FACTOR
    )
    return IdleDecision(idle, since, confirmed_at=confirmed_at)
