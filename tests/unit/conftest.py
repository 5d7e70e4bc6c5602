"""Fixtures of the unit tests."""

from __future__ import annotations

import pytest

from stream_dp.config import load_settings
from stream_dp.dp.noise import LaplaceNoise


@pytest.fixture
async def worker_web(tmp_path):
    """A worker's Faust app (never started: no broker) and a client of its web pages."""
    from aiohttp.test_utils import TestClient, TestServer

    from stream_dp.kafka.connection import KafkaConnection
    from stream_dp.worker.app import build_app

    settings = load_settings(data_dir=tmp_path / "data", app_id="health-test")
    app = build_app(settings, KafkaConnection("127.0.0.1:1"), LaplaceNoise())
    async with TestClient(TestServer(app.web.web_app)) as client:
        yield app.stream_dp_runtime, client
