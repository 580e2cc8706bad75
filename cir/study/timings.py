"""How long the study takes, measured: the one place the command's help and the README quote.

The times live in ``measured.json`` beside this module, which ``benchmarks/study_bench.py
--baseline DIR --write-measured`` writes (each with the date, the cores and the load average it
was measured at, the baseline beside it in the same sitting). A help text or a document that says
how long something takes says it with :meth:`Measured.claim` of a time here
(``tests/cli/test_help.py`` fails on a time claim in any help that is not one). Measure again
when the work changes and commit the file; nothing else needs to change.

Read with the standard library only: the command line's help texts use it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

MEASURED_JSON = Path(__file__).with_name("measured.json")


@dataclass(frozen=True)
class Measured:
    """A wall time: ``seconds`` of ``what``, measured as ``how`` says."""

    seconds: float
    what: str
    how: str

    def claim(self) -> str:
        """The time in words with its measurement: ``about 33 s on 2 cores (32.5 s measured)``."""
        minutes = self.seconds / 60
        about = (f"about {round(self.seconds)} s" if minutes < 1.5 else
                 f"about {round(minutes)} minutes" if minutes < 90 else f"about {minutes / 60:.1f} hours")
        return f"{about} on 2 cores ({self.seconds:g} s measured)"


_ENTRIES = json.loads(MEASURED_JSON.read_text(encoding="utf-8"))


def _read(name: str, what: str) -> Measured:
    entry = _ENTRIES[name]
    load = entry.get("load") or []
    how = (f"{entry['command']} on {entry['cores']} cores, load {max(load) if load else 'not recorded'}, "
           f"{entry['date']}")
    return Measured(float(entry["seconds"]), what, how)


#: ``cir reproduce --quick`` with the built-in agent, from an empty --out to the report.
QUICK_STUDY = _read("quick_study", "cir reproduce --quick --jobs 2 --out DIR (the built-in agent), a new --out, "
                                   "the engine's translations warm, the planted worlds cold")

#: ``cir reproduce --replicates 5 --jobs 2`` from a fresh clone with a new user cache: the reference study.
FULL_STUDY = _read("five_replicate_study", "cir reproduce --replicates 5 --jobs 2 --out DIR (the built-in agent) in a "
                                           "fresh clone, a new user cache (the engine's translations and the "
                                           "planted worlds cold), the 3 x 200 planted-world replicates included")

#: Every measured time, by the name the help and the README use.
MEASURED = {"quick study": QUICK_STUDY, "five-replicate study": FULL_STUDY}
