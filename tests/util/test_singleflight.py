"""One call per key at a time, however many threads ask (cir.util.singleflight)."""

from __future__ import annotations

import threading

import pytest

from cir.util.singleflight import SingleFlight


class _Watched(dict):
    """The flight's calls, counting the threads that found a call in flight (they hold its
    future and will take its result however late they get to wait on it)."""

    def __init__(self) -> None:
        super().__init__()
        self.joined = threading.Semaphore(0)

    def get(self, key, default=None):
        call = super().get(key, default)
        if call is not None:
            self.joined.release()
        return call


def test_threads_that_ask_at_once_share_one_call_and_its_exception():
    flight: SingleFlight[int] = SingleFlight()
    flight._calls = watched = _Watched()
    calls, barrier, release = [], threading.Barrier(6), threading.Event()

    def work():
        calls.append(1)
        release.wait()
        return 42

    results = []

    def ask():
        barrier.wait()
        results.append(flight.do("k", work))

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for _ in range(5):  # the other five joined the first one's call, however slowly they came
        assert watched.joined.acquire(timeout=300)
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
