"""The demo's legend writes the variance's unit as (km/h)² (issue 34 item 7)."""

from __future__ import annotations

from stream_dp.commands.demo import _legend
from stream_dp.config import load_settings


def test_the_variance_unit_is_km_per_h_squared() -> None:
    legend = _legend(load_settings())
    assert "variance error ((km/h)²)" in legend and "^2" not in legend
