"""Issue 35: each release mode is a pipeline of its own, chosen once; no stage asks which mode
runs; a window's charge is one accountant method, the accountant built once per window."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from stream_dp.dp.budget_ledger import WindowLoss
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.occupancy import Occupancy
from stream_dp.release import accounting
from stream_dp.release.accounting import PrivacyAccountant, WindowReads
from stream_dp.release.modes import FixedEpsilon, VehicleBudget
from stream_dp.release.pipelines import pipelines_of
from stream_dp.release.stages import Pipeline, Select
from stream_dp.release.state import WindowInput, WindowState
from stream_dp.release.window import release_window
from tests.unit.release.charge_cases import charge_digests
from tests.unit.release.test_vehicle_budget import _busy_windows, _params, _window

RELEASE = Path(__file__).parents[3] / "stream_dp" / "release"
#: What a stage would read to ask which mode runs: the parameters' or the state's attributes,
#: and the modes' classes.
MODE_ATTRIBUTES = {"vehicle_budget", "budget", "budget_plan", "mode"}
MODE_CLASSES = {"FixedEpsilon", "VehicleBudget", "ReleaseMode"}


def _stage_methods() -> list[tuple[str, ast.FunctionDef]]:
    """Every ``run`` and ``begin`` of a class in release/ that derives from ``Stage``."""
    out = []
    for path in sorted(RELEASE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if "Stage" not in bases:
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in ("run", "begin"):
                    out.append((f"{path.name}:{node.name}.{item.name}", item))
    return out


def test_no_stage_reads_the_mode() -> None:
    methods = _stage_methods()
    assert len(methods) >= 15, "the stages of both pipelines"
    reading = []
    for where, function in methods:
        for node in ast.walk(function):
            if not isinstance(getattr(node, "ctx", None), ast.Load):
                continue  # a stage may write what it makes (the plan stage: the plan)
            if isinstance(node, ast.Attribute) and node.attr in MODE_ATTRIBUTES:
                reading.append(f"{where}: {node.attr}")
            if isinstance(node, ast.Name) and node.id in MODE_CLASSES:
                reading.append(f"{where}: {node.id}")
    assert reading == []


def _state_writes(function: ast.FunctionDef) -> list[str]:
    """Each assignment in ``function`` to an attribute of its state argument (the first after
    ``self``), however deep (``state.pairs = ...``, ``state.report.k = ...``)."""
    state = function.args.args[1].arg
    writes = []
    for node in ast.walk(function):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        while any(isinstance(t, (ast.Tuple, ast.List)) for t in targets):  # a, b = ...
            targets = [e for t in targets for e in getattr(t, "elts", [t])]
        for target in targets:
            if not isinstance(target, ast.Attribute):
                continue
            root: ast.expr = target
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id == state:
                writes.append(ast.unparse(target))
    return writes


def test_no_stage_writes_the_window_state() -> None:
    """Each stage returns the window so far with its own result filled in; none assigns an
    attribute of the state it was given (the state is frozen)."""
    methods = _stage_methods()
    assert len(methods) >= 15, "the stages of both pipelines"
    writes = [f"{where}: {write}" for where, f in methods for write in _state_writes(f)]
    assert writes == []
    assert WindowState.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_a_stage_returns_a_new_state() -> None:
    """A stage's result is a new record; the state it was given is unchanged."""
    params = _params(vehicle_budget=None, vehicle_budget_burst=None)
    window = WindowInput(0, _window(0, _busy_windows(1, 2)[0]), params)
    before = WindowState.start(window)
    after = Select().run(before)
    assert before.pairs is None and after.pairs is not None and after is not before
    assert after.input is before.input and after.columns is before.columns


def test_the_budget_helpers_take_what_they_read() -> None:
    """Only the stages, the state and the release entry name the window state: the helpers
    (the budget's plan, rooms, price and regrouping among them) take arrays."""
    allowed = {"stages.py", "state.py", "window.py", "stage_contract.py"}  # and the check
    naming = [
        str(path.relative_to(RELEASE))
        for path in sorted(RELEASE.rglob("*.py"))
        if path.name not in allowed and "WindowState" in path.read_text()
    ]
    assert naming == []


def test_a_failed_window_states_its_charge_without_writing_a_report() -> None:
    """``failed_release`` takes G1 and K from the charge: no assignment in window.py writes an
    attribute (of a state or a report)."""
    source = (RELEASE / "window.py").read_text()
    writes = [
        ast.unparse(node)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.Assign, ast.AugAssign))
        and any(
            isinstance(t, ast.Attribute)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            for t in ast.walk(target)
        )
    ]
    assert writes == []


def _names(pipeline: Pipeline) -> tuple[list[str], list[str], list[str]]:
    return (
        [s.name for s in pipeline.choice],
        [s.name for s in pipeline.after_choice],
        [s.name for s in pipeline.closing],
    )


def test_each_mode_lists_its_own_stages() -> None:
    fixed = _params(vehicle_budget=None, vehicle_budget_burst=None)
    assert isinstance(fixed.mode, FixedEpsilon)
    choice = ["accountant", "regroup", "select", "mask"]
    bound = ["clip-user", "cap"]
    assert _names(pipelines_of(fixed).release(LaplaceNoise())) == (
        choice, [*bound, "statistics", "error-bars", "noise", "records"], ["summary"],
    )  # fmt: skip
    assert _names(pipelines_of(fixed).choice()) == (choice, [], [])
    assert _names(pipelines_of(fixed).plan()) == (choice, [*bound, "statistics", "error-bars"], [])

    spans = _params(vehicle_budget=6.0, max_span_hours=3)
    assert isinstance(spans.mode, VehicleBudget) and spans.mode.spans
    choice = ["regroup", "plan"]  # the plan builds the accountant (it checks by its charge)
    after = ["statistics", "error-bars", "noise", "records", "span-records"]
    assert _names(pipelines_of(spans).release(LaplaceNoise())) == (
        ["pool", *choice], after, ["defer", "summary"],
    )  # fmt: skip
    assert _names(pipelines_of(spans).choice()) == (choice, [], [])
    assert _names(pipelines_of(spans).plan()) == (choice, ["statistics", "error-bars"], [])
    one_window = _params(vehicle_budget=6.0, max_span_hours=1)
    assert _names(pipelines_of(one_window).release(LaplaceNoise()))[2] == ["summary"]


def test_the_mode_carries_its_own_fields() -> None:
    params = _params(vehicle_budget=6.0, max_span_hours=3, vehicle_budget_burst=2.0)
    assert params.mode == VehicleBudget(6.0, 2.0, 3, params.budget_period_seconds, "rules")
    assert _params(vehicle_budget=None, vehicle_budget_burst=None).mode == FixedEpsilon()


#: :func:`charge_digests` on 55ababa, before the charge was one method (the loss and reads
#: of each window, released, failed and empty, in both modes).
CHARGES_BEFORE = {
    "fixed released": "aa20428ffcf9cfb20ec044afbc938e008e6766778b597ce3ba7284d8c2482d23",
    "fixed failed": "aa20428ffcf9cfb20ec044afbc938e008e6766778b597ce3ba7284d8c2482d23",
    "fixed failed unmerged": "15bd793cdcf9689cc32ba6ac9bb313d8aaf5db5dfa0c325f98cf630284bc8287",
    "fixed empty": "875b654e7c92afa719032e60c119ba2b84c5530e800d7df15ef1303bea7c860a",
    "fixed failed empty": "875b654e7c92afa719032e60c119ba2b84c5530e800d7df15ef1303bea7c860a",
    "budget released": "da06ed440e624905ef69e59865fb56b6c3f4f201506fb05d81b924e855bd99de",
    "budget failed": "1f3fff6a1cd7806f514eb9e11c7c452941d1c6a1f881ae52bf815e9d6c5fd7aa",
    "budget failed unmerged": "4e9823049dc922ff3e0cbe307e6e976b31c307fe3f69cf004898874412c6ccd5",
    "budget empty": "875b654e7c92afa719032e60c119ba2b84c5530e800d7df15ef1303bea7c860a",
    "budget failed empty": "875b654e7c92afa719032e60c119ba2b84c5530e800d7df15ef1303bea7c860a",
}


def test_the_one_charge_charges_every_window_as_before() -> None:
    assert charge_digests() == CHARGES_BEFORE


def _occupancy() -> Occupancy:
    """Vehicle a in cells x and y, b in y."""
    return Occupancy.from_triples([("x", "a", 2), ("y", "a", 1), ("y", "b", 3)])


def test_the_charge_of_each_description() -> None:
    """Released (each vehicle its released kept cells), failed (every chosen cell at its whole
    ε), counted (the partials' cells) and, with per-cell ε, each cell's own ε."""
    params = _params(vehicle_budget=None, vehicle_budget_burst=None, epsilon=0.5)
    fixed, occ = PrivacyAccountant(params), _occupancy()
    kept, released = np.array([True, False, True]), np.array([True, True])
    loss, reads = fixed.charge(0, WindowReads(occ, kept, released))
    assert reads is None and loss == WindowLoss.from_counts(0, 0.5, ["a", "b"], [1, 1])
    failed, _ = fixed.charge(0, WindowReads(occ))
    assert failed == WindowLoss.from_counts(0, 0.5, ["a", "b"], [2, 1])
    counted, _ = fixed.charge(0, WindowReads(counted=(["b", "a"], [4, 2])))
    assert counted == WindowLoss.from_counts(0, 0.5, ["a", "b"], [2, 4])
    budget = _params(vehicle_budget=6.0, vehicle_budget_burst=2.0)
    per_cell = PrivacyAccountant(budget, np.array([0.25, 1.5]))
    loss, reads = per_cell.charge(0, WindowReads(occ, kept, np.array([True, False])))
    assert reads is not None and loss.loss.tolist() == [0.25]  # a in x only; y not released
    failed, _ = per_cell.charge(0, WindowReads(occ, kept))
    assert failed.loss.tolist() == [0.25, 1.5]  # kept in x (a) and y (b), whole ε
    counted, _ = per_cell.charge(0, WindowReads(counted=(["a"], [3])))
    assert counted.loss.tolist() == pytest.approx([2.0])  # no ledger: the burst, not 3 cells


def test_a_window_builds_its_accountant_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """With each cell's ε fixed: never replaced mid-window."""
    built: list[object] = []
    post_init = accounting.PrivacyAccountant.__post_init__

    def counting(self: PrivacyAccountant) -> None:
        built.append(self.per_cell)
        post_init(self)

    monkeypatch.setattr(accounting.PrivacyAccountant, "__post_init__", counting)
    params = _params(vehicle_budget=60.0, max_span_hours=1)
    ledger = PrivacyAccountant(params).new_ledger()
    built.clear()
    release = release_window(0, _window(0, _busy_windows(1, 3)[0]), params, LaplaceNoise(), 0,
                             ledger)  # fmt: skip
    assert release.cells and len(built) == 1 and built[0] is not None
