"""The runtime Router: a fitted CIR policy that a harness asks "refresh now?".

A router is plain numbers in a JSON file (DESIGN.md, "Router artifact"): the feature
names, the three models' scaler means/scales, coefficients and intercepts, the
thresholds, the settings, the baselines' parameters (so ``cir evaluate`` needs only
this file and a test table), a summary of training, the ``cir`` version and a format
version. Loading parses JSON and checks every key and type; it never executes code
(no pickle, no eval), so a router file from anyone is safe to load.

``router.decide(transcript, delay)`` computes the features of the router's extractor
(:mod:`cir.episode.extractor`; ALFWorld's :func:`cir.families.alfworld.features.extract_features` by default) on
the transcript (what the agent was shown up to now) and applies the CIR rule with
the arithmetic of :mod:`cir.router.rule`, as the estimator (:class:`cir.router.policy.CIRPolicy`, whose
``to_router()`` builds a router) and the offline evaluation do, so the live decision
equals the offline decision on the same features. :class:`RouterHook` puts a router
(or anything that decides like one) into a harness run.

The router records the name of the extractor it was fitted with and refuses to load or
run with another (a file of format version 1, before extractors were named, is ALFWorld's).

File layout (format version 2)::

    {"format": "cir-router", "format_version": 2, "cir_version": "0.1.0",
     "extractor": "alfworld", "features": ["f_delay", ...],
     "models": {"p_err": {"scaler_mean": [...], "scaler_scale": [...], "coef": [...],
                          "intercept": 0.0}, "p0": {...}, "p1": {...}},
     "thresholds": {"alpha": 0.8 | null, "beta": 0.05, "gamma": 0.0},   # null: never passes
     "settings": {"lam": 2.0, "epsilon": 0.02, "d_min": 1, "delays": [1, 2, 4], "C": 0.1,
                  "folds": 5, "operation": "refresh", "grid_size": 21, "seed": 0,
                  "max_iter": 1000, "max_turns": 49, "max_actions": 64},
     "baselines": {"anomaly": {"alpha": ..., "oof_net_gain": ..., "oof_clean_harm": ...,
                               "oof_intervention_rate": ...},
                   "anomaly_rate_matched": {...same keys...},
                   "always": {"delay": 1, "train_net_gain": ..., "train_clean_harm": ...,
                              "meets_epsilon": true}},
     "training": {"n_tasks": ..., "decision_cells": ..., "oof_net_gain": ...,
                  "oof_clean_harm": ..., "oof_intervention_rate": ..., "task_ids": [...],
                  "agents": ["builtin:default@d5a7ae80"]}}
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from cir import __version__
from cir.episode.extractor import FeatureExtractor, builtin_extractors, extract, resolve_extractor
from cir.episode.transcript import HARNESS, Transcript
from cir.router.rule import MODEL_NAMES, LinearModel, blocked_by, predict
from cir.util.errors import CirError
from cir.util.files import read_json, write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from cir.envs.base import Env
    from cir.episode.harness import Harness

FORMAT = "cir-router"
FORMAT_VERSION = 2
#: A router is a few KB (plus its training task ids); a larger file is refused unread.
MAX_ROUTER_BYTES = 16 * 1024 * 1024

_NUM = (int, float)
_OPT_NUM = (int, float, type(None))
# key -> expected type(s), or a nested spec (dict), for each part of the file.
_MODEL_SPEC = {"scaler_mean": list, "scaler_scale": list, "coef": list, "intercept": _NUM}
_SETTINGS_SPEC = {"lam": _NUM, "epsilon": _NUM, "d_min": int, "delays": list, "C": _NUM, "folds": int,
                  "operation": str, "grid_size": int, "seed": int, "max_iter": int,
                  "max_turns": int, "max_actions": int}
_ANOMALY_SPEC = {"alpha": _OPT_NUM, "oof_net_gain": _NUM, "oof_clean_harm": _NUM,
                 "oof_intervention_rate": _NUM}
_SPEC: dict[str, Any] = {
    "format": str,
    "format_version": int,
    "cir_version": str,
    "extractor": str,
    "features": list,
    "models": {name: _MODEL_SPEC for name in MODEL_NAMES},
    "thresholds": {"alpha": _OPT_NUM, "beta": _OPT_NUM, "gamma": _OPT_NUM},
    "settings": _SETTINGS_SPEC,
    "baselines": {"anomaly": _ANOMALY_SPEC, "anomaly_rate_matched": _ANOMALY_SPEC,
                  "always": {"delay": int, "train_net_gain": _NUM, "train_clean_harm": _NUM,
                             "meets_epsilon": bool}},
    "training": {"n_tasks": int, "decision_cells": int, "oof_net_gain": _NUM,
                 "oof_clean_harm": _NUM, "oof_intervention_rate": _NUM, "task_ids": list,
                 "agents": list},
}

_SPEC_V1 = {k: v for k, v in _SPEC.items() if k != "extractor"}


@dataclass(frozen=True)
class Decision:
    """A router's answer at one decision point, with everything worth logging.

    ``blocked_by`` names the first condition of the rule that failed: ``"delay"``
    (not a candidate delay, or below d_min), ``"p_err"``, ``"p_fail"``, ``"utility"``,
    or ``"already_recovered"`` (the transcript already holds a recovery); None when
    the router refreshes.
    """

    refresh: bool
    p_err: float
    p0: float
    p1: float
    utility: float
    blocked_by: str | None
    delay: int = 0


def _type_name(t: Any) -> str:
    if isinstance(t, tuple):
        return " or ".join("null" if x is type(None) else x.__name__ for x in t)
    return t.__name__


def _check(data: Any, spec: dict[str, Any], where: str, source: str) -> None:
    """Exact keys and types, recursively (bool is not accepted as a number)."""
    if not isinstance(data, dict):
        raise CirError(f"{source}: {where or 'the file'} must be a JSON object, got {type(data).__name__}")
    missing = [k for k in spec if k not in data]
    if missing:
        raise CirError(f"{source}: missing key {where + missing[0]!r} in the router file")
    extra = [k for k in data if k not in spec]
    if extra:
        raise CirError(f"{source}: unexpected key {where + extra[0]!r} in the router file")
    for key, expected in spec.items():
        value = data[key]
        name = where + key
        if isinstance(expected, dict):
            _check(value, expected, name + ".", source)
            continue
        types = expected if isinstance(expected, tuple) else (expected,)
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not ok:
            raise CirError(f"{source}: key {name!r} must be {_type_name(expected)}, "
                           f"got {type(value).__name__} {value!r:.60}")
        if isinstance(value, float) and not math.isfinite(value):
            raise CirError(f"{source}: key {name!r} must be a finite number, got {value!r}")


def _numbers(values: list[Any], name: str, n: int, source: str, positive: bool = False) -> None:
    if len(values) != n:
        raise CirError(f"{source}: {name} has {len(values)} values, expected {n} (one per feature)")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, _NUM) or not math.isfinite(v) or (positive and v <= 0):
            raise CirError(f"{source}: {name} must hold finite {'positive ' if positive else ''}"
                           f"numbers, found {v!r}")


class Router:
    """The fitted CIR policy as a runtime object (see module docstring)."""

    def __init__(self, features: list[str], models: dict[str, LinearModel],
                 thresholds: dict[str, float | None], settings: dict[str, Any],
                 baselines: dict[str, Any], training: dict[str, Any],
                 cir_version: str = __version__, extractor: FeatureExtractor | None = None) -> None:
        self.extractor = resolve_extractor(extractor)
        self.features = list(features)
        self.models = models
        self.thresholds = dict(thresholds)
        self.settings = dict(settings)
        self.baselines = baselines
        self.training = training
        self.cir_version = cir_version

    @property
    def delays(self) -> tuple[int, ...]:
        """Candidate delays, in the order the harness should ask (:class:`RouterHook` reads this)."""
        return tuple(int(d) for d in self.settings["delays"])

    # -- deciding ---------------------------------------------------------------------------
    def decide_features(self, features: dict[str, float], delay: int) -> Decision:
        """The rule on a feature dict (must hold every feature of the router)."""
        try:
            x = np.array([[float(features[name]) for name in self.features]])
        except KeyError as err:
            raise CirError(f"router: feature {err.args[0]!r} missing from the features given") from None
        s = {k: float(v[0]) for k, v in predict(self.models, x, self.settings["lam"]).items()}
        blocker = blocked_by(int(delay), s, self.thresholds, int(self.settings["d_min"]), self.delays)
        return Decision(blocker is None, s["p_err"], s["p0"], s["p1"], s["utility"], blocker, int(delay))

    def decide(self, transcript: Transcript, delay: int) -> Decision:
        """Refresh now? ``delay`` = env actions since the suspect observation."""
        features = extract(self.extractor, transcript, delay, max_turns=int(self.settings["max_turns"]),
                           max_actions=int(self.settings["max_actions"]))
        decision = self.decide_features(features, delay)
        if any(step.actor == HARNESS for step in transcript.steps):
            # refresh at most once: a transcript that already holds a recovery never gets another
            return Decision(False, decision.p_err, decision.p0, decision.p1, decision.utility,
                            "already_recovered", int(delay))
        return decision

    # -- the file ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "cir_version": self.cir_version,
            "extractor": self.extractor.name,
            "features": list(self.features),
            "models": {name: self.models[name].to_dict() for name in MODEL_NAMES},
            "thresholds": {k: (None if v is None else float(v)) for k, v in self.thresholds.items()},
            "settings": self.settings,
            "baselines": self.baselines,
            "training": self.training,
        }

    def save(self, path: str | Path) -> Path:
        """Write the router as JSON (strict: no NaN/Infinity), atomically."""
        return write_atomic(path, json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")

    @classmethod
    def from_dict(cls, data: Any, source: str = "router", extractor: FeatureExtractor | None = None) -> Router:
        """Validate plain data (keys, types, versions, extractor, feature names, lengths) and build.

        ``extractor``: the feature extractor of the environment the router will run in; it
        must be the one the router was fitted with (by name). None: the built-in extractor
        the file names (ALFWorld's); a router fitted with another must be given it.
        """
        if isinstance(data, dict) and data.get("format") not in (None, FORMAT):
            raise CirError(f"{source}: not a cir router file (format {data.get('format')!r})")
        if isinstance(data, dict) and isinstance(data.get("format_version"), int) \
                and not isinstance(data.get("format_version"), bool) and data["format_version"] > FORMAT_VERSION:
            raise CirError(f"{source}: router format version {data['format_version']} is newer than this "
                           f"cir reads ({FORMAT_VERSION}); upgrade cir (the file says cir "
                           f"{data.get('cir_version')!r}, this is {__version__})")
        version = data.get("format_version") if isinstance(data, dict) else None
        _check(data, _SPEC if version != 1 else _SPEC_V1, "", source)
        if data["format_version"] < 1:
            raise CirError(f"{source}: format_version must be >= 1, got {data['format_version']}")
        fitted_with = data.get("extractor", "alfworld")  # version 1: ALFWorld's, the only one then
        extractor = _extractor_for(fitted_with, extractor, source)
        features = data["features"]
        if not features:
            raise CirError(f"{source}: 'features' is empty")
        for name in features:
            if not isinstance(name, str):
                raise CirError(f"{source}: 'features' must hold names (strings), found {name!r}")
            if name not in extractor.features:
                raise CirError(f"{source}: unknown feature {name!r}: not a feature of the "
                               f"{extractor.name!r} extractor")
        if len(set(features)) != len(features):
            raise CirError(f"{source}: 'features' lists a name twice")
        n = len(features)
        models = {}
        for name in MODEL_NAMES:
            m = data["models"][name]
            _numbers(m["scaler_mean"], f"models.{name}.scaler_mean", n, source)
            _numbers(m["scaler_scale"], f"models.{name}.scaler_scale", n, source, positive=True)
            _numbers(m["coef"], f"models.{name}.coef", n, source)
            models[name] = LinearModel.from_dict(m)
        settings = data["settings"]
        delays = settings["delays"]
        if not delays or any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in delays) \
                or delays != sorted(set(delays)):
            raise CirError(f"{source}: settings.delays must be increasing integers >= 0, got {delays!r}")
        if settings["lam"] <= 0 or not 0 <= settings["epsilon"] <= 1:
            raise CirError(f"{source}: settings.lam must be > 0 and settings.epsilon in [0, 1]")
        for key in ("task_ids", "agents"):
            if any(not isinstance(t, str) for t in data["training"][key]):
                raise CirError(f"{source}: training.{key} must hold strings")
        if data["baselines"]["always"]["delay"] not in delays:
            raise CirError(f"{source}: baselines.always.delay is not one of settings.delays")
        return cls(features, models, data["thresholds"], settings, data["baselines"], data["training"],
                   cir_version=data["cir_version"], extractor=extractor)

    @classmethod
    def load(cls, path: str | Path, extractor: FeatureExtractor | None = None) -> Router:
        """Read and validate a router file; CirError naming the file and the problem (a
        file over :data:`MAX_ROUTER_BYTES` is refused before it is read, a key given twice
        is refused rather than the last one winning). ``extractor``: see :meth:`from_dict`."""
        data = read_json(path, "router file", strict=True, max_bytes=MAX_ROUTER_BYTES)
        return cls.from_dict(data, source=str(path), extractor=extractor)


def _extractor_for(fitted_with: str, given: FeatureExtractor | None, source: str) -> FeatureExtractor:
    """The extractor a router file runs with: ``given`` if it is the one it was fitted with."""
    if given is None:
        builtin = builtin_extractors()
        if fitted_with not in builtin:
            raise CirError(f"{source}: fitted with the {fitted_with!r} feature extractor, which cir does "
                           f"not ship; load it with that extractor (Router.load(path, extractor=...))")
        return builtin[fitted_with]
    given = resolve_extractor(given)
    if given.name != fitted_with:
        raise CirError(f"{source}: fitted with the {fitted_with!r} feature extractor; refusing to run "
                       f"it with {given.name!r} (its features would mean something else)")
    return given


# -- in a harness run ------------------------------------------------------------------------
class Advice(Protocol):
    """What a harness hook needs from a decision."""

    refresh: bool


class Advisor(Protocol):
    """Anything that decides like a :class:`Router`: candidate delays and ``decide``."""

    @property
    def delays(self) -> tuple[int, ...]: ...

    def decide(self, transcript: Transcript, delay: int) -> Advice: ...


class RouterHook:
    """A harness hook (:class:`cir.episode.harness.Hook`): ask an advisor whether to recover at
    candidate delays after the perturbation point ``at``.

    At most ``max_interventions`` recoveries (the CIR protocol: refresh at most once);
    the delays are checked in order. Each decision is recorded as an event on the
    transcript's last step, e.g. ``router:d=1:skip`` or ``router:d=2:refresh``.
    """

    def __init__(
        self,
        router: Advisor,
        at: int,
        *,
        delays: tuple[int, ...] | None = None,
        operation: str = "refresh",
        max_interventions: int = 1,
    ) -> None:
        self.router = router
        self.at = int(at)
        self.delays = tuple(delays if delays is not None else router.delays)
        self.operation = operation
        self.max_interventions = max_interventions
        self.interventions = 0
        self.decisions: list[tuple[int, bool]] = []

    def after_env_action(self, harness: Harness, env: Env, transcript: Transcript) -> None:
        if self.interventions >= self.max_interventions or not harness.can_continue(transcript):
            return
        delay = transcript.env_actions - self.at
        if delay not in self.delays:
            return
        refresh = bool(self.router.decide(transcript, delay).refresh)
        self.decisions.append((delay, refresh))
        transcript.steps[-1].events.append(
            f"router:d={delay}:{self.operation if refresh else 'skip'}"
        )
        if refresh:
            self.interventions += 1
            harness.recover(env, transcript, self.operation)
