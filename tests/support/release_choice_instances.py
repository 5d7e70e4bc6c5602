"""Random instances of the release choice (``stream_dp.dp.release_choice``): candidates in
groups, each paid by a random set of vehicles, and the vehicles' rooms. numpy only, so a
child process with only the runtime dependencies (``runtime_only``) can build them too."""

from __future__ import annotations

import numpy as np

from stream_dp.dp.release_choice import Candidates


def random_instance(
    rng: np.random.Generator, groups: int, per: int, vehicles: int
) -> tuple[Candidates, np.ndarray]:
    """``groups`` × ``per`` candidates over ``vehicles`` vehicles (payments in eighths, values
    in [-1, 10)) and rooms in quarters up to 2.75."""
    group = np.repeat(np.arange(groups), per)
    rng.shuffle(group)
    start, who, pay = [0], [], []
    for _ in group:
        members = rng.choice(vehicles, rng.integers(1, vehicles + 1), replace=False)
        who += members.tolist()
        pay += (rng.integers(1, 9, len(members)) / 8).tolist()
        start.append(len(who))
    value = rng.uniform(-1.0, 10.0, len(group))
    cands = Candidates(group.astype(np.int64), value, np.array(start, dtype=np.int64),
                       np.array(who, dtype=np.int64), np.array(pay))  # fmt: skip
    return cands, rng.integers(0, 12, vehicles) / 4
