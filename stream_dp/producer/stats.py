"""Counters of one replay run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ProduceStats:
    """Readings and messages sent (all acknowledged once a run returns) and its seconds."""

    readings: int = 0
    messages: int = 0
    seconds: float = 0.0

    @property
    def readings_per_second(self) -> float:
        return self.readings / self.seconds if self.seconds > 0 else 0.0

    def summary(self, topic: str) -> str:
        """One line: what was produced, where, and how fast."""
        return (
            f"produced {self.readings} readings in {self.messages} messages to {topic} "
            f"in {self.seconds:.2f} s ({self.readings_per_second:,.0f} readings/s)"
        )
