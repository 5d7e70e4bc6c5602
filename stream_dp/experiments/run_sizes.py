"""Releases per point of the mean-estimator experiment: the papers' count and the quick one
(a module of its own so that the command line reads them without importing the experiment)."""

DEFAULT_RUNS = 10_000  # ~1 h on 2 cores (--runs 1000: ~7 min)
QUICK_RUNS = 200
