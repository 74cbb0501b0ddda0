"""``workbench.kit.deadline.Deadline`` on a clock the test drives, and a formulation that stops when
the clock says so (no wall-clock expectations)."""

import math

import pytest
from hypothesis import given, strategies as st

from workbench.plugin import call
from workbench.kit import deadline as deadline_module
from workbench.kit.deadline import Deadline, DeadlineExpired


class FakeClock:
    def __init__(self, now: float = 100.0, step: float = 0.0) -> None:
        self.now, self.step = now, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_remaining_elapsed_and_expiry_follow_the_clock():
    clock = FakeClock()
    deadline = Deadline(10.0, clock=clock)
    assert deadline.remaining() == 10.0 and not deadline.expired and deadline.elapsed() == 0.0
    clock.now += 4.0
    assert deadline.remaining() == 6.0 and deadline.elapsed() == 4.0
    clock.now += 6.5
    assert deadline.remaining() == 0.0 and deadline.expired
    with pytest.raises(DeadlineExpired):
        deadline.check()


@pytest.mark.parametrize("seconds", [None, math.inf])
def test_none_or_infinity_means_no_deadline(seconds):
    clock = FakeClock()
    deadline = Deadline(seconds, clock=clock)
    clock.now += 1e9
    assert deadline.unlimited and not deadline.expired and deadline.remaining() == math.inf
    deadline.check()
    assert deadline.share(0.5).unlimited
    assert deadline.limit(cap=30.0) == 30.0


def test_a_share_is_a_fraction_of_what_is_left():
    clock = FakeClock()
    deadline = Deadline(10.0, clock=clock)
    clock.now += 2.0
    phase = deadline.share(0.25)
    assert phase.remaining() == pytest.approx(2.0)
    clock.now += 2.5
    assert phase.expired and not deadline.expired
    with pytest.raises(ValueError, match="share"):
        deadline.share(0.0)
    with pytest.raises(ValueError, match="share"):
        deadline.share(1.5)


@given(st.floats(0.01, 1e4), st.floats(0.0, 2e4), st.one_of(st.none(), st.floats(0.01, 100.0)),
       st.floats(0.0, 1.0))
def test_a_solver_limit_is_what_is_left_capped_and_floored(seconds, spent, cap, floor):
    clock = FakeClock()
    deadline = Deadline(seconds, clock=clock)
    clock.now += spent
    limit = deadline.limit(cap=cap, floor=floor)
    left = max(0.0, seconds - spent)
    assert limit == pytest.approx(max(floor, min(left, cap if cap is not None else math.inf)))
    assert limit >= floor


@pytest.mark.parametrize("seconds", [0, -1.0])
def test_no_time_at_all_is_a_deadline_already_come(seconds):
    deadline = Deadline(seconds, clock=FakeClock(step=1e-9))
    assert deadline.expired and deadline.remaining() == 0.0 and not deadline.unlimited


def test_until_takes_an_absolute_time():
    clock = FakeClock(now=5.0)
    deadline = Deadline.until(7.5, clock=clock)
    assert deadline.at == 7.5 and deadline.remaining() == 2.5


def test_a_formulation_stops_when_the_module_clock_says_time_is_up(monkeypatch):
    """TACOS's restarts stop at the deadline: the clock jumps a second per reading, so a 10 s
    limit ends after a few restarts whatever this machine's speed."""
    from formulations.tacos import Tacos
    from workbench.model.collective import make_collective
    from workbench.plugin.registry import Problem
    from workbench.topology import build

    monkeypatch.setattr(deadline_module, "CLOCK", FakeClock(step=1.0))
    problem = Problem(build("ring:4"), make_collective("allgather", 4, 1), 4e6)
    result = call.synthesize(Tacos(), problem, time_limit=10.0, seed=0, restarts=1000)
    assert result.status == "timeout"
    assert result.algorithms, "the best restart so far is kept"
    assert 0 < result.stats["restarts_done"] < 1000
