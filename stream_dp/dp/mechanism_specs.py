"""The one registry of the per-cell mean mechanisms (docs/math.md §7): what each declares.

Each :class:`MeanMechanismSpec` says what the release branches on: whether the mechanism
needs δ (else it is pure ε-DP), whether it reads the stored reading prefixes and takes their
length C, whether it states a data-independent error bound, whether the PLD accountant
composes it, whether the release runs it as the CLIP mean's window-wide combiner. The specs
are plain data: this module imports no mechanism (and no compiled kernel), so the command
line and the settings check a name at once; :meth:`MeanMechanismSpec.build` imports the
implementation when a release needs it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

_PACKAGE = "stream_dp.dp.mechanisms"


@dataclass(frozen=True)
class MeanMechanismSpec:
    """One mean mechanism: its name, where its class is, and what it declares."""

    name: str
    #: ``module:Class`` under :mod:`stream_dp.dp.mechanisms`.
    implementation: str
    #: Keyword arguments its name fixes (e.g. the array-averaging grouping).
    preset: dict[str, Any] = field(default_factory=dict)
    #: Each cell's release is (ε, δ)-DP: the mechanism needs ``delta``.
    needs_delta: bool = False
    #: Its default variant reads the stored reading prefixes (not only each vehicle's count
    #: and sums), so the window must keep them (docs/math.md §7).
    reads_prefix: bool = False
    #: It takes the stored prefix length C (``prefix_limit``) as a parameter.
    takes_prefix_limit: bool = False
    #: It states a data-independent worst-case error (its records carry ``error_bound``).
    states_error_bound: bool = False
    #: A cell is one Laplace release at the mean's budget: the PLD accountant composes it.
    pld_composes: bool = False
    #: The release runs it for every cell at once as the CLIP mean's combiner (§7.2); its
    #: worst case is against all of the cell's readings, and adaptive cells predict its error.
    window_combiner: bool = False

    @property
    def m_ub_free(self) -> bool:
        """Array averaging whose array length bound m_UB its name does not fix (the median by
        default; the experiments also run it with eq. (9))."""
        return self.implementation == _ARRAYS and "m_ub" not in self.preset

    @property
    def pure_epsilon(self) -> bool:
        """Each released cell is pure ε-DP (δ = 0)."""
        return not self.needs_delta

    def build(self, **params: Any) -> Any:
        """The mechanism (a ``MeanMechanism``) with ``params``; ValueError naming what is wrong."""
        fixed = sorted((set(self.preset) | {"name"}) & set(params))
        if fixed:
            raise ValueError(f"{self.name}: {fixed} fixed by the mechanism's name")
        module, cls = self.implementation.split(":")
        factory = getattr(importlib.import_module(f"{_PACKAGE}.{module}"), cls)
        extra = {**self.preset, "name": self.name} if self.preset else {}
        try:
            return factory(**extra, **params)
        except TypeError as exc:
            raise ValueError(f"{self.name}: bad parameters {sorted(params)}: {exc}") from None


def _laplace(name: str, implementation: str, **preset: Any) -> MeanMechanismSpec:
    """A mechanism releasing one Laplace draw at the mean's budget, with a stated bound."""
    return MeanMechanismSpec(
        name, implementation, preset, states_error_bound=True, pld_composes=True
    )


_ARRAYS = "array_averaging:ArrayAveraging"

MEAN_MECHANISMS: dict[str, MeanMechanismSpec] = {
    spec.name: spec
    for spec in (
        MeanMechanismSpec(
            "clip",
            "clip:ClipMean",
            states_error_bound=True,
            pld_composes=True,
            window_combiner=True,
        ),  # fmt: skip
        _laplace("baseline", "baseline:BaselineMean"),
        _laplace("array-averaging-wrap", _ARRAYS, grouping="wraparound"),
        _laplace("array-averaging-bestfit", _ARRAYS, grouping="bestfit"),
        MeanMechanismSpec("levy", "levy:LevyMean"),
        MeanMechanismSpec("quantile-fixed", "quantile:QuantileMean", {"variant": "fixed"}),
        MeanMechanismSpec("quantile-optimized", "quantile:QuantileMean", {"variant": "optimized"}),
        _laplace("opt-array-averaging", _ARRAYS, grouping="bestfit", m_ub="opt"),
        _laplace("opt-array-averaging-surrogate", _ARRAYS, grouping="bestfit", m_ub="surrogate"),
        _laplace("worst-case-optimal", "worst_case_optimal:WorstCaseOptimalMean"),
        MeanMechanismSpec("akmv", "akmv:AkmvMean"),
        MeanMechanismSpec(
            "cummings",
            "cummings:CummingsMean",
            needs_delta=True,
            reads_prefix=True,
            takes_prefix_limit=True,
        ),  # fmt: skip
    )
}

DEFAULT_MEAN_MECHANISM = "clip"

#: Every name, in the registry's order (the command line's choices).
MEAN_MECHANISM_NAMES: tuple[str, ...] = tuple(MEAN_MECHANISMS)


def mechanism_spec(name: str) -> MeanMechanismSpec:
    """The spec of ``name``; ValueError listing the known names."""
    try:
        return MEAN_MECHANISMS[name]
    except KeyError:
        known = ", ".join(sorted(MEAN_MECHANISMS))
        raise ValueError(f"unknown mean mechanism {name!r}; known: {known}") from None
