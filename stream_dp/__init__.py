"""stream-dp: hourly, per-H3-hexagon, user-level differentially private means and variances."""

__version__ = "0.1.0"
