"""The worker's HTTP server binds ``web_host``: loopback unless configured otherwise."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.e2e import service_harness
from tests.e2e.service_harness import create_topics, start_worker
from tests.support.settings import service_settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]

LISTEN = "0A"
LOOPBACK = {
    "0100007F",  # 127.0.0.1 in /proc/net/tcp (little-endian hex)
    "00000000000000000000000001000000",  # ::1 in /proc/net/tcp6
}


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """(hex address, port) of every listening TCP socket of process ``pid`` (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port = fields[1].split(":")
            if fields[3] == LISTEN and fields[9] in inodes:
                found.append((address, int(port, 16)))
    return found


def test_listening_addresses_parses_this_process(tmp_path):
    import socket

    with socket.socket() as loop, socket.socket() as anywhere:
        loop.bind(("127.0.0.1", 0))
        loop.listen()
        anywhere.bind(("0.0.0.0", 0))
        anywhere.listen()
        found = listening_addresses(os.getpid())
        assert ("0100007F", loop.getsockname()[1]) in found
        assert ("00000000", anywhere.getsockname()[1]) in found


@pytest.mark.parametrize("web_host", [None, "0.0.0.0"])
def test_a_default_worker_listens_on_loopback_only(kafka, topic_prefix, tmp_path, web_host):
    overrides = {} if web_host is None else {"web_host": web_host}
    settings = service_settings(topic_prefix, **overrides)
    create_topics(kafka, settings)
    worker = start_worker(kafka.bootstrap_servers, settings, tmp_path)
    try:
        worker.wait_ready()
        found = listening_addresses(worker.process.pid)
        bound = "0100007F" if web_host is None else "00000000"
        assert (bound, worker.web_port) in found, found
        if web_host is None:
            exposed = [(a, p) for a, p in found if a not in LOOPBACK]
            assert exposed == [], f"listening beyond loopback: {exposed}"
    finally:
        worker.stop()


def test_a_worker_whose_web_port_was_taken_before_it_bound_starts_on_another(
    kafka, topic_prefix, tmp_path, monkeypatch
):
    """On a shared machine another process may take the free port the harness chose before
    the worker binds it: the harness starts the worker again on another port."""
    settings = service_settings(topic_prefix)
    create_topics(kafka, settings)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1]])
        chosen = service_harness.free_loopback_port
        monkeypatch.setattr(service_harness, "free_loopback_port", lambda: next(ports, chosen()))
        worker = start_worker(kafka.bootstrap_servers, settings, tmp_path)
        try:
            worker.wait_ready()
            assert worker.web_port != taken.getsockname()[1]
            assert service_harness.PORT_TAKEN in worker.log_path.read_text(errors="replace")
        finally:
            worker.stop()
