"""Shared fixtures: one real embedded Tansu broker per test session, unique topic names."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.embedded_broker import (
    EmbeddedBroker,
    EmbeddedBrokerError,
    resolve_broker_binary,
)


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """A started embedded broker shared by the session; skips when Tansu is unavailable.

    The broker keeps state in memory for the whole session: use :func:`topic_prefix` so
    tests never share topics or consumer groups.
    """
    try:
        resolve_broker_binary()
    except EmbeddedBrokerError as exc:
        pytest.skip(f"embedded Tansu broker unavailable: {exc}")
    with EmbeddedBroker() as started:
        yield started


@pytest.fixture
def kafka(broker: EmbeddedBroker) -> KafkaConnection:
    """A connection to the session broker, with the Tansu quirk overrides enabled."""
    return KafkaConnection(broker.bootstrap, embedded=True)


@pytest.fixture
def topic_prefix(request: pytest.FixtureRequest) -> str:
    """A prefix unique to this test, valid in Kafka topic and group names."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:80].strip("-.")
    return f"t.{name}.{uuid.uuid4().hex[:8]}"


# Fixtures that start (or need) the embedded broker: a test using any of them, directly or
# through another fixture, is a broker test whatever its module marks.
BROKER_FIXTURES = frozenset({"broker", "kafka", "tansu"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if BROKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.broker)
