"""Recovery delays: env actions between the modified observation and the recovery decision.

A delay is checked here and nowhere else, whether it comes from a comma list on the
command line, an experiment config, a run record or the settings of a run.
"""

from __future__ import annotations

from collections.abc import Iterable

from cir.util.errors import CirError, SettingError

#: No episode is this long; a larger delay is a typo (and would overflow on reading back).
MAX_DELAY = 1_000_000


def check_delay(value: object, setting: str = "delays") -> int:
    """``value`` as a delay (an integer from 0 to :data:`MAX_DELAY`), else a SettingError of
    ``setting`` (the list it came from)."""
    number: object = value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        number = int(value.strip())  # "-1" is the number -1 (named so in the message)
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= MAX_DELAY:
        shown = number.strip() if isinstance(number, str) else number
        raise SettingError(setting, shown, f"an integer from 0 to {MAX_DELAY}", item="delay")
    return number


def check_delays(values: str | Iterable[object], what: str = "delays") -> tuple[int, ...]:
    """The delays of a comma list (``0,1,2,4``) or a sequence: at least one, each once."""
    items = values.split(",") if isinstance(values, str) else list(values)
    delays = tuple(check_delay(v, what) for v in items if not (isinstance(v, str) and not v.strip()))
    if not delays:
        raise CirError(f"{what}: expected at least one delay (e.g. 0,1,2,4)")
    if len(set(delays)) != len(delays):
        raise CirError(f"{what}: {list(delays)} lists a delay twice")
    return delays
