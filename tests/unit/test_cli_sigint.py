"""SIGINT stops every command, also one started with SIGINT ignored (a shell script's
background job): the CLI puts Python's handler back, so the command ends as Ctrl-C ends it."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from stream_dp.cli import main


@pytest.fixture
def sigint_ignored() -> Iterator[None]:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.usefixtures("sigint_ignored")
def test_a_command_started_with_sigint_ignored_is_stopped_by_it() -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_handler_the_command_inherits_is_left_alone() -> None:
    def own(*_: object) -> None: ...

    before = signal.signal(signal.SIGINT, own)
    try:
        with pytest.raises(SystemExit):
            main(["--version"])
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, before)
