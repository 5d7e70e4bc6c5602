"""Issue 35, item 2: each stage declares the state fields and report lines it writes, and the
pipeline checks after every stage that it wrote nothing else; each stage that withholds has
its own line of the report, summed into the summary's ``cells_withheld`` and
``readings_withheld``."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from stream_dp.commands.profile import BUDGET_PROFILE
from stream_dp.config import load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.engine import OfflineEngine
from stream_dp.release import stages as stages_module
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams
from stream_dp.release.pipelines import pipelines_of
from stream_dp.release.report import WindowReport, Withheld
from stream_dp.release.stage_contract import (
    REPORT_FIELDS,
    STATE_FIELDS,
    StageContractError,
    check_stage_writes,
)
from stream_dp.release.stages import Pipeline, Select, Stage, Withhold
from stream_dp.release.state import WindowInput, WindowState
from stream_dp.release.window import release_window
from stream_dp.sources.sample import load_sample
from tests.support.noise_free import NoNoise
from tests.support.settings import FIXED_MODE
from tests.unit.release.test_span_policy import _harbour
from tests.unit.release.test_vehicle_budget import HOUR, U, _busy_windows, _params, _window

#: Each stage's own withheld line, by the name of the stage that writes it.
WITHHELD_LINES = {
    "withheld_pool": "pool",
    "withheld_regroup": "regroup",
    "withheld_error_bars": "error-bars",
    "withheld_defer": "defer",
}

#: The modes whose pipelines are checked (harbour data, 4 hours, a ledger and a carry).
MODES: dict[str, dict[str, Any]] = {
    "fixed": {"vehicle_budget": None, "vehicle_budget_burst": None, "target_mean_error": None},
    "targeted": {"vehicle_budget": None, "vehicle_budget_burst": None},
    "masking cap": {
        "vehicle_budget": None,
        "vehicle_budget_burst": None,
        "target_mean_error": None,
        "budget_cap": 2.0,
    },  # fmt: skip
    "vehicle budget": {"coarsest_resolution": 6, "max_span_hours": 4},
    "vehicle budget, no spans": {"coarsest_resolution": 6, "max_span_hours": 1},
    "vehicle budget, optimiser": {
        "coarsest_resolution": 6,
        "max_span_hours": 4,
        "budget_planner": "optimiser",
    },
}


class _Writing(Select):
    """The select stage writing more than it declares: ``extra`` on top of its pairs."""

    name = "rogue"

    def __init__(self, **extra: Any) -> None:
        self.extra = extra

    def run(self, state: WindowState) -> WindowState:
        return replace(super().run(state), **self.extra)


class _Reporting(Select):
    """The select stage writing a report line it does not declare."""

    name = "rogue"

    def run(self, state: WindowState) -> WindowState:
        return replace(super().run(state), report=replace(state.report, k=7))


def _fixed_release(rogue: Stage) -> tuple[Pipeline, WindowState]:
    """The fixed-ε release with ``rogue`` last in its choice, and a window to run it on."""
    params = _params(**MODES["targeted"])
    base = pipelines_of(params).release(LaplaceNoise())
    pipeline = Pipeline(base.after_choice, [*base.choice, rogue], base.closing)
    window = WindowInput(0, _window(0, _busy_windows(1, 2)[0]), params)
    return pipeline, WindowState.start(window)


@pytest.mark.parametrize(
    ("rogue", "undeclared"),
    [
        (_Writing(stats=None, budget_plan=object()), "['budget_plan']"),
        (_Writing(cells=[{"cell": "x"}]), "['cells']"),
        (_Reporting(), "['report.k']"),
    ],
)
def test_a_stage_that_writes_what_it_does_not_declare_stops_the_release(
    rogue: Stage, undeclared: str
) -> None:
    """Injected into a real pipeline; ``stats=None`` keeps the field's object (no write)."""
    pipeline, state = _fixed_release(rogue)
    with pytest.raises(
        StageContractError, match=re.escape(f"'rogue' wrote undeclared {undeclared}")
    ):
        pipeline.run(state)
    honest, state = _fixed_release(Select())  # the same pipeline with an honest stage runs
    assert honest.run(state).summary["cells_released"] > 0


def test_a_stage_cannot_declare_the_input_or_an_unknown_field_nor_two_own_a_line() -> None:
    for writes, reports in [({"input"}, set()), ({"report"}, set()), (set(), {"cells_withheld"})]:
        with pytest.raises(StageContractError, match="declares unknown fields"):
            type("Bad", (Stage,), {"writes": frozenset(writes), "reports": frozenset(reports)})
    with pytest.raises(StageContractError, match="'k' declared by stages 'error-bars' and"):
        Pipeline([Withhold(), Withhold()])


def test_the_check_compares_identities_not_values() -> None:
    """A field handed on is the same object (unchanged); an equal new one is a write; a new
    report whose lines are the same objects writes no line."""
    params = _params(**MODES["fixed"])
    before = WindowState.start(WindowInput(0, _window(0, _harbour(1, 0)[0]), params))
    with pytest.raises(StageContractError, match=re.escape("undeclared ['cells']")):
        check_stage_writes("copy", frozenset(), frozenset(), before, replace(before, cells=[]))
    with pytest.raises(StageContractError, match=re.escape("undeclared ['report.error_bound']")):
        after = replace(before, report=replace(before.report, error_bound=-0.0))
        check_stage_writes("copy", frozenset(), frozenset(), before, after)
    check_stage_writes("copy", frozenset(), frozenset(), before, replace(before))
    same = replace(before, report=replace(before.report))
    check_stage_writes("copy", frozenset(), frozenset(), before, same)
    with pytest.raises(StageContractError, match="returned NoneType"):
        check_stage_writes("none", frozenset(), frozenset(), before, None)  # type: ignore[arg-type]


def _changed(before: Any, after: Any, names: tuple[str, ...]) -> set[str]:
    return {n for n in names if getattr(before, n) is not getattr(after, n)}


@pytest.fixture
def stage_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Stage, Any, Any]]]:
    """Every stage the pipelines run, with the state before and after it, once checked."""
    runs: list[tuple[Stage, Any, Any]] = []
    check = stages_module.check_stage_writes

    def recording(name: str, writes: Any, reports: Any, before: Any, after: Any) -> None:
        check(name, writes, reports, before, after)
        runs.append((stage_of[name], before, after))

    stage_of: dict[str, Stage] = {}
    run_stage = stages_module.run_stage

    def naming(stage: Stage, state: WindowState) -> WindowState:
        stage_of[stage.name] = stage
        return run_stage(stage, state)

    monkeypatch.setattr(stages_module, "check_stage_writes", recording)
    monkeypatch.setattr(stages_module, "run_stage", naming)
    yield runs


def _release_hours(params: ReleaseParams, hours: int) -> None:
    """Harbour data released hour by hour with a ledger and the carry, as the engine does."""
    ledger, carry = PrivacyAccountant(params).new_ledger(), None
    for hour, readings in enumerate(_harbour(hours, 3)):
        columns = _window(hour * HOUR, readings)
        release = release_window(
            hour * HOUR, columns, params, NoNoise(), 0, ledger, carry, last=hour == hours - 1
        )
        assert release.loss is not None
        ledger.record_released(release.loss)
        carry = release.carry
        window = WindowInput(hour * HOUR, columns, params, ledger, last=True)
        pipelines_of(params).choice().run(WindowState.start(window))
        pipelines_of(params).plan().run(WindowState.start(window))


def test_every_real_pipeline_writes_only_what_its_stages_declare(
    stage_runs: list[tuple[Stage, Any, Any]],
) -> None:
    """Release, choice and plan in each mode pass the check after every stage; between them
    every stage writes each state field it declares (no declaration wider than the stage; a
    report line may keep its value, e.g. 0 pairs suppressed, and so its object)."""
    written: dict[type[Stage], set[str]] = defaultdict(set)
    for mode, changes in MODES.items():
        stage_runs.clear()
        _release_hours(_params(**changes), 4)
        names = {stage.name for stage, _, _ in stage_runs}
        assert {"summary", "error-bars", "records"} <= names, mode
        for stage, before, after in stage_runs:
            written[type(stage)] |= _changed(before, after, STATE_FIELDS) - {"report"}
            lines = _changed(before.report, after.report, REPORT_FIELDS)
            assert lines <= stage.reports, (mode, stage.name, lines)
    assert {s.__name__ for s in written} >= {"Mask", "Pool", "Defer", "Plan", "ClipUser"}
    for stage, fields in written.items():
        assert fields == stage.writes, stage.__name__


def _withholds(report: WindowReport, line: str) -> bool:
    withheld = getattr(report, line)
    return withheld is not None and withheld != Withheld()


@pytest.mark.parametrize("max_span_hours", [8, 1])
def test_each_withheld_line_is_written_by_its_own_stage_and_summed_in_the_summary(
    stage_runs: list[tuple[Stage, Any, Any]], max_span_hours: int
) -> None:
    """The budget profile on the bundled AIS week: the pool, the regrouping, the error bars and
    (with spans) the deferral each withhold in some window, each on its own line, which no
    other stage writes; the summary's counts are their sum (with spans the deferral's settled
    count stands for the regrouping's and the error bars')."""
    profile = {**FIXED_MODE, **BUDGET_PROFILE, "max_span_hours": max_span_hours}
    engine = OfflineEngine(load_settings(app_id="t", upper=U, **profile), NoNoise())
    summaries = [r.summary for b in (engine.feed(load_sample()), engine.finish()) for r in b]
    reports: list[WindowReport] = []
    for stage, before, after in stage_runs:
        for line in _changed(before.report, after.report, tuple(WITHHELD_LINES)):
            assert WITHHELD_LINES[line] == stage.name, (line, stage.name)
        if stage.name == "summary":
            reports.append(after.report)
    assert len(reports) == len(summaries)
    withholding = {line for r in reports for line in WITHHELD_LINES if _withholds(r, line)}
    spans = max_span_hours > 1
    assert withholding == set(WITHHELD_LINES) - (
        set() if spans else {"withheld_pool", "withheld_defer"}
    )
    for report, summary in zip(reports, summaries, strict=True):
        settled = report.withheld_defer
        if spans:
            assert settled is not None
            total = report.withheld_pool + settled
        else:
            assert settled is None
            total = report.withheld_pool + report.withheld_regroup + report.withheld_error_bars
        assert (summary["cells_withheld"], summary["readings_withheld"]) == (
            total.cells, total.readings,
        )  # fmt: skip
        assert report.withheld() == total
