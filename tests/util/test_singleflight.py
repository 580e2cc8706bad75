"""One call per key at a time, however many threads ask (cir.util.singleflight)."""

from __future__ import annotations

import threading

import pytest

from cir.util.singleflight import SingleFlight


def test_threads_that_ask_at_once_share_one_call_and_its_exception():
    flight: SingleFlight[int] = SingleFlight()
    calls, barrier, release = [], threading.Barrier(6), threading.Event()

    def work():
        calls.append(1)
        release.wait(5)
        return 42

    results = []

    def ask():
        barrier.wait()
        results.append(flight.do("k", work))

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    barrier_passed = threading.Event()
    while len(flight) == 0:
        barrier_passed.wait(0.01)
    barrier_passed.wait(0.3)  # the other five are inside do() by now, waiting for the first
    release.set()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sorted(results) == [(42, False)] + [(42, True)] * 5
    assert len(flight) == 0

    def broken():
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        flight.do("k", broken)
    assert flight.do("k", lambda: 7) == (7, False)  # a failed call is not remembered
