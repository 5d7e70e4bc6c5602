"""Shared fixtures and markers.

The directory says a test's kind, and each gets its marker here: ``tests/unit/`` (``unit``:
pure, no broker, no subprocess), ``tests/integration/`` (``integration``: the embedded broker
in process), ``tests/e2e/`` (``e2e``: subprocesses and external tools). A test that uses a
broker fixture, or lives in ``integration/``, is also marked ``broker``, so ``-m "not broker"``
starts none. One real embedded Tansu broker serves the whole session; topic names are unique.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

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


TESTS = Path(__file__).parent
KINDS = ("unit", "integration", "e2e")

# Fixtures that start (or need) an embedded broker: a test using any of them, directly or
# through another fixture, is a broker test whatever its module marks.
BROKER_FIXTURES = frozenset({"broker", "kafka", "tansu", "relayed"})


def test_kind(path: Path) -> str | None:
    """``unit``, ``integration`` or ``e2e``: the first directory under tests/."""
    parts = path.relative_to(TESTS).parts
    return parts[0] if len(parts) > 1 and parts[0] in KINDS else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        kind = test_kind(Path(item.path))
        uses_broker = bool(BROKER_FIXTURES & set(getattr(item, "fixturenames", ())))
        if kind == "unit" and uses_broker:
            raise pytest.UsageError(f"{item.nodeid}: a unit test must not use a broker")
        if kind is not None:
            item.add_marker(getattr(pytest.mark, kind))
        if kind == "integration" or uses_broker:
            item.add_marker(pytest.mark.broker)


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In tests/unit/ starting Python or a program of ours is an error: such a test belongs in
    tests/e2e/ (libraries probing the platform, e.g. ``file -b``, are left alone)."""
    if test_kind(Path(request.node.path)) != "unit":
        return
    popen_init = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen, args: object, *rest: object, **kwargs: object) -> None:
        program = str(args[0] if isinstance(args, list | tuple) else args).split()[0]
        if Path(program).name.startswith(("python", "stream-dp", "tansu", "kcat", "promtool")):
            raise AssertionError(f"a unit test runs no {program}: move it to tests/e2e/")
        popen_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)
