"""No compiled (numba) kernel calls what numba implements with SciPy's BLAS or LAPACK: SciPy is
not a dependency of stream-dp (a worker's ``pip install .`` has none), and such a kernel
fails at its first call, in the release (tests/e2e/test_runtime_only.py runs the release
where only the dependencies import). Every numba dispatcher a module of the package holds is
checked, decorated or built by a call (``njit(...)(function)``), on the Python source numba
compiles, its bare names resolved against that function's own globals."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

import numpy as np
from numba.core.dispatcher import Dispatcher

import stream_dp

#: numpy's functions that numba compiles into BLAS or LAPACK calls (``numba/np/linalg.py``,
#: and ``np.cov``/``np.corrcoef``, which it builds on ``np.dot``), and ``numpy.linalg``.
NEEDS_SCIPY = frozenset({"dot", "vdot", "inner", "matmul", "cov", "corrcoef", "linalg"})
_BLAS_FUNCTIONS = tuple(getattr(np, name) for name in sorted(NEEDS_SCIPY - {"linalg"}))


def _needs_scipy(value: object) -> bool:
    """Whether a global the kernel names is one of those functions or numpy.linalg's."""
    if value is np.linalg:
        return True
    if any(value is f for f in _BLAS_FUNCTIONS):
        return True
    return callable(value) and getattr(value, "__module__", "").startswith("numpy.linalg")


def _uses_scipy(dispatcher: Dispatcher) -> list[str]:
    """What the dispatcher's Python function would hand to SciPy: ``@``, an attribute named
    in NEEDS_SCIPY, or a bare name bound to such a function."""
    function = dispatcher.py_func
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.MatMult):
            found.append("@")
        elif isinstance(node, ast.Attribute) and node.attr in NEEDS_SCIPY:
            found.append(f".{node.attr}")
        elif isinstance(node, ast.Name) and _needs_scipy(function.__globals__.get(node.id)):
            found.append(node.id)
    return [f"{function.__module__}.{function.__qualname__}: {use}" for use in found]


def kernels_using_scipy(modules: Iterable[ModuleType]) -> list[str]:
    """Every numba dispatcher held by ``modules`` whose function uses NEEDS_SCIPY."""
    seen: set[int] = set()
    out = []
    for module in modules:
        for value in list(vars(module).values()):
            if isinstance(value, Dispatcher) and id(value.py_func) not in seen:
                seen.add(id(value.py_func))
                out += _uses_scipy(value)
    return out


def _package_modules() -> list[ModuleType]:
    return [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(stream_dp.__path__, "stream_dp.")
    ]


def test_no_compiled_kernel_calls_blas_or_lapack() -> None:
    modules = _package_modules()
    kernels = sum(isinstance(v, Dispatcher) for m in modules for v in vars(m).values())
    assert kernels > 50  # the package's kernels were found (decorated and built by a call)
    assert kernels_using_scipy(modules) == []


def test_the_check_finds_what_would_need_scipy(tmp_path: Path) -> None:
    (tmp_path / "blas_kernels.py").write_text(
        "import numpy as np\n"
        "from numba import njit\n"
        "from numpy import dot as product\n"
        "from numpy.linalg import solve\n\n"
        "@njit(cache=False)\n"
        "def priced(lam, room):\n"
        "    return lam @ room\n\n"
        "@njit\n"
        "def solved(a, b):\n"
        "    return np.linalg.solve(a, b) + np.cov(a)\n\n"
        "def by_name(a, b):\n"
        "    return product(a, b) + solve(a, b)\n\n"
        "built = njit(by_name)\n\n"
        "@njit\n"
        "def clean(a):\n"
        "    return a.sum()\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("blas_kernels")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("blas_kernels", None)
    assert sorted(kernels_using_scipy([module])) == [
        "blas_kernels.by_name: product",
        "blas_kernels.by_name: solve",
        "blas_kernels.priced: @",
        "blas_kernels.solved: .cov",
        "blas_kernels.solved: .linalg",
    ]
