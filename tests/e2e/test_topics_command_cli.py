"""`stream-dp topics` as a command: listing without a cluster, creating on one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.settings import service_settings

ROLES = 7  # six service topics and Faust's leader topic


def cli_topics(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_DP_")}
    return subprocess.run(
        [sys.executable, "-m", "stream_dp.cli", "topics", *args],
        env={**clean, **(env or {})}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_topics_lists_every_topic_without_a_cluster():
    done = cli_topics("--json", env={"STREAM_DP_PARTITIONS": "6"})
    assert done.returncode == 0, done.stderr
    topics = json.loads(done.stdout)["topics"]
    assert len(topics) == ROLES
    assert {t["name"]: t["partitions"] for t in topics}["stream-dp.readings"] == 6
    assert {t["replication_factor"] for t in topics} == {None}  # depends on the cluster
    text = cli_topics().stdout.splitlines()
    assert len(text) == ROLES and all("replication=min(3, brokers)" in line for line in text)


def test_create_needs_a_cluster():
    done = cli_topics("--create")
    assert done.returncode == 2 and "--create needs --bootstrap" in done.stderr


@pytest.mark.broker
def test_topics_create_makes_every_topic_on_the_cluster(kafka, topic_prefix):
    settings = service_settings(topic_prefix)
    env = {
        k: v
        for k, v in settings.to_env().items()
        if k.startswith(("STREAM_DP_TOPIC_", "STREAM_DP_APP_ID"))
    }
    first = cli_topics("--bootstrap", kafka.bootstrap_servers, "--create", "--json", env=env)
    assert first.returncode == 0, first.stderr
    topics = json.loads(first.stdout)["topics"]
    assert len(topics) == ROLES
    assert all(t["partitions_on_cluster"] == t["partitions"] for t in topics), topics
    assert {t["replication_factor"] for t in topics} == {1}  # one broker
    again = cli_topics("--bootstrap", kafka.bootstrap_servers, "--create", "--json", env=env)
    assert again.returncode == 0 and json.loads(again.stdout) == json.loads(first.stdout)
