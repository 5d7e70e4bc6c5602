"""The shape of the package's code: short functions, and a flat top level of few modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


#: The package's layers, top to bottom, stated once: a module of ``stream_dp/`` imports only
#: from its own unit and from units of lower layers (a unit: a folder, or a module lying
#: directly in ``stream_dp/``; the package's own ``__init__``, ``__version__``, is open to all).
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "__main__",
        "cli",
        "commands",
        "worker experiments options",
        "engine dashboard producer planning",
        "secret_routes",
        "release wire sources",
        "windows kafka allocator",
        "config",
        "dp fault_injection web",
    )
)
#: Calls that import a module named by their first argument.
IMPORT_CALLS = {"import_module", "__import__"}


def _units(root: Path) -> set[str]:
    """Every unit of the package at ``root``: its folders and its top-level modules."""
    folders = {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return folders | {p.stem for p in root.glob("*.py")} - {"__init__"}


def _imported_modules(path: Path, root: Path) -> set[str]:
    """Dotted names (under the package's own name) of every module ``path`` imports: ``import
    a.b``, ``from a.b import c`` (``a.b.c`` too: ``c`` may be a module), relative imports, at
    any depth (inside functions too), and string arguments of ``import_module``/``__import__``."""
    package = [root.name, *path.relative_to(root).parent.parts]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if name in IMPORT_CALLS and isinstance(first, ast.Constant):
                found.add(str(first.value))
    return found


def _unit_of(module: str, package: str, units: set[str]) -> str | None:
    """The unit a dotted module name belongs to; None outside the package."""
    parts = module.split(".")
    if parts[0] != package:
        return None
    return parts[1] if len(parts) > 1 and parts[1] in units else "__init__"  # the package


def upward_imports(root: Path, layers: tuple[frozenset[str], ...] = LAYERS) -> list[str]:
    """``path imports unit`` for every import of a unit that is not below the importing
    module's unit; ``unit: in no layer`` for a unit the layers do not place."""
    units = _units(root)
    rank = {unit: depth for depth, layer in enumerate(layers) for unit in layer}
    wrong = [f"{unit}: in no layer" for unit in sorted(units - rank.keys())]
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        own = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for module in sorted(_imported_modules(path, root)):
            unit = _unit_of(module, root.name, units)
            if unit in (None, own, "__init__") or own not in rank or unit not in rank:
                continue
            if rank[unit] <= rank[own]:
                wrong.append(f"{rel} imports {unit}")
    return sorted(set(wrong))


def test_every_unit_of_the_package_imports_only_lower_layers() -> None:
    assert upward_imports(PACKAGE) == []


UPWARD_FORMS = {
    "absolute": "import stream_dp.high.mod\n",
    "absolute_package": "import stream_dp.high\n",
    "from_module": "from stream_dp.high.mod import thing\n",
    "from_package": "from stream_dp import high\n",
    "from_top_module": "from stream_dp import top\n",
    "relative_sibling": "from ..high import mod\n",
    "relative_module": "from ..high.mod import thing\n",
    "inside_function": "def f():\n    from stream_dp.high import mod\n    return mod\n",
    "import_module": "import importlib\nimportlib.import_module('stream_dp.high.mod')\n",
    "bare_import_module": "from importlib import import_module\nimport_module('stream_dp.top')\n",
    "dunder_import": "__import__('stream_dp.high')\n",
}


def _synthetic_package(tmp_path: Path, source: str) -> Path:
    """``stream_dp/`` with units ``top`` (a module) > ``high`` (a folder) > ``low`` (a folder
    whose ``mod.py`` is ``source``)."""
    root = tmp_path / "stream_dp"
    for folder in ("high", "low"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "top.py").write_text("from stream_dp.high import mod\nfrom . import low\n")
    (root / "high" / "mod.py").write_text("from stream_dp.low import mod\nfrom ..low import mod\n")
    (root / "low" / "mod.py").write_text(source)
    return root


SYNTHETIC_LAYERS = (frozenset({"top"}), frozenset({"high"}), frozenset({"low"}))


@pytest.mark.parametrize("form", sorted(UPWARD_FORMS))
def test_the_layer_check_sees_an_upward_import_of_each_form(tmp_path: Path, form: str) -> None:
    root = _synthetic_package(tmp_path, UPWARD_FORMS[form])
    wrong = upward_imports(root, SYNTHETIC_LAYERS)
    assert wrong == [f"low/mod.py imports {'top' if 'top' in UPWARD_FORMS[form] else 'high'}"]


def test_the_layer_check_accepts_downward_imports_and_names_an_unplaced_unit(
    tmp_path: Path,
) -> None:
    root = _synthetic_package(tmp_path, "import stream_dp\nfrom stream_dp import low\n")
    assert upward_imports(root, SYNTHETIC_LAYERS) == []
    (root / "new").mkdir()
    (root / "new" / "__init__.py").write_text("")
    assert upward_imports(root, SYNTHETIC_LAYERS) == ["new: in no layer"]


def test_the_unit_tests_mirror_the_package_folders() -> None:
    """Unit tests of ``stream_dp/X/`` live in ``tests/unit/X/``; the top level holds only the
    tests of top-level modules and of the package as a whole."""
    tests = Path(__file__).parent
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"}
    package = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders <= package, sorted(folders - package)
    for folder in folders:
        assert (tests / folder / "__init__.py").exists(), folder
        assert list((tests / folder).glob("test_*.py")), f"tests/unit/{folder} holds no test"


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(root: Path = PACKAGE) -> list[list[str]]:
    """Every set of the package's modules that import each other in a circle (any import
    :func:`_imported_modules` sees, inside functions too), largest first. An import of a
    package (its ``__init__``) is left out: a module imports its parents anyway."""
    paths = {_module_name(path, root): path for path in root.rglob("*.py")}
    packages = {_module_name(path, root) for path in root.rglob("__init__.py")}
    graph = {
        name: sorted(m for m in _imported_modules(path, root) if m in paths and m != name)
        for name, path in paths.items()
    }
    graph = {name: [m for m in targets if m not in packages] for name, targets in graph.items()}
    reach = {name: _reachable(graph, name) for name in graph}
    cycles = {frozenset(m for m in reach[name] if name in reach[m]) for name in graph}
    return sorted((sorted(c) for c in cycles if len(c) > 1), key=lambda c: (-len(c), c))


def _reachable(graph: dict[str, list[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for target in graph[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_no_modules_of_the_package_import_each_other_in_a_circle() -> None:
    assert import_cycles() == []


def test_the_cycle_check_sees_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    root = _synthetic_package(tmp_path, "def f():\n    from stream_dp.low import other\n")
    (root / "low" / "other.py").write_text("from stream_dp.low.mod import f\n")
    assert import_cycles(root) == [["stream_dp.low.mod", "stream_dp.low.other"]]
