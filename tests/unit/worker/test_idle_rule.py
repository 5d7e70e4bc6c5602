"""The pure idle decision: only fresh, unbroken fetch confirmations make a partition idle."""

from __future__ import annotations

import pytest

from stream_dp.worker.idle_rule import (
    FETCHED_FACTOR,
    STALE_FACTOR,
    InputObservation,
    confirm_gap,
    decide_idle,
    input_state_from,
    unseen_limit,
)

IDLE = 3.0


def observe(now, *, fetched_at=None, end=10, position=None, applied_next=10, last_applied_at=0.0):
    return InputObservation(
        now=now,
        fetched_at=now if fetched_at is None else fetched_at,
        end=end,
        position=position,
        applied_next=applied_next,
        last_applied_at=last_applied_at,
    )


def run(observations):
    """Feed the observations in order, carrying the quiet span; return every decision."""
    since, confirmed, out = None, None, []
    for obs in observations:
        decision = decide_idle(obs, since, IDLE, confirmed)
        since, confirmed = decision.quiet_since, decision.confirmed_at
        out.append(decision)
    return out


def test_confirmed_quiet_for_the_idle_time_is_idle():
    decisions = run(observe(t) for t in (1.0, 2.0, 3.0, 4.0, 5.0))
    assert [d.idle for d in decisions] == [False, False, False, True, True]


def test_a_remembered_end_from_before_an_outage_never_makes_a_partition_idle():
    """Last fetch answered at t=1; the broker is paused from then on."""
    decisions = run(observe(t, fetched_at=1.0) for t in (1.0, 2.0, 3.0, 10.0, 100.0, 1000.0))
    assert not any(d.idle for d in decisions)


def test_an_outage_restarts_the_quiet_span():
    before = [observe(t) for t in (1.0, 2.0, 3.0)]
    paused = [observe(t, fetched_at=3.0) for t in (4.0, 5.0, 6.0)]  # no fetch answered
    after = [observe(t) for t in (7.0, 8.0, 9.0, 10.0)]
    decisions = run([*before, *paused, *after])
    assert [d.idle for d in decisions] == [False] * 9 + [True]
    assert decisions[6].quiet_since == 7.0


def test_an_outage_no_observation_saw_restarts_the_quiet_span():
    """The observer itself waited through the pause (its timer blocked on the broker): the
    first confirmation after it is fresh and the end it reports is all applied, but the 9
    seconds before it were never confirmed."""
    decisions = run(observe(t) for t in (1.0, 2.0, 11.0, 12.0, 13.0, 14.0))
    assert [d.idle for d in decisions] == [False, False, False, False, False, True]
    assert decisions[2].quiet_since == 11.0 and decisions[2].confirmed_at == 11.0


@pytest.mark.parametrize(("gap", "restarts"), [(unseen_limit(IDLE), False), (2.6, True)])
def test_a_late_observation_restarts_the_span_only_past_the_unseen_limit(gap, restarts):
    assert unseen_limit(IDLE) == 2.5
    decisions = run(observe(t) for t in (1.0, 1.0 + gap, 4.0))
    assert decisions[1].quiet_since == (1.0 + gap if restarts else 1.0)
    assert decisions[2].idle is not restarts


def test_a_failed_fetch_or_unknown_end_is_not_evidence():
    assert not decide_idle(observe(50.0, end=None), 0.0, IDLE).idle
    unknown = InputObservation(50.0, None, 10, 10, 10, 0.0)
    assert decide_idle(unknown, 0.0, IDLE) == decide_idle(unknown, None, IDLE)
    assert not decide_idle(unknown, 0.0, IDLE).idle


def test_unapplied_input_is_not_idle_until_the_weaker_rules_apply():
    backlog = dict(end=500, applied_next=10)
    assert not decide_idle(observe(50.0, position=250, **backlog), 50.0 - IDLE * 5, IDLE).idle
    fetched = dict(end=500, applied_next=10, position=500)
    assert not decide_idle(observe(50.0, **fetched), 50.0 - IDLE * 2, IDLE).idle
    assert decide_idle(observe(50.0, **fetched), 50.0 - IDLE * FETCHED_FACTOR, IDLE).idle
    assert decide_idle(observe(50.0, position=3, **backlog), 50.0 - IDLE * STALE_FACTOR, IDLE).idle


def test_readings_applied_during_the_span_restart_it():
    decision = decide_idle(observe(10.0, last_applied_at=9.0), 1.0, IDLE)
    assert not decision.idle and decision.quiet_since == 9.0


def test_an_end_below_the_applied_offset_is_lost_input_never_idle():
    decision = decide_idle(observe(100.0, end=0, applied_next=500), 0.0, IDLE)
    assert decision.input_lost and not decision.idle and decision.quiet_since is None


@pytest.mark.parametrize(("idle", "gap"), [(3.0, 1.5), (30.0, 2.0), (0.5, 0.25)])
def test_the_confirmation_gap_is_below_the_idle_time(idle, gap):
    assert confirm_gap(idle) == gap < idle


def test_the_fetch_age_comes_from_aiokafkas_wall_clock_stamp():
    assert input_state_from(10, 9, 1_000_500, wall_now=1_002.0) == (10, 9, 1.5)
    assert input_state_from(10, 9, None).fetched_age is None
    assert input_state_from(10, 9, 5_000, wall_now=4.0).fetched_age == 0.0  # clock stepped back
