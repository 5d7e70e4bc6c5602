"""Whether the broker answers and still holds the service's state: what the probes report.

:class:`BrokerHealth` is pure (fed times and findings); :func:`probe_broker` is the async
part, run once a second by the worker: a Metadata request over the producer's connection,
with a timeout. It finds

- *unreachable*: no answer for ``broker_unavailable_seconds`` → ``/readyz`` 503 (the worker
  cannot take or release anything); for ``stall_seconds`` → ``/healthz`` 503 and the worker
  exits non-zero (nothing can progress; a restart re-resolves the cluster);
- *state lost*: a service topic missing or with another partition count than it was
  created with (an empty broker came back: Tansu auto-creates topics with 4 partitions on
  the first Metadata request naming them), or an input partition whose confirmed end fell
  below what the worker had already applied → the worker stops releasing at once and exits
  non-zero with one line saying so: re-releasing from an empty log could publish a window
  the lost log had already published.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: Seconds a probe waits for the broker's answer.
PROBE_TIMEOUT_S = 2.0
#: Consecutive probes that must find the state lost before the worker gives up (one could
#: race a topic's creation at the very start).
LOST_CONFIRMATIONS = 2


@dataclass
class BrokerHealth:
    """What the probes found; times are monotonic seconds."""

    unavailable_after: float
    stall_after: float
    last_contact: float
    lost_findings: int = 0
    lost_reason: str | None = None

    def answered(self, now: float, lost: str | None) -> None:
        """A probe got an answer; ``lost`` says what is missing from the broker, if anything."""
        self.last_contact = now
        if lost is None:
            self.lost_findings = 0
            return
        self.lost_findings += 1
        if self.lost_findings >= LOST_CONFIRMATIONS and self.lost_reason is None:
            self.lost_reason = lost

    def input_lost(self, partitions: set[int]) -> None:
        """The ingest found input partitions whose confirmed end is below what it applied."""
        if partitions and self.lost_reason is None:
            self.lost_reason = (
                f"readings partitions {sorted(partitions)} end below offsets already applied"
            )

    def unreachable_for(self, now: float) -> float:
        return max(0.0, now - self.last_contact)

    def reachable(self, now: float) -> bool:
        """For ``/readyz``: the broker answered within ``broker_unavailable_seconds``."""
        return self.unreachable_for(now) <= self.unavailable_after

    def fatal(self, now: float) -> str | None:
        """Why no progress is possible (``/healthz`` fails, the worker exits), or None."""
        if self.lost_reason is not None:
            return f"the broker lost the service's state ({self.lost_reason})"
        if self.unreachable_for(now) > self.stall_after:
            return f"the broker has not answered for {self.unreachable_for(now):.0f} s"
        return None


def missing_state(
    expected: Mapping[str, int], found: Mapping[str, int | None], strict: set[str]
) -> str | None:
    """Compare the partition count of each expected topic with the broker's metadata
    (``found``: None = topic absent). Topics in ``strict`` must match exactly; the others only
    exist. Returns what is wrong, or None."""
    absent = sorted(name for name in expected if found.get(name) is None)
    if absent:
        return f"topics missing: {', '.join(absent)}"
    changed = sorted(
        f"{name} has {found[name]} partitions, created with {expected[name]}"
        for name in strict
        if name in expected and found.get(name) != expected[name]
    )
    return "; ".join(changed) or None


async def probe_broker(client: Any, expected: Mapping[str, int], strict: set[str]) -> str | None:
    """One Metadata round trip over ``client`` (an ``AIOKafkaClient``). Returns what is
    missing (see :func:`missing_state`) or None; raises when the broker does not answer."""
    metadata = await asyncio.wait_for(client.fetch_all_metadata(), PROBE_TIMEOUT_S)
    found: dict[str, int | None] = {}
    for name in expected:
        partitions = metadata.partitions_for_topic(name)
        found[name] = None if partitions is None else len(partitions)
    return missing_state(expected, found, strict)
