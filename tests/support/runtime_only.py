"""Python code run in a child process that can import only what ``pip install .`` brings:
stream-dp's own dependencies (pyproject's ``dependencies``, no extra) and theirs. Every other
distribution installed here (the tests' extras: SciPy, matplotlib, PyYAML, ...) fails to
import, as on a fresh machine, so a missing dependency fails here instead of hiding behind
the test environment.

The child compiles every numba kernel afresh (an empty ``NUMBA_CACHE_DIR``): a kernel loaded
from a cache compiled where SciPy was importable would not ask for it again."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

#: The installer's own modules, which a fresh venv may hold beside the dependencies.
INSTALLER_MODULES = frozenset({"pip", "setuptools", "pkg_resources", "_distutils_hack", "wheel"})

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_distributions(root: str = "stream-dp") -> set[str]:
    """The normalised names of ``root`` and every distribution its requirements (without an
    ``extra`` marker) bring, recursively, among those installed."""
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = _normal(todo.pop())
        if name in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed here: nothing of it to allow
        seen.add(name)
        for requirement in requires:
            if "extra ==" in requirement:
                continue
            match = _NAME.match(requirement)
            if match:
                todo.append(match.group(1))
    return seen


def blocked_modules() -> list[str]:
    """The top-level modules installed here that no runtime distribution provides (a name
    two distributions share is allowed if either is a runtime one)."""
    allowed = runtime_distributions()
    blocked = []
    for module, distributions in metadata.packages_distributions().items():
        if module in INSTALLER_MODULES or module.startswith("__"):
            continue
        if not {_normal(d) for d in distributions} & allowed:
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
    env = {**os.environ, "NUMBA_CACHE_DIR": str(scratch / "numba-cache")}
    return subprocess.run(
        [sys.executable, "-c", _PRELUDE.format(blocked=blocked) + code],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
    )  # fmt: skip
