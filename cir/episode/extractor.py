"""The feature extractor contract: what is known before a recovery decision, per environment.

Features parse the text an environment shows, so each environment family has its own
extractor. An extractor has a ``name`` (recorded in the router it is fitted with), a
``features`` mapping (``f_*`` column name -> one-line meaning, in column order) and
``extract(transcript, delay, *, max_turns, max_actions)`` returning exactly those keys as
finite floats. It may read only what the agent was shown up to the decision (the task
text, the agent's replies and actions, each step's ``shown`` text): a live harness has
exactly that, so a router fitted on the columns works at run time.

The replayer writes an extractor's features as the ``f_*`` columns of the paired table
(:func:`cir.pairs.replay.run_task_pairs`, ``extractor=``); :class:`~cir.router.policy.CIRPolicy` is
fitted with the same extractor, and the :class:`~cir.router.runtime.Router` it builds records its
name and refuses to load or run with another. Each environment family brings its extractor
(:class:`cir.families.family.Family`); the layers above this one take the default family's
when none is given (:func:`cir.families.registry.resolve_extractor`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from cir.util.errors import CirError

if TYPE_CHECKING:  # pragma: no cover
    from cir.episode.transcript import Transcript


@runtime_checkable
class FeatureExtractor(Protocol):
    """See the module docstring."""

    name: str
    features: dict[str, str]

    def extract(self, transcript: Transcript, delay: int, *, max_turns: int,
                max_actions: int) -> dict[str, float]: ...


def check_extractor(extractor: Any) -> FeatureExtractor:
    """``extractor`` checked (name, ``f_*`` feature names, ``extract``)."""
    if extractor is None:
        raise CirError("feature extractor: none given; expected an environment family's extractor")
    name = getattr(extractor, "name", None)
    if not isinstance(name, str) or not name:
        raise CirError(f"feature extractor {extractor!r}: expected a non-empty str attribute 'name'")
    features = getattr(extractor, "features", None)
    if not isinstance(features, dict) or not features:
        raise CirError(f"feature extractor {name!r}: expected a non-empty dict 'features' (name -> meaning)")
    bad = [f for f in features if not isinstance(f, str) or not f.startswith("f_")]
    if bad:
        raise CirError(f"feature extractor {name!r}: feature {bad[0]!r} must be a name starting with 'f_'")
    if not callable(getattr(extractor, "extract", None)):
        raise CirError(f"feature extractor {name!r}: expected a method extract(transcript, delay, ...)")
    return extractor


def extract(extractor: FeatureExtractor, transcript: Transcript, delay: int, *, max_turns: int,
            max_actions: int) -> dict[str, float]:
    """``extractor.extract(...)``, checked: exactly its features, in order, as finite floats."""
    values: Any = extractor.extract(transcript, delay, max_turns=max_turns, max_actions=max_actions)
    if not isinstance(values, dict) or list(values) != list(extractor.features):
        got = list(values) if isinstance(values, dict) else type(values).__name__
        raise CirError(f"feature extractor {extractor.name!r}: extract() returned {got!r:.200}; "
                       f"expected the keys of its 'features', in order")
    out = {}
    for key, value in values.items():
        number = float(value)
        if not math.isfinite(number):
            raise CirError(f"feature extractor {extractor.name!r}: {key} = {value!r}; expected a finite number")
        out[key] = number
    return out
