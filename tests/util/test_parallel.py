"""parallel_map: order, in-process fallback, bad backends, and the silenced worker-restart warning."""

from __future__ import annotations

import warnings

import pytest

from cir.util.errors import CirError
from cir.util.parallel import parallel_map


def _scaled(x: int, factor: int) -> int:
    return x * factor


def _warns(message: str) -> str:
    warnings.warn(message, UserWarning, stacklevel=1)
    return message


@pytest.mark.parametrize(("jobs", "backend"), [(1, "loky"), (2, "loky"), (2, "threading")])
def test_ordered_results_match_a_plain_loop(jobs: int, backend: str) -> None:
    got = list(parallel_map(_scaled, range(20), 3, jobs=jobs, backend=backend))
    assert got == [3 * x for x in range(20)]


def test_unordered_results_are_the_same_set() -> None:
    got = list(parallel_map(_scaled, range(20), 2, jobs=2, backend="threading", ordered=False))
    assert sorted(got) == [2 * x for x in range(20)]


def test_unknown_backend_is_named() -> None:
    with pytest.raises(CirError, match=r"unknown backend 'ray': expected one of loky, threading, dask"):
        list(parallel_map(_scaled, [1], 1, backend="ray"))


def test_only_the_worker_restart_warning_is_silenced() -> None:
    restart = "A worker stopped while some jobs were given to the executor. This can be caused by a leak."
    other = "something else worth seeing"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        list(parallel_map(_warns, [restart, other], jobs=2, backend="threading"))
    messages = [str(w.message) for w in seen]
    assert other in messages and restart not in messages


class _HoldsAResponse(Exception):
    """Like an HTTP client's error: its constructor takes more than the message, so pickling it
    back from a worker fails."""

    def __init__(self, message: str, response: object) -> None:
        super().__init__(message)
        self.response = response


def _raises_unpicklable(x: int) -> int:
    raise _HoldsAResponse(f"server said no to {x}", response=object())


def _raises_cir_error(x: int) -> int:
    raise CirError(f"task {x}: bad")


def test_a_worker_error_that_cannot_travel_back_arrives_as_its_type_and_message() -> None:
    """Raised by code of the user's (this test file): their error as text, one line, their frames."""
    from cir.util.usercode import UserCodeError

    with pytest.raises(UserCodeError, match=r"^_raises_unpicklable raised _HoldsAResponse: server said no to 1$") as caught:
        list(parallel_map(_raises_unpicklable, [1], jobs=2))
    assert "_raises_unpicklable" in caught.value.trace and "_raises_unpicklable" in caught.value.frames
    assert "cir/util/parallel.py" not in caught.value.frames  # cir's frames only behind --traceback


def test_a_library_error_that_cannot_travel_back_arrives_as_a_worker_error() -> None:
    """Raised in a library (a framework's APIError holding its response): its type and message."""
    from cir.util.parallel import WorkerError, _travelling

    try:
        _raises_unpicklable(1)
    except _HoldsAResponse as err:
        travelled = _travelling(err)
    assert isinstance(travelled, WorkerError) and str(travelled) == "_HoldsAResponse: server said no to 1"


def test_a_worker_error_that_can_travel_arrives_as_itself() -> None:
    with pytest.raises(CirError, match=r"^task 3: bad$"):
        list(parallel_map(_raises_cir_error, [3], jobs=2))


def _raises_setting_error(x: int) -> int:
    from cir.util.errors import SettingError

    raise SettingError("max_turns", x, "an integer >= 1")


def test_a_users_error_that_cannot_travel_as_itself_stays_a_one_line_cir_error() -> None:
    with pytest.raises(CirError, match=r"^max_turns 0: expected an integer >= 1$"):
        list(parallel_map(_raises_setting_error, [0], jobs=2))
