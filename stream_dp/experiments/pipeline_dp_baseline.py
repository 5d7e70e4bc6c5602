"""PipelineDP (LocalBackend) as the baseline the experiments and benchmarks compare against:
its MEAN (and VARIANCE) with Laplace noise, contributions bounded per privacy unit."""

from __future__ import annotations

from typing import Any


def pipeline_dp_aggregate(
    rows: list[tuple[Any, Any, float]],
    partitions_per_unit: int,
    per_partition: int,
    epsilon: float,
    upper: float,
    public_partitions: list[Any],
    with_variance: bool = True,
) -> list[tuple[Any, Any]]:
    """PipelineDP's MEAN (and VARIANCE) with Laplace noise on ``(privacy unit, partition,
    value)`` rows in ``[0, upper]``: each unit contributes to at most ``partitions_per_unit``
    partitions and ``per_partition`` values in each, for ``partitions_per_unit * epsilon`` in
    all. Returns ``(partition, metrics)`` pairs."""
    import pipeline_dp

    metrics = [pipeline_dp.Metrics.MEAN]
    if with_variance:
        metrics.append(pipeline_dp.Metrics.VARIANCE)
    total = partitions_per_unit * epsilon
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=total, total_delta=0)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=metrics,
        noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        max_partitions_contributed=partitions_per_unit,
        max_contributions_per_partition=per_partition,
        min_value=0.0,
        max_value=upper,
    )
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda row: row[0],
        partition_extractor=lambda row: row[1],
        value_extractor=lambda row: row[2],
    )
    result = engine.aggregate(rows, params, extractors, public_partitions=public_partitions)
    accountant.compute_budgets()
    return list(result)
