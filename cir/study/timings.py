"""How long the study takes, measured: the one place the command's help and the README quote.

A help text or a document that says how long something takes says it with :meth:`Measured.claim`
of a constant here (``tests/cli/test_help.py`` fails on a time claim in any help that is not one),
and each constant says how and where it was measured. Measure again when the work changes (a
step added to the report, an engine change) and write the new number here; nothing else needs
to change.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    """A wall time: ``seconds`` of ``what``, measured as ``how`` says."""

    seconds: float
    what: str
    how: str

    def claim(self) -> str:
        """The time in words with its measurement: ``about 2 minutes on 2 cores (130 s measured)``."""
        minutes = self.seconds / 60
        about = (f"about {round(self.seconds)} s" if minutes < 1.5 else
                 f"about {round(minutes)} minutes" if minutes < 90 else f"about {minutes / 60:.1f} hours")
        return f"{about} on 2 cores ({round(self.seconds)} s measured)"


#: ``cir reproduce --quick`` with the built-in agent, from an empty --out to the report.
QUICK_STUDY = Measured(
    130.5, "cir reproduce --quick --out DIR (the built-in agent; generating and loading the games is most of it)",
    "/usr/bin/time on a 2-core host shared with other work (load 1 to 5), a fresh --out, the SAS cache warm")

#: Every measured time, by the name the help and the README use.
MEASURED = {"quick study": QUICK_STUDY}
