"""The runtime Router: a fitted CIR policy that a harness asks "recover now, and how?".

A router is plain numbers in a JSON file (DESIGN.md, "Router artifact"): the estimator
(``paper`` or ``paired``, :mod:`cir.router.rule`), the operations it may choose, the
feature names, every model's scaler means/scales, coefficients and intercept, the
thresholds, the budget it was fitted under, its parameters, the baselines' parameters (so
``cir evaluate`` needs only this file and a test table), a summary of training, the ``cir``
version and a format version. Loading parses JSON and checks every key and type; it never
executes code (no pickle, no eval), so a router file from anyone is safe to load.

``router.decide(transcript, delay)`` computes the features of the router's extractor
(:mod:`cir.episode.extractor`; ALFWorld's by default) on the transcript (what the agent was
shown up to now) and applies the rule with the arithmetic of :mod:`cir.router.rule`, as the
estimator (:class:`cir.router.policy.CIRPolicy`, whose ``to_router()`` builds a router) and
the offline evaluation do, so the live decision equals the offline decision on the same
features. :class:`RouterHook` puts a router (or anything that decides like one) into a
harness run and applies the operation it chooses.

The router records the name of the extractor it was fitted with and refuses to load or
run with another. Files of format versions 1 and 2 (the paper's estimator, one operation
named in their settings) and 3 (``settings`` where version 4 says ``params``,
``settings_searched``/``settings_within_budget`` where it says ``candidates_*``, ``grid_size``
where it says ``threshold_steps``) still load.

File layout (format version 4)::

    {"format": "cir-router", "format_version": 4, "cir_version": "0.2.0",
     "extractor": "alfworld", "estimator": "paper", "operations": ["refresh"],
     "features": ["f_delay", ...],
     "models": {"p_err": {"scaler_mean": [...], "scaler_scale": [...], "coef": [...],
                          "intercept": 0.0}, "p0": {...}, "p1[refresh]": {...}},
     "thresholds": {"alpha": 0.8 | null, "beta": 0.05, "gamma": 0.0},   # null: never passes
     "budget": {"kind": "empirical", "epsilon": 0.02, "delta": 0.1, "n_clean": 93,
                "candidates_searched": 4840, "candidates_within_budget": 4840, "bound": false,
                "certified_any": null, "clean_arms_to_certify_one": 114},
     "params": {"lam": 2.0, "epsilon": 0.02, "delta": 0.1, "d_min": 1, "delays": [1, 2, 4],
                "C": 0.1, "Cs": [...], "folds": 5, "threshold_steps": 21, "seed": 0,
                "max_iter": 1000, "max_turns": 49, "max_actions": 64},
     "baselines": {"anomaly": {"alpha": ..., "oof_net_gain": ..., "oof_clean_harm": ...,
                               "oof_intervention_rate": ...},
                   "anomaly_rate_matched": {...same keys...},
                   "always": {"delay": 1, "train_net_gain": ..., "train_clean_harm": ...,
                              "meets_epsilon": true}},
     "training": {"n_tasks": ..., "decision_cells": ..., "oof_net_gain": ...,
                  "oof_clean_harm": ..., "oof_intervention_rate": ..., "task_ids": [...],
                  "agents": ["builtin:default@d5a7ae80"]}}

The paired estimator's models are ``p_err``, ``p_rescue[OP]`` and ``p_harm[OP]`` and its
thresholds ``alpha`` and ``gamma``.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from cir import __version__
from cir.episode.extractor import FeatureExtractor, extract
from cir.episode.transcript import HARNESS, Transcript
from cir.families.registry import DEFAULT_FAMILY, builtin_extractors, get_family, resolve_extractor
from cir.pairs.outputs import ROUTER, write_output
from cir.router.rule import (
    BUDGETS,
    ESTIMATORS,
    NO_THRESHOLD,
    Estimator,
    LinearModel,
    blocked_by,
    no_threshold,
    predict,
)
from cir.util.deprecation import former_attribute, renamed_parameters, warn_former
from cir.util.errors import CirError
from cir.util.files import read_json

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from cir.envs.base import Env
    from cir.episode.harness import Harness
    from cir.episode.recovery import Checkpoints

FORMAT = "cir-router"
FORMAT_VERSION = 4
#: A router is a few KB (plus its training task ids); a larger file is refused unread.
MAX_ROUTER_BYTES = 16 * 1024 * 1024

_NUM = (int, float)
_OPT_NUM = (int, float, type(None))
_OPT_BOOL = (bool, type(None))
# key -> expected type(s), or a nested spec (dict), for each part of the file.
_MODEL_SPEC = {"scaler_mean": list, "scaler_scale": list, "coef": list, "intercept": _NUM}
_PARAMS_SPEC = {"lam": _NUM, "epsilon": _NUM, "delta": _NUM, "d_min": int, "delays": list, "C": _NUM,
                "Cs": list, "folds": int, "threshold_steps": int, "seed": int, "max_iter": int,
                "max_turns": int, "max_actions": int}
# versions 1 and 2 name them "settings", with "grid_size" for "threshold_steps"
_SETTINGS_SPEC_V2 = {**{("grid_size" if k == "threshold_steps" else k): v for k, v in _PARAMS_SPEC.items()
                        if k not in ("delta", "Cs")}, "operation": str}
_ANOMALY_SPEC = {"alpha": _OPT_NUM, "oof_net_gain": _NUM, "oof_clean_harm": _NUM,
                 "oof_intervention_rate": _NUM}
_BUDGET_SPEC = {"kind": str, "epsilon": _NUM, "delta": _NUM, "n_clean": int, "candidates_searched": int,
                "candidates_within_budget": int, "bound": bool, "certified_any": _OPT_BOOL,
                "clean_arms_to_certify_one": (int, type(None))}
_ALWAYS_SPEC = {"delay": int, "train_net_gain": _NUM, "train_clean_harm": _NUM, "meets_epsilon": bool}
_BASELINES_SPEC_V2 = {"anomaly": _ANOMALY_SPEC, "anomaly_rate_matched": _ANOMALY_SPEC, "always": _ALWAYS_SPEC}
# version 3: each baseline names the operation it recovers with
_ANOMALY_SPEC_V3 = {**_ANOMALY_SPEC, "operation": str}
_ALWAYS_SPEC_V3 = {**_ALWAYS_SPEC, "operation": str}
_TRAINING_SPEC = {"n_tasks": int, "decision_cells": int, "oof_net_gain": _NUM, "oof_clean_harm": _NUM,
                  "oof_intervention_rate": _NUM, "task_ids": list, "agents": list}
_SPEC: dict[str, Any] = {
    "format": str, "format_version": int, "cir_version": str, "extractor": str, "estimator": str,
    "operations": list, "features": list, "models": dict, "thresholds": dict, "budget": _BUDGET_SPEC,
    "params": _PARAMS_SPEC, "baselines": dict, "training": _TRAINING_SPEC,
}
# version 2: the paper's estimator, one operation (in its settings), models p_err, p0, p1
_SPEC_V2: dict[str, Any] = {
    "format": str, "format_version": int, "cir_version": str, "extractor": str, "features": list,
    "models": {name: _MODEL_SPEC for name in ("p_err", "p0", "p1")},
    "thresholds": {"alpha": _OPT_NUM, "beta": _OPT_NUM, "gamma": _OPT_NUM},
    "settings": _SETTINGS_SPEC_V2, "baselines": _BASELINES_SPEC_V2, "training": _TRAINING_SPEC,
}
_SPEC_V1 = {k: v for k, v in _SPEC_V2.items() if k != "extractor"}


#: Every score a decision carries, whatever the router's estimator (the paper's: p0, p1, p_fail,
#: s_R, s_H; the paired one's: p_rescue, p_harm; both: p_err, utility); a score its estimator
#: does not have is None.
SCORES = ("p_err", "utility", "p0", "p1", "p_fail", "s_R", "s_H", "p_rescue", "p_harm")


@dataclass(frozen=True)
class Decision:
    """A router's answer at one decision point, with everything worth logging.

    ``recover``: recover now, with ``operation`` (None when not recovering).
    ``blocked_by`` names what stopped it: ``"no_threshold"`` (the router never recovers: its
    threshold search found no threshold that gained within the clean-harm budget on the
    fitting table, :attr:`Router.never_recovers`), ``"delay"`` (not a candidate delay, or below
    d_min), the first gate whose score failed (``"p_err"``, ``"p_fail"``, ``"utility"``), or
    ``"already_recovered"`` (the transcript already holds a recovery); None when the router
    recovers. Every router kind's decision has the same fields: the scores of the operation of
    highest utility (:data:`SCORES`: ``p_err`` and ``utility`` always, ``p0``, ``p1``,
    ``p_fail``, ``s_R``, ``s_H`` from the paper's estimator, ``p_rescue``, ``p_harm`` from the
    paired one; None where the estimator has no such score), ``scores`` (the estimator's own,
    as a dict) and ``utilities`` (each operation's utility).
    """

    recover: bool
    operation: str | None
    p_err: float
    utility: float
    blocked_by: str | None
    delay: int = 0
    scores: dict[str, float] = field(default_factory=dict)
    utilities: dict[str, float] = field(default_factory=dict)
    p0: float | None = None
    p1: float | None = None
    p_fail: float | None = None
    s_R: float | None = None  # noqa: N815 (the paper's name)
    s_H: float | None = None  # noqa: N815
    p_rescue: float | None = None
    p_harm: float | None = None

    def __post_init__(self) -> None:
        for name in SCORES[2:]:  # the estimator's scores read as fields too
            if getattr(self, name) is None and name in self.scores:
                object.__setattr__(self, name, self.scores[name])

    @property
    def refresh(self) -> bool:
        """Whether it recovers with a refresh (the former ``refresh``, before a router chose among
        operations): ``recover and operation == "refresh"``."""
        warn_former("Decision.refresh", stacklevel=2)
        return self.recover and self.operation == "refresh"

    def as_dict(self) -> dict[str, Any]:
        """Plain data for a log line: the same keys for every router kind (None: no such score)."""
        return {"delay": self.delay, "recover": self.recover, "operation": self.operation,
                "blocked_by": self.blocked_by, **{name: getattr(self, name) for name in SCORES},
                **{f"utility[{op}]": u for op, u in self.utilities.items()}}


def never_recovers_text(threshold: str | None) -> str | None:
    """What a rule whose ``threshold`` is None does, in words (None for a rule without one)."""
    if threshold is None:
        return None
    return f"never recovers: no threshold gained within the budget on the fitting table ({threshold} is null)"


def _type_name(t: Any) -> str:
    if isinstance(t, tuple):
        return " or ".join("null" if x is type(None) else x.__name__ for x in t)
    return t.__name__


def _got(value: Any) -> str:
    """A value a file holds, as JSON writes it (null, true), else its type and value."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return f"{type(value).__name__} {value!r:.60}"


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
            raise CirError(f"{source}: key {name!r} must be {_type_name(expected)}, got {_got(value)}")
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

    @renamed_parameters("Router(settings=)", settings="params")
    def __init__(self, features: list[str], models: dict[str, LinearModel],
                 thresholds: dict[str, float | None], params: dict[str, Any],
                 baselines: dict[str, Any], training: dict[str, Any],
                 cir_version: str = __version__, extractor: FeatureExtractor | None = None,
                 estimator: str = "paper", operations: tuple[str, ...] = ("refresh",),
                 budget: dict[str, Any] | None = None, family: str = DEFAULT_FAMILY) -> None:
        self.extractor = resolve_extractor(extractor)
        #: the environment family it was fitted on (a name or MODULE:ATTR; the file names it
        #: when it is not ALFWorld, so a router file without it is ALFWorld's)
        self.family = str(family)
        self.estimator: Estimator = ESTIMATORS[estimator]
        self.operations = tuple(operations)
        self.features = list(features)
        self.models = models
        self.thresholds = dict(thresholds)
        self.params = dict(params)
        self.baselines = baselines
        self.training = training
        self.budget = dict(budget or {})
        self.cir_version = cir_version

    settings = former_attribute("Router.settings", "params")  # its name before cir 0.2.0

    @property
    def delays(self) -> tuple[int, ...]:
        """Candidate delays, in the order the harness should ask (:class:`RouterHook` reads this)."""
        return tuple(int(d) for d in self.params["delays"])

    @property
    def never_recovers(self) -> str | None:
        """Why this router never recovers, or None when it can: a threshold that is None never
        passes (the search kept the candidate that never recovers: none gained within the budget)."""
        return never_recovers_text(no_threshold(self.estimator, self.thresholds))

    @property
    def operation(self) -> str:
        """The operation of a single-operation router (the one it recovers with)."""
        if len(self.operations) != 1:
            raise CirError(f"this router chooses among {', '.join(self.operations)}; ask decide() which")
        return self.operations[0]

    def predict(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """The estimator's scores for rows of features (in :attr:`features` order)."""
        return predict(self.estimator, self.models, self.operations, X, float(self.params["lam"]))

    # -- deciding ---------------------------------------------------------------------------
    def decide_features(self, features: dict[str, float], delay: int) -> Decision:
        """The rule on a feature dict (must hold every feature of the router)."""
        try:
            x = np.array([[float(features[name]) for name in self.features]])
        except KeyError as err:
            raise CirError(f"router: feature {err.args[0]!r} missing from the features given") from None
        s = self.predict(x)
        chosen = {k[: -len("_chosen")]: float(v[0]) for k, v in s.items() if k.endswith("_chosen")}
        utilities = {op: float(s["utility"][0, i]) for i, op in enumerate(self.operations)}
        blocker = blocked_by(self.estimator, int(delay), {f"{k}_chosen": v for k, v in chosen.items()},
                             self.thresholds, int(self.params["d_min"]), self.delays)
        operation = self.operations[int(s["choice"][0])] if blocker is None else None
        return Decision(blocker is None, operation, chosen["p_err"], chosen["utility"], blocker, int(delay),
                        chosen, utilities)

    def decide(self, transcript: Transcript, delay: int) -> Decision:
        """Recover now, and with which operation? ``delay`` = env actions since the suspect
        observation."""
        features = extract(self.extractor, transcript, delay, max_turns=int(self.params["max_turns"]),
                           max_actions=int(self.params["max_actions"]))
        decision = self.decide_features(features, delay)
        if decision.blocked_by != NO_THRESHOLD and not may_recover(transcript):
            return Decision(False, None, decision.p_err, decision.utility, "already_recovered", int(delay),
                            decision.scores, decision.utilities)
        return decision

    # -- the file ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "cir_version": self.cir_version,
            **({} if self.family == DEFAULT_FAMILY else {"family": self.family}),
            "extractor": self.extractor.name,
            "estimator": self.estimator.name,
            "operations": list(self.operations),
            "features": list(self.features),
            "models": {name: self.models[name].to_dict()
                       for name in self.estimator.model_names(self.operations)},
            "thresholds": {k: (None if v is None else float(v)) for k, v in self.thresholds.items()},
            "budget": self.budget,
            "params": self.params,
            "baselines": self.baselines,
            "training": self.training,
        }

    def save(self, path: str | Path) -> Path:
        """Write the router as JSON (strict: no NaN/Infinity), atomically; never over a run
        folder's files or a record of another kind (:func:`cir.pairs.outputs.check_output`)."""
        return write_output(path, json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n", ROUTER)

    @classmethod
    def from_dict(cls, data: Any, source: str = "router", extractor: FeatureExtractor | None = None) -> Router:
        """Validate plain data (keys, types, versions, extractor, feature names, lengths) and build.

        ``extractor``: the feature extractor of the environment the router will run in; it
        must be the one the router was fitted with (by name). None: the built-in extractor
        the extractor of the family the file names (``family``; ALFWorld's without one).
        """
        version = _check_version(data, source)
        if version < FORMAT_VERSION:  # an earlier cir's file: read, and said once
            warn_former(f"router file format {version}", f"in {source}", stacklevel=3)
        if version < 3:
            data = _upgrade(data, version, source)
        if version < 4:
            data = _upgrade_v3(data)
        family = data.get("family", DEFAULT_FAMILY)
        if not isinstance(family, str) or not family:
            raise CirError(f"{source}: key 'family' must be a family name or MODULE:ATTR, got {family!r:.60}")
        data = {k: v for k, v in data.items() if k != "family"}
        _check(data, _SPEC, "", source)
        estimator = ESTIMATORS.get(data["estimator"])
        if estimator is None:
            raise CirError(f"{source}: unknown estimator {data['estimator']!r}; expected one of "
                           f"{', '.join(ESTIMATORS)}")
        operations = _operations(data["operations"], source)
        extractor = _extractor_for(data["extractor"], extractor, source, family)
        features = _features(data["features"], extractor, source)
        models = _models(data["models"], estimator, operations, len(features), source)
        thresholds = _thresholds(data["thresholds"], estimator, source)
        _baselines(data["baselines"], operations, source)
        _check_params(data, source)
        return cls(features, models, thresholds, data["params"], data["baselines"], data["training"],
                   cir_version=data["cir_version"], extractor=extractor, estimator=estimator.name,
                   operations=operations, budget=data["budget"], family=family)

    @classmethod
    def load(cls, path: str | Path, extractor: FeatureExtractor | None = None) -> Router:
        """Read and validate a router file; CirError naming the file and the problem (a
        file over :data:`MAX_ROUTER_BYTES` is refused before it is read, a key given twice
        is refused rather than the last one winning). ``extractor``: see :meth:`from_dict`."""
        data = read_json(path, "router file", strict=True, max_bytes=MAX_ROUTER_BYTES)
        router = cls.from_dict(data, source=str(path), extractor=extractor)
        if router.never_recovers:
            log.warning("%s: this router %s", path, router.never_recovers)
        return router


def _check_version(data: Any, source: str) -> int:
    if not isinstance(data, dict):
        raise CirError(f"{source}: the file must be a JSON object, got {type(data).__name__}")
    if data.get("format") not in (None, FORMAT):
        raise CirError(f"{source}: not a cir router file (format {data.get('format')!r})")
    if "format_version" not in data:
        if "format" not in data:  # neither key: some other JSON file
            keys = ", ".join(repr(k) for k in list(data)[:6]) or "none"
            raise CirError(f"{source}: not a cir router file: it has no 'format' and no 'format_version' key "
                           f"(its keys: {keys}); a router file is what `cir fit` writes")
        raise CirError(f"{source}: missing key 'format_version' in the router file")
    version = data["format_version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise CirError(f"{source}: key 'format_version' must be int, got {_got(version)}")
    if version > FORMAT_VERSION:
        raise CirError(f"{source}: router format version {version} is newer than this cir reads "
                       f"({FORMAT_VERSION}); upgrade cir (the file says cir {data.get('cir_version')!r}, "
                       f"this is {__version__})")
    if version < 1:
        raise CirError(f"{source}: format_version must be >= 1, got {version}")
    return version


def _upgrade(data: dict[str, Any], version: int, source: str) -> dict[str, Any]:
    """A version 1 or 2 file (the paper's estimator, one operation) in version 3's layout."""
    _check(data, _SPEC_V1 if version == 1 else _SPEC_V2, "", source)
    settings = dict(data["settings"])
    operation = settings.pop("operation")
    settings.update(delta=0.1, Cs=[float(settings["C"])])
    models = data["models"]
    baselines = {name: {**b, "operation": operation} for name, b in data["baselines"].items()}
    return {**data, "format_version": 3, "extractor": data.get("extractor", "alfworld"),
            "estimator": "paper", "operations": [operation], "settings": settings, "baselines": baselines,
            "models": {"p_err": models["p_err"], "p0": models["p0"], f"p1[{operation}]": models["p1"]},
            "budget": {"kind": "empirical", "epsilon": float(settings["epsilon"]), "delta": 0.1,
                       "n_clean": 0, "settings_searched": 0, "settings_within_budget": 0, "bound": False,
                       "certified_any": None, "clean_arms_to_certify_one": None}}


def _upgrade_v3(data: dict[str, Any]) -> dict[str, Any]:
    """A version 3 file in version 4's words: ``params`` (was ``settings``), ``threshold_steps``
    (was ``grid_size``), the budget's ``candidates_*`` (were ``settings_*``); a key a version 3
    file lacks is left for the checks to name."""
    out = {k: v for k, v in data.items() if k != "settings"}
    if isinstance(data.get("settings"), dict):
        out["params"] = {("threshold_steps" if k == "grid_size" else k): v for k, v in data["settings"].items()}
    if isinstance(data.get("budget"), dict):
        out["budget"] = {k.replace("settings_", "candidates_", 1) if k.startswith("settings_") else k: v
                         for k, v in data["budget"].items()}
    return {**out, "format_version": 4}


def _operations(ops: list[Any], source: str) -> tuple[str, ...]:
    from cir.episode.operations import OPERATIONS

    if not ops or len(set(map(str, ops))) != len(ops):
        raise CirError(f"{source}: 'operations' must list distinct operations, got {ops!r}")
    for op in ops:
        if op not in OPERATIONS:
            raise CirError(f"{source}: unknown operation {op!r} in 'operations'; expected some of "
                           f"{', '.join(OPERATIONS)}")
    return tuple(ops)


def _features(features: list[Any], extractor: FeatureExtractor, source: str) -> list[str]:
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
    return list(features)


def _models(data: dict[str, Any], estimator: Estimator, operations: tuple[str, ...], n: int,
            source: str) -> dict[str, LinearModel]:
    wanted = estimator.model_names(operations)
    for name in data:
        if name not in wanted:
            raise CirError(f"{source}: unexpected model {name!r}; a {estimator.name} router over "
                           f"{', '.join(operations)} has {', '.join(wanted)}")
    models = {}
    for name in wanted:
        if name not in data:
            raise CirError(f"{source}: missing model {name!r} (a {estimator.name} router over "
                           f"{', '.join(operations)} has {', '.join(wanted)})")
        m = data[name]
        _check(m, _MODEL_SPEC, f"models.{name}.", source)
        _numbers(m["scaler_mean"], f"models.{name}.scaler_mean", n, source)
        _numbers(m["scaler_scale"], f"models.{name}.scaler_scale", n, source, positive=True)
        _numbers(m["coef"], f"models.{name}.coef", n, source)
        models[name] = LinearModel.from_dict(m)
    return models


def _thresholds(data: dict[str, Any], estimator: Estimator, source: str) -> dict[str, float | None]:
    _check(data, {name: _OPT_NUM for name in estimator.thresholds}, "thresholds.", source)
    return dict(data)


def _baselines(data: dict[str, Any], operations: tuple[str, ...], source: str) -> None:
    """The baselines' parameters: the three of every router, and per operation for several."""
    specs = {"anomaly": _ANOMALY_SPEC_V3, "anomaly_rate_matched": _ANOMALY_SPEC_V3, "always": _ALWAYS_SPEC_V3}
    if len(operations) > 1:
        for op in operations:
            specs[f"anomaly_{op}"], specs[f"always_{op}"] = _ANOMALY_SPEC_V3, _ALWAYS_SPEC_V3
    _check(data, specs, "baselines.", source)
    for name, b in data.items():
        if b["operation"] not in operations:
            raise CirError(f"{source}: baselines.{name}.operation {b['operation']!r} is not one of the "
                           f"router's operations ({', '.join(operations)})")


def _check_params(data: dict[str, Any], source: str) -> None:
    params = data["params"]
    delays = params["delays"]
    if not delays or any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in delays) \
            or delays != sorted(set(delays)):
        raise CirError(f"{source}: params.delays must be increasing integers >= 0, got {delays!r}")
    if params["lam"] <= 0 or not 0 <= params["epsilon"] <= 1 or not 0 < params["delta"] < 1:
        raise CirError(f"{source}: params.lam must be > 0, params.epsilon in [0, 1] and "
                       "params.delta in (0, 1)")
    if data["budget"]["kind"] not in BUDGETS:
        raise CirError(f"{source}: budget.kind must be one of {', '.join(BUDGETS)}, "
                       f"got {data['budget']['kind']!r}")
    for key in ("task_ids", "agents"):
        if any(not isinstance(t, str) for t in data["training"][key]):
            raise CirError(f"{source}: training.{key} must hold strings")
    for name, b in data["baselines"].items():
        if "delay" in b and b["delay"] not in delays:
            raise CirError(f"{source}: baselines.{name}.delay is not one of params.delays")


def _extractor_for(fitted_with: str, given: FeatureExtractor | None, source: str,
                   family: str = DEFAULT_FAMILY) -> FeatureExtractor:
    """The extractor a router file runs with: ``given`` if it is the one it was fitted with;
    None: that of the family the file names, or a built-in one of that name."""
    if given is None and family != DEFAULT_FAMILY:
        given = get_family(family).extractor
    if given is None:
        builtin = builtin_extractors()
        if fitted_with not in builtin:
            raise CirError(f"{source}: fitted with the {fitted_with!r} feature extractor, which cir does "
                           f"not ship; load it with that extractor (Router.load(path, extractor=...), "
                           f"or --family MODULE:ATTR naming its family)")
        return builtin[fitted_with]
    given = resolve_extractor(given)
    if given.name != fitted_with:
        raise CirError(f"{source}: fitted with the {fitted_with!r} feature extractor; refusing to run "
                       f"it with {given.name!r} (its features would mean something else)")
    return given


# -- in a harness run ------------------------------------------------------------------------
class Advice(Protocol):
    """What a harness hook needs from a decision."""

    recover: bool
    operation: str | None


class Advisor(Protocol):
    """Anything that decides like a :class:`Router`: candidate delays and ``decide``."""

    @property
    def delays(self) -> tuple[int, ...]: ...

    def decide(self, transcript: Transcript, delay: int) -> Advice: ...


def may_recover(transcript: Transcript) -> bool:
    """The CIR protocol's "recover at most once", its one home: a transcript that already holds a
    recovery (a harness step) gets no other. :meth:`Router.decide` says ``already_recovered``
    then, and :class:`RouterHook` asks nothing more."""
    return not any(step.actor == HARNESS for step in transcript.steps)


class RouterHook:
    """A harness hook (:class:`cir.episode.harness.Hook`): ask an advisor whether to recover at
    candidate delays after the perturbation point ``at``, and apply the operation it chooses.
    ``checkpoints`` (:class:`cir.episode.recovery.Checkpoints`) are what a ``rewind`` returns
    to: an env snapshot from before the suspect observation and the index of its step.

    It recovers at most once (:func:`may_recover`, the protocol's rule, whatever the advisor
    says); the delays are checked in order. Each decision is recorded as an event on the
    transcript's last step, e.g. ``router:d=1:skip`` or ``router:d=2:rewind``, and kept in
    :attr:`decisions` as (delay, operation or None).
    """

    def __init__(self, router: Advisor, at: int, *, delays: tuple[int, ...] | None = None,
                 checkpoints: Checkpoints | None = None) -> None:
        self.router = router
        self.at = int(at)
        self.checkpoints = checkpoints  # what a rewind returns to (the state before the suspect text)
        self.delays = tuple(delays if delays is not None else router.delays)
        self.decisions: list[tuple[int, str | None]] = []

    def after_env_action(self, harness: Harness, env: Env, transcript: Transcript) -> None:
        if not may_recover(transcript) or not harness.can_continue(transcript):
            return
        delay = transcript.env_actions - self.at
        if delay not in self.delays:
            return
        decision = self.router.decide(transcript, delay)
        operation = decision.operation if decision.recover else None
        if decision.recover and not operation:
            raise CirError(f"router: decided to recover at delay {delay} without naming an operation")
        self.decisions.append((delay, operation))
        transcript.steps[-1].events.append(f"router:d={delay}:{operation or 'skip'}")
        if operation:
            harness.recover(env, transcript, operation, self.checkpoints)
