"""Python code run in a child process that can import only what ``pip install .`` brings:
stream-dp's own dependencies (pyproject's ``dependencies``, no extra) and theirs. Every other
distribution installed here (the tests' extras: SciPy, matplotlib, PyYAML, ...) fails to
import, as on a fresh machine, so a missing dependency fails here instead of hiding behind
the test environment.

The child compiles every numba kernel afresh (an empty ``NUMBA_CACHE_DIR``): a kernel loaded
from a cache compiled where SciPy was importable would not ask for it again."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parents[2]

#: The installer's own modules, which a fresh venv may hold beside the dependencies.
INSTALLER_MODULES = frozenset({"pip", "setuptools", "pkg_resources", "_distutils_hack", "wheel"})


def _applies(requirement: str) -> str | None:
    """The name ``requirement`` brings here, or None: its marker evaluated for this Python
    with no extra (a requirement of an extra, or for another platform, brings nothing)."""
    parsed = Requirement(requirement)
    if parsed.marker is not None and not parsed.marker.evaluate({"extra": ""}):
        return None
    return parsed.name


def runtime_distributions() -> set[str]:
    """The normalised names of stream-dp and every distribution its ``dependencies`` in
    pyproject.toml (the source, not a possibly stale installation's metadata) bring,
    recursively, among those installed."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    seen = {canonicalize_name(project["name"])}
    todo = [name for r in project["dependencies"] if (name := _applies(r)) is not None]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError as exc:  # pip install . would have installed it
            raise AssertionError(f"{name}, a runtime dependency, is not installed here") from exc
        seen.add(name)
        todo += [n for r in requires if (n := _applies(r)) is not None]
    return seen


def blocked_modules() -> list[str]:
    """The top-level modules installed here that no runtime distribution provides (a name
    two distributions share is allowed if either is a runtime one)."""
    allowed = runtime_distributions()
    blocked = []
    for module, distributions in metadata.packages_distributions().items():
        if module in INSTALLER_MODULES or module.startswith("__"):
            continue
        if not {canonicalize_name(d) for d in distributions} & allowed:
            blocked.append(module)
    return sorted(blocked)


_PRELUDE = """
import sys
_BLOCKED = frozenset({blocked!r})
class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not a dependency of stream-dp)")
        return None
sys.meta_path.insert(0, _NotInstalled())
"""


def run_runtime_only(
    code: str, scratch: Path, timeout: float = 600.0, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child Python that can import only the runtime distributions, with
    an empty numba cache under ``scratch``."""
    blocked = blocked_modules()
    env = {**os.environ, "NUMBA_CACHE_DIR": str(scratch / "numba-cache"), "NUMBA_DISABLE_JIT": "0"}
    return subprocess.run(
        [sys.executable, "-c", _PRELUDE.format(blocked=blocked) + code],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
    )  # fmt: skip
