"""A generic feature extractor for tool worlds (:class:`ToolFeatures`), reading only what the agent
was shown: the calls it made (each step's action) and the JSON results it saw (each step's
``shown`` text), never the true results. A family extends it by subclassing
(:meth:`ToolFeatures.more`) with features of its own records."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cir.episode.perturb import MISSING_TEXT
from cir.episode.transcript import Step, Transcript
from cir.tools.calls import CallError, parse_call, render_call
from cir.tools.results import anomalous, error_of, shape
from cir.tools.typed import FINISH, Tool

#: The generic features, each one line (the ``features`` mapping of the extractor).
FEATURES: dict[str, str] = {
    "f_delay": "env actions since the suspect result",
    "f_actions_left": "env actions left in the budget",
    "f_turns_left": "model turns left in the budget",
    "f_suspect_missing": "1 if the suspect result is the missing text",
    "f_suspect_error": "1 if the suspect result is an error object",
    "f_suspect_unparseable": "1 if the suspect result is not JSON (and not the missing text)",
    "f_suspect_read_only": "1 if the suspect call's tool only reads the state",
    "f_suspect_anomalous": "1 if the suspect result visibly answers another call (cir.tools.results.anomalous)",
    "f_suspect_repeat": "1 if an earlier result of the same call was shown exactly so",
    "f_suspect_changed": "1 if an earlier result of the same call was shown otherwise",
    "f_actions_since_read": "env actions between the last earlier same call and the suspect one (0: none)",
    "f_mutations_before": "state-changing calls between the last earlier same call and the suspect one",
    "f_mutations_after": "state-changing calls after the suspect result, up to the decision",
    "f_errors_after": "error results shown after the suspect one, up to the decision",
    "f_reread_after": "1 if the agent made the suspect call again after it",
}


class ToolFeatures:
    """The features of :data:`FEATURES` for a world's ``tools`` (see the module docstring);
    ``name`` is what a router fitted with it records."""

    def __init__(self, tools: Mapping[str, Tool], name: str = "tools") -> None:
        self.tools = dict(tools)
        self.name = name
        self.features = {**FEATURES, **self.more_features()}
        self._calls: dict[str, tuple[str, str, bool] | None] = {}

    def more_features(self) -> dict[str, str]:
        """A subclass's own features (name -> one-line meaning), after the generic ones."""
        return {}

    def more(self, transcript: Transcript, acted: list[Step], suspect: int, delay: int) -> dict[str, float]:
        """A subclass's own features' values (``acted``: the env-action steps up to the decision;
        ``suspect``: the suspect step's index among them)."""
        return {}

    def call(self, action: str | None) -> tuple[str, str, bool] | None:
        """``(tool name, canonical text, read-only)`` of an action, or None when it is no valid call."""
        if action is None:
            return None
        if action not in self._calls:
            try:
                parsed = parse_call(action, self.tools)
                self._calls[action] = (parsed.name, render_call(parsed, self.tools),
                                       self.tools[parsed.name].read_only)
            except CallError:
                self._calls[action] = None
        return self._calls[action]

    def extract(self, transcript: Transcript, delay: int, *, max_turns: int, max_actions: int) -> dict[str, float]:
        acted = [s for s in transcript.steps if s.action is not None]
        f = dict.fromkeys(self.features, 0.0)
        f["f_delay"] = float(delay)
        f["f_actions_left"] = float(max_actions - len(acted))
        f["f_turns_left"] = float(max_turns - transcript.model_turns)
        i = len(acted) - delay - 1
        if i < 0:
            f.update(self.more(transcript, acted, i, delay))
            return f
        suspect = acted[i]
        shown = suspect.shown
        f["f_suspect_missing"] = float(shown.strip() == MISSING_TEXT)
        value = _json(shown)
        f["f_suspect_unparseable"] = float(value is _NOT_JSON and not f["f_suspect_missing"])
        f["f_suspect_error"] = float(error_of(shown) is not None)
        call = self.call(suspect.action)
        if call is not None:
            name, text, read_only = call
            f["f_suspect_read_only"] = float(read_only)
            shapes: dict[str, set[str]] = {}
            last = None
            for j, step in enumerate(acted[:i]):
                other = self.call(step.action)
                v = _json(step.shown)
                if other is not None and v is not _NOT_JSON and error_of(step.shown) is None:
                    shapes.setdefault(other[0], set()).add(shape(v))
                if other is not None and other[1] == text:
                    last = j
                    if step.shown == shown:
                        f["f_suspect_repeat"] = 1.0
                    else:
                        f["f_suspect_changed"] = 1.0
            f["f_suspect_anomalous"] = float(anomalous(suspect.action or "", shown, self.tools, shapes))
            if last is not None:
                f["f_actions_since_read"] = float(i - last)
                f["f_mutations_before"] = float(sum(self._mutates(s) for s in acted[last + 1:i]))
            f["f_reread_after"] = float(any((self.call(s.action) or ("", "", False))[1] == text
                                            for s in acted[i + 1:]))
        f["f_mutations_after"] = float(sum(self._mutates(s) for s in acted[i + 1:]))
        f["f_errors_after"] = float(sum(error_of(s.shown) is not None for s in acted[i + 1:]))
        f.update(self.more(transcript, acted, i, delay))
        return f

    def _mutates(self, step: Step) -> bool:
        call = self.call(step.action)
        return call is not None and not call[2] and call[0] != FINISH and error_of(step.shown) is None


_NOT_JSON = object()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _NOT_JSON
