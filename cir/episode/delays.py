"""Recovery delays: env actions between the modified observation and the recovery decision.

A delay is checked here and nowhere else, whether it comes from a comma list on the
command line, an experiment config, a run record or the settings of a run.
"""

from __future__ import annotations

from collections.abc import Iterable

from cir.util.errors import CirError

#: No episode is this long; a larger delay is a typo (and would overflow on reading back).
MAX_DELAY = 1_000_000


def check_delay(value: object, what: str = "delay") -> int:
    """``value`` as a delay (an integer from 0 to :data:`MAX_DELAY`), else a CirError."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            number = int(str(value).strip())
        except ValueError:
            raise CirError(f"{what} {value!r}: expected an integer >= 0") from None
        if str(number) != str(value).strip().lstrip("+"):
            raise CirError(f"{what} {value!r}: expected an integer >= 0")
        value = number
    if value < 0:
        raise CirError(f"{what} {value}: expected an integer >= 0 (env actions after the perturbation)")
    if value > MAX_DELAY:
        raise CirError(f"{what} {value}: expected at most {MAX_DELAY} env actions")
    return value


def check_delays(values: str | Iterable[object], what: str = "delays") -> tuple[int, ...]:
    """The delays of a comma list (``0,1,2,4``) or a sequence: at least one, each once."""
    items = values.split(",") if isinstance(values, str) else list(values)
    delays = tuple(check_delay(v) for v in items if not (isinstance(v, str) and not v.strip()))
    if not delays:
        raise CirError(f"{what}: expected at least one delay (e.g. 0,1,2,4)")
    if len(set(delays)) != len(delays):
        raise CirError(f"{what}: {list(delays)} lists a delay twice")
    return delays
