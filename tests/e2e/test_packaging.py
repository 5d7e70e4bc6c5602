"""The wheel a user installs: small, with the licence, the sample week and its notice, and
no plotting or 279 MB sample-data package among a worker's dependencies, and none of the
tests' helpers (test oracles, ``NoNoise``)."""

from __future__ import annotations

import email.parser
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
MAX_WHEEL_BYTES = 10 * 1024 * 1024


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.fail(f"pip wheel failed:\n{done.stderr[-3000:]}")
    (built,) = out.glob("stream_dp-*.whl")
    return built


@pytest.mark.slow
def test_wheel_is_small_and_carries_licence_data_and_notice(wheel: Path) -> None:
    assert wheel.stat().st_size <= MAX_WHEEL_BYTES
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    assert "stream_dp/data/nyharbor_2020-12_week.traj.gz" in names
    assert "stream_dp/data/NOTICE.md" in names
    assert "stream_dp/__main__.py" in names


@pytest.mark.slow
def test_wheel_metadata_licence_pythons_and_slim_dependencies(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (meta_name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        meta = email.parser.Parser().parsestr(archive.read(meta_name).decode())
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Requires-Python"] == ">=3.11"
    classifiers = meta.get_all("Classifier")
    for version in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    always = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    names = {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in always}
    assert {"faust-streaming", "aiokafka", "numpy", "pydantic", "prometheus-client", "h3"} <= names
    assert not names & {"matplotlib", "tracktable-data", "pyyaml", "pytest"}
    extras = meta.get_all("Provides-Extra")
    assert {"plot", "experiments", "test"} <= set(extras)


#: The test-only helpers (``tests/support/``): test oracles, reference transcriptions and
#: ``NoNoise``, a noise that releases exact values; none of them may reach an installation.
TEST_ONLY_MODULES = (
    "clip_user_reference",
    "clip_user_strategies",
    "membership",
    "noise_free",
    "vehicle_budget_reference",
)


@pytest.mark.slow
def test_wheel_carries_no_test_helpers(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        sources = {n: archive.read(n).decode() for n in names if n.endswith(".py")}
    assert not [n for n in names if n.startswith(("stream_dp/testing/", "tests/"))], names
    assert not {Path(n).stem for n in sources} & set(TEST_ONLY_MODULES)
    assert not [n for n, text in sources.items() if "class NoNoise" in text]
