"""The release choice's solver (dp/release_choice.py) against brute force on small random
instances: never a vehicle past its room, maximal, and within its certified bound."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from stream_dp.dp.release_choice import Candidates, Choice, choose_releases
from tests.support.release_choice_instances import random_instance


def _optimum(cands: Candidates, room: np.ndarray) -> float:
    options = [[-1, *np.flatnonzero(cands.group == g).tolist()] for g in range(cands.n_groups)]
    best = 0.0
    for combo in itertools.product(*options):
        chosen = np.array([k for k in combo if k >= 0], dtype=np.int64)
        if np.all(cands.usage(chosen, len(room)) <= room + 1e-9):
            best = max(best, float(cands.value[chosen].sum()))
    return best


def _leftover_fits(cands: Candidates, room: np.ndarray, choice: Choice) -> bool:
    """Whether some candidate would add value and fit (alone in its group, or replacing the
    group's choice) in what the choice leaves."""
    chosen_of = {int(cands.group[k]): int(k) for k in choice.chosen}
    for k in range(len(cands.value)):
        current = chosen_of.get(int(cands.group[k]))
        if cands.value[k] <= (0.0 if current is None else cands.value[current]):
            continue
        others = [c for c in choice.chosen.tolist() if c != current]
        spent = cands.usage(np.array([*others, k], dtype=np.int64), len(room))
        if np.all(spent <= room + 1e-9):
            return True
    return False


@pytest.mark.parametrize("seed", range(4))
def test_the_choice_is_feasible_maximal_and_within_its_certified_bound(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ratios = []
    for _ in range(60):
        cands, room = random_instance(rng, groups=4, per=3, vehicles=5)
        choice = choose_releases(cands, room)
        optimum = _optimum(cands, room)
        assert np.all(choice.spent <= room + 1e-9)  # never a vehicle past its room
        assert len(set(cands.group[choice.chosen].tolist())) == len(choice.chosen)
        assert choice.spent == pytest.approx(cands.usage(choice.chosen, len(room)))
        assert choice.value <= optimum + 1e-9
        assert optimum <= choice.upper_bound + 1e-9  # weak duality: the bound is proven
        assert choice.value >= choice.certified_ratio * optimum - 1e-9
        assert not _leftover_fits(cands, room, choice)  # no budget left for a better release
        ratios.append(choice.value / optimum if optimum > 0 else 1.0)
    assert np.mean(ratios) >= 0.95  # measured: 0.996 over 300 instances, least 0.73


def test_rooms_that_never_bind_give_each_group_its_best_and_a_tight_bound() -> None:
    rng = np.random.default_rng(7)
    cands, room = random_instance(rng, groups=6, per=4, vehicles=6)
    room = np.full(len(room), 100.0)
    choice = choose_releases(cands, room)
    best = [max(0.0, float(cands.value[cands.group == g].max())) for g in range(6)]
    assert choice.value == pytest.approx(sum(best))
    assert choice.upper_bound == pytest.approx(sum(best))
    assert choice.certified_ratio == pytest.approx(1.0)


def test_a_vehicle_with_no_room_is_in_no_chosen_candidate() -> None:
    cands = Candidates(
        np.array([0, 0, 1], dtype=np.int64), np.array([5.0, 3.0, 4.0]),
        np.array([0, 2, 3, 4], dtype=np.int64), np.array([0, 1, 1, 0], dtype=np.int64),
        np.array([1.0, 1.0, 0.5, 0.25]),
    )  # fmt: skip
    choice = choose_releases(cands, np.array([0.0, 1.0]))
    assert choice.chosen.tolist() == [1]
    assert choice.value == 3.0


def test_malformed_candidates_are_refused() -> None:
    with pytest.raises(ValueError, match="start"):
        Candidates(np.zeros(1, np.int64), np.ones(1), np.array([0, 2]), np.zeros(1, np.int64),
                   np.ones(1))  # fmt: skip
    with pytest.raises(ValueError, match="non-negative"):
        Candidates(np.zeros(1, np.int64), np.ones(1), np.array([0, 1]), np.zeros(1, np.int64),
                   -np.ones(1))  # fmt: skip
