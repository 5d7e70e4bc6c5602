"""Reproductions of the papers' experiments (seeded; they write PNG plots and CSV files)."""
