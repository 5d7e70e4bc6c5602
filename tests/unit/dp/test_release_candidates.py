"""The candidate releases' figures (dp/release_candidates.py) against brute force and
simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stream_dp.dp.epsilon_grid import round_up
from stream_dp.dp.error_bars import LN20, SAMPLER_RTOL, mean_error
from stream_dp.dp.float_mean import share_slack
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.release_candidates import (
    cell_options,
    entry_payments,
    grouped_candidates,
    useful_probability,
    with_exclusions,
)
from stream_dp.dp.release_choice import Candidates, choose_releases
from stream_dp.release.vehicle_budget.planner import plan_budget


def _random_cells(
    rng: np.random.Generator, n_cells: int, vehicles: int = 7, readings: int = 30
) -> tuple[np.ndarray, np.ndarray]:
    sizes = rng.integers(1, vehicles, n_cells)
    counts = rng.integers(1, readings, int(sizes.sum()))
    return np.r_[0, np.cumsum(sizes)].astype(np.int64), counts.astype(np.int64)


FACTORS = np.array([1.0, 1.5, 3.0])


@pytest.mark.parametrize("prefix_limit", [None, 8])
def test_each_option_takes_the_least_epsilon_meeting_t_and_the_cap_of_least_error(
    prefix_limit: int | None,
) -> None:
    rng = np.random.default_rng(3)
    start, counts = _random_cells(rng, 40, vehicles=9)
    sits_out = rng.random(len(counts)) < 0.2
    upper, target, tau, burst, share = 65.0, 10.0, 6.5, 3.5, 1.0
    opts = cell_options(start, counts, upper=upper, target=target, tau=tau, factors=FACTORS,
                        max_epsilon=burst, prefix_limit=prefix_limit, min_vehicles=2,
                        sits_out=sits_out)  # fmt: skip
    for g in range(len(start) - 1):
        m, out = counts[start[g] : start[g + 1]], sits_out[start[g] : start[g + 1]]
        total, read = int(m.sum()), m[~out]
        if not len(read):
            assert not opts.meets[g].any()
            continue
        top = int(read.max())
        caps = [c for c in range(int(read.min()), top + 1)
                if prefix_limit is None or c <= prefix_limit or c == top]  # fmt: skip
        kept = {c: int(np.minimum(read, c).sum()) for c in caps}
        bias = {c: upper * (1 - kept[c] / total) for c in caps}
        need = [LN20 * upper * c * (1 + SAMPLER_RTOL) / (kept[c] * (target - bias[c]))
                for c in caps if bias[c] < target]  # fmt: skip
        eps_mu = min(need) if need else np.inf
        for j, factor in enumerate(FACTORS):
            eps = float(round_up(np.array(eps_mu / share * factor)))  # factor 1: the plan's ε
            assert opts.epsilon[g, j] == eps
            if not np.isfinite(eps):
                assert not opts.meets[g, j]
                continue
            errors = [float(mean_error(upper, eps, c, kept[c], total)) for c in caps]
            assert opts.error[g, j] == pytest.approx(min(errors), rel=1e-12)
            assert min(errors) <= target * (1 + 1e-9)  # ε_T and above meet T
            c, s = int(opts.cap[g, j]), int(opts.kept[g, j])
            assert c in caps and s == kept[c]
            assert opts.meets[g, j] == (eps <= burst and len(read) >= 2)
            b, scale = upper * (1 - s / total), upper * c / (s * eps)
            p = 1 - (math.exp(-(tau - b) / scale) + math.exp(-(tau + b) / scale)) / 2
            if b > tau:
                p = (math.exp(-(b - tau) / scale) - math.exp(-(b + tau) / scale)) / 2
            assert opts.useful[g, j] == pytest.approx(p * total, rel=1e-9, abs=1e-12)
        assert opts.total[g] == total


@pytest.mark.parametrize("bias", [0.0, 2.0, 6.0, 8.0])
def test_the_useful_probability_is_a_lower_bound_reached_at_the_worst_bias(bias: float) -> None:
    rng = np.random.default_rng(11)  # a test's seed: the bound against simulated noise
    tau, scale = 6.5, 3.0
    bound = float(useful_probability(tau, np.array(bias), np.array(scale)))
    noise = rng.laplace(0.0, scale, 400_000)
    for shift in np.linspace(-bias, bias, 5):
        hit = float(np.mean(np.abs(shift + noise) <= tau))
        assert hit >= bound - 0.004  # over 5 sigma of 400,000 draws
    at_worst = float(np.mean(np.abs(bias + noise) <= tau))
    assert at_worst == pytest.approx(bound, abs=0.004)


def test_a_vehicle_pays_its_own_share_at_the_cap_the_whole_epsilon_and_sitting_out_nothing() -> (
    None
):
    start = np.array([0, 4], dtype=np.int64)
    counts = np.array([1, 5, 5, 9], dtype=np.int64)
    out = np.array([False, False, False, True])
    opts = cell_options(start, counts, upper=65.0, target=40.0, tau=6.5, factors=FACTORS,
                        max_epsilon=100.0, sits_out=out)  # fmt: skip
    pay = entry_payments(start, opts)
    assert np.all(opts.cap[0] == 5) and np.all(opts.kept[0] == 11) and opts.total[0] == 20
    assert np.all(pay[1:3] == opts.epsilon[0]) and np.all(pay[3] == 0.0)
    assert np.all(pay[0] < opts.epsilon[0]) and np.all(pay[0] > 0)
    assert np.all(pay[0] == round_up(opts.epsilon[0] * (0.2 + share_slack(5, 11))))


def test_a_candidate_releases_its_layouts_cells_meeting_t_and_sums_each_vehicles_payments() -> None:
    rng = np.random.default_rng(5)
    start, counts = _random_cells(rng, 30, vehicles=12, readings=4)
    vehicle = rng.integers(0, 12, len(counts)).astype(np.int64)
    for g in range(len(start) - 1):  # one entry per vehicle and cell
        vehicle[start[g] : start[g + 1]] = rng.choice(12, start[g + 1] - start[g], replace=False)
    opts = cell_options(
        start, counts, upper=65.0, target=40.0, tau=20.0, factors=FACTORS, max_epsilon=4.0
    )
    pay = entry_payments(start, opts)
    group, layout = rng.integers(0, 5, 30), rng.integers(0, 2, 30)
    stale = rng.uniform(0, 0.3, 30)
    cands, column = grouped_candidates(start, vehicle, opts, pay, group, layout, stale)
    seen = 0
    for g in np.unique(group):
        for lay in (0, 1):
            for j in range(len(FACTORS)):
                cells = [c for c in range(30) if group[c] == g and layout[c] == lay
                         and opts.meets[c, j]]  # fmt: skip
                if not cells:
                    continue
                value = sum(opts.useful[c, j] * (1 - stale[c]) for c in cells)
                owed: dict[int, float] = {}
                for c in cells:
                    for e in range(start[c], start[c + 1]):
                        owed[int(vehicle[e])] = owed.get(int(vehicle[e]), 0.0) + pay[e, j]
                k = int(np.flatnonzero(np.isclose(cands.value, value) & (column == j))[0])
                span = slice(cands.start[k], cands.start[k + 1])
                got = dict(zip(cands.vehicle[span].tolist(), cands.pay[span].tolist(), strict=True))
                assert got == pytest.approx(owed)
                seen += 1
    assert seen == len(cands.value)
    same_group = cands.group[:, None] == cands.group[None, :]
    assert seen > 10 and same_group.sum() > len(cands.value)  # one group: exclusive options


@pytest.mark.parametrize("prefix_limit", [None, 6])
def test_the_first_option_is_the_epsilon_and_cap_the_current_plan_gives_a_cell(
    prefix_limit: int | None,
) -> None:
    rng = np.random.default_rng(17)
    cells, vehicles, counts = [], [], []
    for g in range(60):
        for v in rng.choice(40, rng.integers(1, 25), replace=False):
            cells.append(f"c{g:03d}")
            vehicles.append(f"v{v:03d}")
            counts.append(int(rng.integers(1, 20)))
    occ = Occupancy.from_arrays(cells, vehicles, counts)
    burst = 3.5
    plan = plan_budget(occ, np.full(len(occ.vehicles), 1e6), target=10.0, upper=65.0,
                       variance_share=0.0, max_cell_epsilon=burst, prefix_limit=prefix_limit,
                       pseudo_user=True)  # fmt: skip
    opts = cell_options(occ.cell_start, occ.count, upper=65.0, target=10.0, tau=6.5,
                        factors=FACTORS, max_epsilon=burst, prefix_limit=prefix_limit)  # fmt: skip
    released = np.isfinite(plan.epsilon)
    assert released.sum() > 10 and (~released).sum() > 5
    assert np.array_equal(opts.meets[:, 0], released)
    assert np.array_equal(opts.epsilon[released, 0], plan.epsilon[released])
    assert np.array_equal(opts.cap[released, 0], plan.cap[released])


def test_candidates_covering_the_same_observed_cell_are_never_chosen_together() -> None:
    rng = np.random.default_rng(23)
    n, observed = 30, 8
    sizes = rng.integers(1, 4, n)
    start = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    vehicle = np.concatenate([rng.choice(6, k, replace=False) for k in sizes]).astype(np.int64)
    cands = Candidates(np.arange(n, dtype=np.int64) // 2, rng.uniform(1, 5, n), start, vehicle,
                       rng.uniform(0.1, 1.0, len(vehicle)))  # fmt: skip
    n_cover = rng.integers(1, 4, n)
    covers = np.concatenate([rng.choice(observed, k, replace=False) for k in n_cover])
    excl = with_exclusions(cands, np.r_[0, np.cumsum(n_cover)], covers, 6)
    for k in range(n):  # its own payments, then 1 to each room it covers
        mine = slice(excl.start[k], excl.start[k + 1])
        assert excl.vehicle[mine].tolist() == [
            *vehicle[start[k] : start[k + 1]].tolist(),
            *(6 + covers[np.r_[0, np.cumsum(n_cover)][k] :][: n_cover[k]]).tolist(),
        ]
        assert excl.pay[mine][sizes[k] :].tolist() == [1.0] * n_cover[k]
    choice = choose_releases(excl, np.r_[np.full(6, 2.0), np.ones(observed)])
    covered = np.concatenate(
        [excl.vehicle[excl.start[k] : excl.start[k + 1]] for k in choice.chosen]
    )
    covered = covered[covered >= 6]
    assert len(covered) == len(set(covered.tolist())) and len(choice.chosen) > 1
