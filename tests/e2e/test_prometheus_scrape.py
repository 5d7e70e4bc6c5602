"""A real Prometheus scrapes a worker and answers a budget query through its HTTP API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from stream_dp.kafka.embedded_broker import free_loopback_port
from tests.e2e.service_harness import create_topics, produce, start_worker, wait_for_windows
from tests.e2e.waiting import PATIENCE_S
from tests.support.readings import synthetic_readings
from tests.support.settings import service_settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed (CI installs Debian's prometheus)")
        pytest.skip("Debian package prometheus is not installed")
    return path


def query(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_prometheus_scrapes_the_privacy_budget(kafka, topic_prefix, tmp_path):
    binary = prometheus_binary()
    settings = service_settings(topic_prefix)
    create_topics(kafka, settings)
    worker = start_worker(kafka.bootstrap_servers, settings, tmp_path)
    prom_port = free_loopback_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: stream-dp\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{worker.web_port}']\n"
    )
    prom = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        worker.wait_ready()
        readings = synthetic_readings(n_vehicles=20, hours=2, per_hour=300, seed=21)
        produce(kafka, settings.topic_readings, readings)
        records = wait_for_windows(kafka, settings, expected=2, worker=worker)
        spent = sum(r["privacy_loss"] for r in records if r["type"] == "window")
        assert spent > 0
        result: list[dict] = []
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            try:
                result = query(prom_port, "stream_dp_privacy_budget_spent_epsilon_total")
            except OSError:
                result = []
            if result and float(result[0]["value"][1]) == pytest.approx(spent):
                break
            time.sleep(1)
        assert result, "Prometheus never scraped the budget metric"
        assert float(result[0]["value"][1]) == pytest.approx(spent)
        restored = query(prom_port, "max(stream_dp_privacy_budget_cumulative_epsilon)")
        assert float(restored[0]["value"][1]) == pytest.approx(spent)
        info = query(prom_port, "stream_dp_info")
        assert info and info[0]["metric"]["epsilon"] == repr(settings.epsilon)
        up = query(prom_port, 'up{job="stream-dp"}')
        assert float(up[0]["value"][1]) == 1.0
    finally:
        prom.terminate()
        prom.wait(timeout=10)
        worker.stop()
