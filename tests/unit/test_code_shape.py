"""The shape of the package's code: short functions, and a flat top level of few modules."""

from __future__ import annotations

import ast
from pathlib import Path

import stream_dp

PACKAGE = Path(stream_dp.__file__).parent
#: Longest function body allowed, in lines (decorators and docstring included).
MAX_FUNCTION_LINES = 80
#: Modules allowed directly in stream_dp/ besides __init__, __main__ and cli.
MAX_TOP_LEVEL_MODULES = 5


def _compiled(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A numba kernel (``@njit``, ``@numba.njit(...)``, ``@jit``): exempt, it is one loop."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("njit", "jit"):
            return True
    return False


def long_functions(root: Path = PACKAGE, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``path:line name (N lines)`` of every function over ``limit`` lines under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _compiled(node):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                lines = node.end_lineno - start + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root)}:{start} {node.name} ({lines} lines)")
    return found


def test_no_function_outside_compiled_kernels_is_longer_than_80_lines() -> None:
    assert long_functions() == []


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "m.py").write_text(f"def long():\n{body}\n\n@njit\ndef kernel():\n{body}\n")
    assert [f.split()[1] for f in long_functions(tmp_path)] == ["long"]


def test_few_modules_lie_directly_in_the_package() -> None:
    flat = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__", "cli"}
    assert len(flat) <= MAX_TOP_LEVEL_MODULES, sorted(flat)


#: The data path's folders, each with what it may import of the package (a lower layer never
#: imports a higher one).
MAY_IMPORT = {
    "dp": {"dp"},
    "windows": {"windows", "dp", "config"},
    "release": {"release", "windows", "dp", "config", "fault_injection"},
    "wire": {"wire", "windows", "dp"},
}


def _imported_packages(path: Path) -> set[str]:
    """The first component under ``stream_dp`` of every package import in ``path``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "stream_dp":
                names = parts[1:2] or [alias.name for alias in node.names]
                out.update(names)
    return out


def test_no_folder_of_the_data_path_imports_a_higher_one() -> None:
    wrong = {
        f"{path.relative_to(PACKAGE)} imports {sorted(extra)}"
        for folder, allowed in MAY_IMPORT.items()
        for path in (PACKAGE / folder).rglob("*.py")
        if (extra := _imported_packages(path) - allowed)
    }
    assert not wrong, sorted(wrong)
