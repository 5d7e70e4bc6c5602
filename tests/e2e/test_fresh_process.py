"""Behaviour only a fresh Python process shows: start-up imports, the allocator setting and
one-line errors."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from tests.support.readings import unclamped_readings

#: Top-level packages that ``stream-dp --help`` must not import (each costs a large part of a
#: second at start-up).
HEAVY = ("numba", "llvmlite", "faust", "matplotlib")


def test_the_allocator_setting_takes_on_glibc_linux_in_a_fresh_process():
    code = "from stream_dp.allocator import keep_freed_memory; print(keep_freed_memory())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert out.stdout.strip() == str(glibc)


def test_python_dash_m_cli_reports_a_bad_value_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_DP_")}
    env["STREAM_DP_EPSILON"] = "abc"
    source = tmp_path / "readings.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in unclamped_readings(10, seed=2)))
    done = subprocess.run(
        [sys.executable, "-m", "stream_dp.cli", "release", str(source), "--out", "o.jsonl"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stderr.startswith("stream-dp release: error: invalid setting epsilon (")
    assert "Traceback" not in done.stderr
    assert done.returncode == 2


#: Runs the command line with ARGS and, at exit, lists on stderr every module it imported
#: (``sys.modules``: ``-X importtime`` does not report ``importlib.import_module`` calls).
LIST_MODULES_AT_EXIT = (
    "import atexit, sys; "
    "atexit.register(lambda: print('\\n'.join(sys.modules), file=sys.stderr)); "
    "from stream_dp.cli import main; sys.exit(main())"
)


def _imported_by(*args: str) -> set[str]:
    """Every module a fresh ``stream-dp ARGS`` process imports."""
    done = subprocess.run(
        [sys.executable, "-c", LIST_MODULES_AT_EXIT, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "usage: stream-dp" in done.stdout
    imported = set(done.stderr.split())
    assert "stream_dp.cli" in imported  # the check reads the list at all
    return imported


@pytest.mark.parametrize(
    ("args", "command_modules"),
    [
        (["--help"], set()),
        (["plan", "-h"], {"plan"}),
        (["experiment", "clip-user", "-h"], {"experiment"}),
    ],
)
def test_help_imports_no_heavy_module_and_no_other_commands(
    args: list[str], command_modules: set[str]
) -> None:
    """``stream-dp --help`` lists the commands from the command line's table, ``stream-dp CMD
    -h`` builds CMD's parser alone: no heavy module (the compiled kernels, the Kafka worker,
    the plots load when a command runs), and no other command's module."""
    imported = _imported_by(*args)
    heavy = {name for name in imported if name.split(".")[0] in HEAVY}
    assert not heavy, sorted(heavy)
    commands = {
        name.split(".")[2]
        for name in imported
        if name.startswith("stream_dp.commands.") and name != "stream_dp.commands.shared"
    }
    assert commands == command_modules


def test_plan_loads_no_compiled_kernel_and_plans_as_the_kernels_do(
    tmp_path, capsys, monkeypatch
) -> None:
    """``stream-dp plan`` on one window's occupancy runs the numpy forms of the kernels
    (numba's import and cache cost more than the whole plan, benchmarks/plan_startup.py), on
    data where CLIP-USER suppresses pairs, and prints the plan the compiled kernels give."""
    from stream_dp.cli import main
    from stream_dp.dp import kernels
    from tests.unit.test_plan import write_occupancy

    path = write_occupancy(tmp_path / "occupancy.csv")
    args = ["plan", str(path), "--epsilon", "0.8", "--fixed-cells", "--json"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_DP_")}
    done = subprocess.run(
        [sys.executable, "-c", LIST_MODULES_AT_EXIT, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    imported = set(done.stderr.split())
    assert "stream_dp.dp.clip_user" in imported  # the plan ran CLIP-USER
    heavy = {name for name in imported if name.split(".")[0] in HEAVY}
    assert not heavy, sorted(heavy)
    for name in list(os.environ):
        if name.startswith("STREAM_DP_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(kernels, "use_compiled", lambda n_items: True)
    assert main(args) == 0
    compiled = json.loads(capsys.readouterr().out)
    assert compiled["suppressed"] and compiled["K"] < compiled["G1"]
    assert json.loads(done.stdout) == compiled
