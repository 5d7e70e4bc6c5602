"""The stage contract (docs/architecture.md, "The stage contract"): a stage declares the
fields of the window state it writes and its own lines of the report; the pipeline checks,
after every stage, that it changed nothing else, and, when it is built, that no two of its
stages declare the same report line. Fields are compared by identity (``is``): a stage that
keeps a field hands on the same object, so the check reads no array."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields

from stream_dp.release.report import WindowReport
from stream_dp.release.state import WindowState

STATE_FIELDS = tuple(f.name for f in fields(WindowState))
REPORT_FIELDS = tuple(f.name for f in fields(WindowReport))


class StageContractError(AssertionError):
    """A stage wrote what it does not declare, or two stages of a pipeline declare one
    report line (a bug in the release, never in its input)."""


def check_declared(name: str, writes: frozenset[str], reports: frozenset[str]) -> None:
    """A stage's declaration names fields that exist and that a stage may write (never the
    window's ``input``; the ``report`` only through its lines)."""
    writable = set(STATE_FIELDS) - {"input", "report"}
    unknown = sorted((writes - writable) | (reports - set(REPORT_FIELDS)))
    if unknown:
        raise StageContractError(f"stage {name!r} declares unknown fields {unknown}")


def check_stage_writes(
    name: str,
    writes: frozenset[str],
    reports: frozenset[str],
    before: WindowState,
    after: WindowState,
) -> None:
    """``after`` (what stage ``name`` returned for ``before``) differs from ``before`` only in
    the declared state fields ``writes`` and report lines ``reports``."""
    if not isinstance(after, WindowState):
        raise StageContractError(f"stage {name!r} returned {type(after).__name__}, not a state")
    changed = {n for n in STATE_FIELDS if getattr(before, n) is not getattr(after, n)}
    undeclared = changed - writes - {"report"}
    if "report" in changed:
        old, new = before.report, after.report
        lines = {n for n in REPORT_FIELDS if getattr(old, n) is not getattr(new, n)}
        undeclared |= {f"report.{n}" for n in lines - reports}
    if undeclared:
        raise StageContractError(f"stage {name!r} wrote undeclared {sorted(undeclared)}")


def check_report_owners(stages: Iterable[tuple[str, frozenset[str]]]) -> None:
    """Each report line is declared by at most one of a pipeline's ``(name, reports)``."""
    owner: dict[str, str] = {}
    for name, reports in stages:
        for line in sorted(reports):
            if line in owner:
                raise StageContractError(
                    f"report line {line!r} declared by stages {owner[line]!r} and {name!r}"
                )
            owner[line] = name
