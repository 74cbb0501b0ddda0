"""The compile lock around a kernel's first call (workbench.compiled.first_call).

flock locks belong to open file descriptions, so two opens in one process contend as two processes
would: the tests use threads and a second handle instead of spawning interpreters.
"""

from __future__ import annotations

import fcntl
import threading
import time

import pytest

from guards import deadline
from workbench.compiled import first_call
from workbench.compiled.first_call import locked_first_call


@pytest.fixture
def name(tmp_path, monkeypatch):
    """A lock name of this test's own, its file in the test's temp folder."""
    monkeypatch.setattr(first_call.tempfile, "gettempdir", lambda: str(tmp_path))
    return f"kernel-{time.monotonic_ns()}"


def _lock_is_free(name: str) -> bool:
    with open(first_call._lock_path(name, __file__), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


def test_the_first_call_holds_the_lock_and_later_calls_do_not(name):
    seen = []
    wrapped = locked_first_call(lambda x: seen.append(_lock_is_free(name)) or x * 2, name, __file__)
    assert wrapped(3) == 6 and wrapped(4) == 8
    assert seen == [False, True]  # held during the first call only
    assert _lock_is_free(name)


def test_a_second_first_call_waits_for_the_one_compiling(name):
    events = []

    def slow(tag):
        events.append(("start", tag, time.monotonic()))
        time.sleep(0.4)
        events.append(("end", tag, time.monotonic()))

    first, second = (locked_first_call(slow, name, __file__) for _ in range(2))
    worker = threading.Thread(target=first, args=("first",))
    worker.start()
    while not events:
        time.sleep(0.01)
    second("second")
    worker.join()
    assert [(kind, tag) for kind, tag, _ in events] == [("start", "first"), ("end", "first"),
                                                        ("start", "second"), ("end", "second")]


class _Clock:
    """The lock's clock, stepped by its own sleeps: waiting 180 s takes no time and is counted."""

    def __init__(self) -> None:
        self.now, self.sleeps = 1000.0, 0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1


def test_a_stuck_holder_is_waited_for_only_up_to_the_limit(name, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(first_call, "time", clock)
    with open(first_call._lock_path(name, __file__), "a") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        with deadline(30.0):  # a wait that ignored the limit would spin here for ever
            assert locked_first_call(lambda: "ran", name, __file__)() == "ran"
    waited = clock.now - 1000.0  # polled until the limit had passed, then ran without the lock
    assert first_call.WAIT_LIMIT <= waited <= first_call.WAIT_LIMIT + 2 * first_call._POLL
    assert clock.sleeps == round(waited / first_call._POLL)


def test_an_error_in_the_first_call_releases_the_lock_and_the_next_call_locks_again(name):
    calls = []

    def failing_once():
        calls.append(_lock_is_free(name))
        if len(calls) == 1:
            raise ValueError("compile failed")
        return "ok"

    wrapped = locked_first_call(failing_once, name, __file__)
    with pytest.raises(ValueError, match="compile failed"):
        wrapped()
    assert _lock_is_free(name)
    assert wrapped() == "ok" and calls == [False, False]


def test_two_copies_of_a_source_have_two_locks():
    assert first_call._lock_path("k", "/a/engine.py") != first_call._lock_path("k", "/b/engine.py")
    assert first_call._lock_path("k", "/a/engine.py") != first_call._lock_path("j", "/a/engine.py")
