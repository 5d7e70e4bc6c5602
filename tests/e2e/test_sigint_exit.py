"""Issue 34 item 7: SIGINT ends `serve` and `demo` the same way (exit status 130 and one
final line), and `serve` logs its HTTP address once, with Faust's start-up chatter at DEBUG."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from stream_dp.cli import INTERRUPTED
from stream_dp.kafka.embedded_broker import (
    EmbeddedBrokerError,
    free_loopback_port,
    resolve_broker_binary,
)
from tests.e2e.service_harness import sigint_as_by_default

#: Starts the embedded broker, ``serve`` and the demo: the slow suite.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interrupted(
    args: list[str], ready: str, inherited: Callable[[], None] = sigint_as_by_default
) -> tuple[int, list[str]]:
    """``stream-dp ARGS`` stopped by SIGINT once it printed a line holding ``ready``: its exit
    status and every line it printed (stdout and stderr); ``inherited`` sets the SIGINT
    disposition it starts with."""
    try:
        resolve_broker_binary()
    except EmbeddedBrokerError as exc:
        pytest.skip(f"embedded Tansu broker unavailable: {exc}")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("STREAM_DP_")}
    command = subprocess.Popen(
        [sys.executable, "-m", "stream_dp", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its broker and worker can be stopped with it
        preexec_fn=inherited,
    )
    assert command.stdout is not None
    try:
        shown = []
        for line in command.stdout:  # waits for the line, not for a time
            shown.append(line.rstrip("\n"))
            if ready in line:
                break
        assert ready in shown[-1], shown
        command.send_signal(signal.SIGINT)
        rest, _ = command.communicate(timeout=120)
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
            command.wait()
    return command.returncode, shown + rest.splitlines()


@pytest.mark.timeout(300)
def test_serve_and_demo_stop_the_same_way_on_sigint() -> None:
    port = free_loopback_port()
    address = f"HTTP: http://127.0.0.1:{port} "
    serve_status, serve_lines = _interrupted(["serve", "--web-port", str(port)], address)
    demo_status, demo_lines = _interrupted(
        ["demo", "--hours", "1", "--web-port", str(free_loopback_port())], "dashboard: http://"
    )
    assert serve_status == demo_status == 130
    assert serve_lines[-1] == demo_lines[-1] == INTERRUPTED

    assert len([line for line in serve_lines if "HTTP: http://" in line]) == 1
    chatter = [line for line in serve_lines if "[INFO] faust." in line or "[INFO] mode." in line]
    assert chatter == [], chatter[:3]


@pytest.mark.timeout(300)
def test_the_demo_started_with_sigint_ignored_still_stops_on_it() -> None:
    """As a shell script's background job starts it: ``serve``'s worker handles SIGINT
    whatever it inherited, and the demo must stop as it does."""
    status, lines = _interrupted(
        ["demo", "--hours", "1", "--web-port", str(free_loopback_port())],
        "dashboard: http://",
        _sigint_ignored,
    )
    assert status == 130
    assert lines[-1] == INTERRUPTED
