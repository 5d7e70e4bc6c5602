"""The allocator setting the worker and the offline release apply at start."""

from __future__ import annotations

import pytest

from stream_dp import allocator


def test_no_mallopt_is_a_no_op(monkeypatch):
    class NoMallopt:
        def __init__(self, name):
            pass

    monkeypatch.setattr(allocator.ctypes, "CDLL", NoMallopt)
    monkeypatch.setattr(allocator.sys, "platform", "linux")
    assert allocator.keep_freed_memory() is False


def test_other_systems_are_left_alone(monkeypatch):
    monkeypatch.setattr(allocator.sys, "platform", "darwin")
    assert allocator.keep_freed_memory() is False


@pytest.mark.parametrize("value, expected", [("false", False), ("true", True)])
def test_the_setting_can_turn_it_off(monkeypatch, value, expected):
    from stream_dp.config import load_settings

    monkeypatch.setenv("STREAM_DP_KEEP_FREED_MEMORY", value)
    assert load_settings().keep_freed_memory is expected
