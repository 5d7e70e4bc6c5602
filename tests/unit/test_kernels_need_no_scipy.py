"""No compiled (numba) kernel calls what numba implements with SciPy's BLAS or LAPACK: SciPy is
not a dependency of stream-dp (a worker's ``pip install .`` has none), and such a kernel
fails at its first call, in the release (tests/e2e/test_runtime_only.py runs the release
where only the dependencies import; this check reaches every kernel, on every path)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "stream_dp"

#: numpy functions numba compiles into BLAS or LAPACK calls (``numba/np/linalg.py``).
NEEDS_SCIPY = frozenset({"dot", "vdot", "inner", "matmul", "linalg"})


def _compiled(node: ast.FunctionDef) -> bool:
    """Whether a decorator of ``node`` is numba's ``njit`` or ``jit`` (bare or called)."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in {"njit", "jit"}:
            return True
    return False


def _uses_scipy(function: ast.FunctionDef) -> list[str]:
    """What in ``function``'s body numba would hand to SciPy: ``@`` or a NEEDS_SCIPY name."""
    found = []
    for node in ast.walk(function):
        matmul = isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.MatMult)
        if matmul:
            found.append(f"line {node.lineno}: @")
        elif isinstance(node, ast.Attribute) and node.attr in NEEDS_SCIPY:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def kernels_using_scipy(root: Path = PACKAGE) -> list[str]:
    """Every compiled function under ``root`` whose body uses NEEDS_SCIPY, as ``path: name``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and _compiled(node):
                out += [f"{path.name}: {node.name} {use}" for use in _uses_scipy(node)]
    return out


def test_no_compiled_kernel_calls_blas_or_lapack() -> None:
    assert kernels_using_scipy() == []


def test_the_check_finds_a_dot_product_in_a_kernel(tmp_path: Path) -> None:
    (tmp_path / "kernel.py").write_text(
        "from numba import njit\n"
        "import numpy as np\n\n"
        "@njit(cache=True)\n"
        "def priced(lam, room):\n"
        "    return lam @ room\n\n"
        "@njit\n"
        "def solved(a, b):\n"
        "    return np.linalg.solve(a, b) + np.dot(a, b)\n\n"
        "def plain(a, b):\n"
        "    return a @ b\n"
    )
    assert sorted(kernels_using_scipy(tmp_path)) == [
        "kernel.py: priced line 6: @",
        "kernel.py: solved line 10: .dot",
        "kernel.py: solved line 10: .linalg",
    ]
