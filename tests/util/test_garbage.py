"""cir.util.garbage: the collector's thresholds raised while inside, put back after the last."""

from __future__ import annotations

import gc
import threading

from cir.util.garbage import THRESHOLDS, fewer_collections


def test_thresholds_inside_and_the_processs_own_put_back():
    own = gc.get_threshold()
    try:
        gc.set_threshold(900, 11, 12)
        with fewer_collections():
            assert gc.get_threshold() == THRESHOLDS
            with fewer_collections():  # nested (a second worker thread): still raised
                assert gc.get_threshold() == THRESHOLDS
            assert gc.get_threshold() == THRESHOLDS  # until the last one leaves
        assert gc.get_threshold() == (900, 11, 12)
    finally:
        gc.set_threshold(*own)


def test_threads_that_overlap_leave_the_process_as_it_was():
    own = gc.get_threshold()
    inside, leave = threading.Barrier(3), threading.Event()

    def worker():
        with fewer_collections():
            inside.wait()
            leave.wait()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert gc.get_threshold() == THRESHOLDS
    leave.set()
    for t in threads:
        t.join()
    assert gc.get_threshold() == own


def test_an_error_inside_still_puts_them_back():
    own = gc.get_threshold()
    try:
        with fewer_collections():
            raise ValueError("inside")
    except ValueError:
        pass
    assert gc.get_threshold() == own
