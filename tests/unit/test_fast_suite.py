"""The README's test command (``python -m pytest -q``) is the fast suite: pyproject's
``addopts`` deselect the tests marked ``slow``, which ``.ci/run`` runs as well. No test file
is left with slow tests only, except the listed ones whose every test runs the whole
service, so the fast suite still reaches every part of the code."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]
TESTS = ROOT / "tests"
#: Files whose every test starts worker processes on a broker (or the demo) or builds and
#: installs the package: the code they drive has fast tests of its own (tests/unit/worker/,
#: tests/unit/commands/, tests/e2e/test_fresh_process.py).
ALL_SLOW = frozenset(
    {
        "tests/e2e/test_broker_outage.py",
        "tests/e2e/test_dashboard_browser.py",
        "tests/e2e/test_demo.py",
        "tests/e2e/test_ledger_backup.py",
        "tests/e2e/test_packaging.py",
        "tests/e2e/test_prometheus_scrape.py",
        "tests/e2e/test_secret_routes_demo.py",
        "tests/e2e/test_secret_routes_service.py",
        "tests/e2e/test_service_e2e.py",
        "tests/e2e/test_sigint_exit.py",
        "tests/e2e/test_span_restart.py",
        "tests/e2e/test_two_workers_stay_put.py",
        "tests/e2e/test_web_bind.py",
        "tests/e2e/test_worker_logs_e2e.py",
    }
)


def _marks_slow(node: ast.AST) -> bool:
    """Whether ``node`` (a decorator or a ``pytestmark`` value) holds ``pytest.mark.slow``."""
    return any(
        isinstance(n, ast.Attribute)
        and n.attr == "slow"
        and isinstance(n.value, ast.Attribute)
        and n.value.attr == "mark"
        for n in ast.walk(node)
    )


def _tests_of(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's test functions, its test classes' methods included."""
    found = []
    for node in tree.body:
        bodies = node.body if isinstance(node, ast.ClassDef) else [node]
        found += [
            f
            for f in bodies
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name.startswith("test")
        ]
    return found


def all_slow(source: str) -> bool:
    """Whether every test of a test module is marked ``slow`` (the module or each test)."""
    tree = ast.parse(source)
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            if _marks_slow(node.value):
                return True
    tests = _tests_of(tree)
    return bool(tests) and all(any(map(_marks_slow, t.decorator_list)) for t in tests)


def test_the_default_run_deselects_the_slow_tests() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert "-m 'not slow'" in options["ini_options"]["addopts"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "-m slow" in ci


def test_no_test_file_is_left_with_slow_tests_only_but_the_listed_ones() -> None:
    slow_only = {
        path.relative_to(ROOT).as_posix()
        for path in TESTS.rglob("test_*.py")
        if all_slow(path.read_text())
    }
    assert slow_only == ALL_SLOW


def test_the_check_reads_module_and_test_marks() -> None:
    assert all_slow("import pytest\npytestmark = [pytest.mark.broker, pytest.mark.slow]\n")
    both = "@pytest.mark.slow\ndef test_a(): ...\n\nclass TestB:\n    @pytest.mark.slow\n"
    assert all_slow(both + "    def test_c(self): ...\n")
    assert not all_slow(both + "    def test_c(self): ...\n\ndef test_d(): ...\n")
    assert not all_slow("pytestmark = pytest.mark.broker\ndef test_a(): ...\n")
    assert not all_slow("def helper(): ...\n")
