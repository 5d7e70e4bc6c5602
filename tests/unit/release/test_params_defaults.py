"""ReleaseParams' defaults against the settings': a release built without a field runs as
the service does, except where the plain fixed-ε release is the point (below)."""

from __future__ import annotations

import os
from dataclasses import MISSING, Field, fields

import pytest

from stream_dp.config import Settings
from stream_dp.release.params import ReleaseParams

#: Fields whose ReleaseParams default is the plain fixed-ε, fixed-cell release on purpose
#: (the settings' defaults are the budgeted, targeted profile, which needs all three).
PLAIN_RELEASE = {"target_mean_error", "coarsest_resolution", "vehicle_budget"}

SHARED = [f for f in fields(ReleaseParams) if f.init and f.name in Settings.model_fields]


def test_every_release_field_is_a_setting() -> None:
    missing = {f.name for f in fields(ReleaseParams) if f.init} - set(Settings.model_fields)
    assert missing == set()


@pytest.fixture
def defaults(monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings with nothing set: no ``STREAM_DP_*`` variable, no file."""
    for name in [n for n in os.environ if n.startswith("STREAM_DP_")]:
        monkeypatch.delenv(name)
    return Settings()


@pytest.mark.parametrize("field", SHARED, ids=lambda f: f.name)
def test_a_default_is_the_settings_default(field: Field[object], defaults: Settings) -> None:
    setting = getattr(defaults, field.name)
    default = field.default if field.default is not MISSING else field.default_factory()
    if field.name in PLAIN_RELEASE:
        assert default is None and setting is not None
    else:
        assert default == setting, field.name
