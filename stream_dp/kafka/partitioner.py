"""Kafka's default partitioner for vehicle-keyed records, as the offline engine emulates it."""

from __future__ import annotations

from aiokafka.partitioner import murmur2


def partition_for(vehicle_id: str, partitions: int) -> int:
    """Kafka's default partition of a vehicle-keyed record (murmur2, positive, mod n)."""
    return (murmur2(vehicle_id.encode()) & 0x7FFFFFFF) % partitions
