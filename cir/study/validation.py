"""Does the router work when there is something to learn? The planted worlds, replicated.

A study of the built-in agent cannot say whether selectivity helps where it is hard: there every
error is visible and recovery after one rarely harms. The planted worlds
(:func:`cir.pairs.synthetic.planted_world`) know the answer, so the study's routers, fitted with
their default settings, can be checked against it, replicate after replicate (each a new
fitting table and a new held-out table):

* world (a): errors only partly detectable (an ideal detector's AUC 0.75) and recovery effects
  that vary with the features (rescue in some states, harm in others): the routers should reach
  most of the *planted oracle*'s gain and beat the anomaly rule. Two planted oracles: the one
  that knows what a router sees (``feature_oracle``: recover where the expected effect given the
  features is positive) and the one that knows everything (``planted_oracle``: the skill and
  whether the observation was erroneous too);
* world (b): a null world, where recovery has no effect in any state: no router may claim a
  gain; the share of replicates whose held-out interval against never recovering excludes zero
  should be about the intervals' 5%;
* world (c): recovery gains after errors and harms clean successes, so the clean-harm budget
  decides: the certified budget's held-out clean harm may exceed epsilon in at most delta of the
  replicates; the empirical budget's beside it. Clean harm is measured twice: realized on the
  held-out table, and expected (the planted chance of harm of every clean arm the router recovers,
  times its planted chance of success without recovery: the router's risk on those states).

Each replicate is one call of :func:`world_replicate` (plain rows); :func:`run_validation` runs
them (in worker processes with ``jobs`` > 1: the rows are those of one process) and
:func:`validation_summary` pools them: a policy's pooled effect is the mean over replicates
with a t interval over replicates (they are independent draws of the same size), its share of an
oracle the ratio of their mean gains.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import roc_auc_score

from cir.episode.protocol import DEFAULT_DELTA, DEFAULT_EPSILON, PLANTED_WORLD_REPLICATES
from cir.pairs.synthetic import planted_world
from cir.router.evaluation import ARM_KEYS, summarize_walks, walk_routers
from cir.router.policy import CIRPolicy
from cir.router.walk import build_cells, walk
from cir.util.parallel import one_thread_each, parallel_map
from cir.util.progress import Steps

#: The planted oracles walked beside the policies: name -> the planted column it recovers on.
ORACLES = {"planted_oracle": "planted_gain", "feature_oracle": "planted_feature_gain"}
ROW_COLUMNS = ["world", "replicate", "policy", "n_arms", "effect_pp", "ci_low_pp", "ci_high_pp", "interventions",
               "intervention_rate", "clean_harm_rate", "expected_clean_harm", "p_err_auc"]
CRITERIA_COLUMNS = ["world", "criterion", "value", "target", "met"]
#: A world's check, measured: (criterion, value, target, met; None where shown beside, no target).
Check = tuple[str, float, str, "bool | None"]


@dataclass(frozen=True)
class World:
    """A planted world as the validation runs it: the tasks of a replicate's fitting and held-out
    tables and the delays they hold (:func:`cir.pairs.synthetic.planted_world` makes them), the
    routers fitted on it (policy name -> (estimator, budget), every other setting the study's)
    and its checks (:func:`criteria`: given the pooled summary and margins indexed by world and
    policy, and delta, the rows of :data:`CRITERIA_COLUMNS` but the world's name). A new world is
    its generator in :mod:`cir.pairs.synthetic` and one entry of :data:`VALIDATION_WORLDS`."""

    name: str
    fit_tasks: int
    heldout_tasks: int
    delays: tuple[int, ...]
    routers: dict[str, tuple[str, str]]
    checks: Callable[[pd.DataFrame, pd.DataFrame, float], list[Check]]

    def identity(self) -> dict[str, Any]:
        """What its rows are a function of, besides the seed and the code (the cache's key)."""
        return {"name": self.name, "fit_tasks": self.fit_tasks, "heldout_tasks": self.heldout_tasks,
                "delays": list(self.delays), "routers": {k: list(v) for k, v in self.routers.items()}}


def _checks_a(s: pd.DataFrame, m: pd.DataFrame, delta: float) -> list[Check]:
    """(a): cir_paired's share of the planted oracles' gain (>= 80%), its margin over the anomaly
    rule (interval above zero) and its error model's AUC (beside)."""
    if ("a", "cir_paired") not in s.index:
        return []
    r = s.loc[("a", "cir_paired")]
    out: list[Check] = [
        ("cir_paired: share of the feature oracle's gain", r["share_feature_oracle"], ">= 0.80",
         bool(r["share_feature_oracle"] >= 0.8)),
        ("cir_paired: share of the planted (full-state) oracle's gain", r["share_planted_oracle"], ">= 0.80",
         bool(r["share_planted_oracle"] >= 0.8))]
    for versus in ("anomaly", "anomaly_rate_matched_heldout"):
        if ("a", "cir_paired", versus) in m.index:
            g = m.loc[("a", "cir_paired", versus)]
            out.append((f"cir_paired - {versus}: lower end of the 95% interval (pp)", g["ci_low_pp"], "> 0",
                        bool(g["ci_low_pp"] > 0) if np.isfinite(g["ci_low_pp"]) else None))  # None: one replicate
    out.append(("p_err held-out AUC (cir_paired)", r["p_err_auc"], "about 0.75", None))
    return out


def _checks_b(s: pd.DataFrame, m: pd.DataFrame, delta: float) -> list[Check]:
    """(b): the share of replicates whose router-minus-never interval excludes zero (<= 7%)."""
    return [(f"{policy}: share of replicates whose interval vs never excludes 0", s.loc[("b", policy)]["excludes_zero"],
             "<= 0.07", bool(s.loc[("b", policy)]["excludes_zero"] <= 0.07))
            for policy in ("cir", "cir_paired") if ("b", policy) in s.index]


def _checks_c(s: pd.DataFrame, m: pd.DataFrame, delta: float) -> list[Check]:
    """(c): the certified budget's share of replicates over epsilon (<= delta), the empirical
    budget's beside it (no target)."""
    out: list[Check] = []
    for budget, target in (("certified", f"<= {delta:g}"), ("empirical", "(beside it)")):
        if ("c", f"cir_paired_{budget}") in s.index:
            r = s.loc[("c", f"cir_paired_{budget}")]
            for kind in ("expected", "realized"):
                out.append((f"{budget} budget: share of replicates whose {kind} clean harm exceeds epsilon",
                            r[f"violations_{kind}"], target,
                            bool(r[f"violations_{kind}"] <= delta) if budget == "certified" else None))
    return out


#: The worlds the validation runs, in order. World (c) fits on 600 tasks (600 clean arms: enough
#: for Learn-then-Test to certify a setting that recovers; on 200 it can certify none and never
#: recovers, which would pass trivially), holds out 1,000 (a realized clean-harm rate close to the
#: risk) and runs delays 0 and 1 only, so its fit costs what (a)'s does.
VALIDATION_WORLDS: dict[str, World] = {w.name: w for w in (
    World("a", 200, 200, (0, 1, 2, 4), {"cir": ("paper", "empirical"), "cir_paired": ("paired", "empirical")},
          _checks_a),
    World("b", 200, 200, (0, 1, 2, 4), {"cir": ("paper", "empirical"), "cir_paired": ("paired", "empirical")},
          _checks_b),
    World("c", 600, 1000, (0, 1), {"cir_paired_empirical": ("paired", "empirical"),
                                   "cir_paired_certified": ("paired", "certified")}, _checks_c),
)}
#: What each world fits: policy name -> (estimator, budget) (of :data:`VALIDATION_WORLDS`).
WORLD_ROUTERS = {name: dict(w.routers) for name, w in VALIDATION_WORLDS.items()}
#: Per world: the tasks of a replicate's fitting and held-out tables, and the delays they hold.
WORLD_TABLES = {name: (w.fit_tasks, w.heldout_tasks, w.delays) for name, w in VALIDATION_WORLDS.items()}


def oracle_walks(test: pd.DataFrame, d_min: int, delays: tuple[int, ...]) -> pd.DataFrame:
    """Each planted oracle's walk on ``test``: recover at the first candidate delay where its
    planted expected effect is positive (one row per arm: ``y_`` and ``int_`` of each)."""
    cells = build_cells(test, delays, ("refresh",), "planted table")
    out = cells.arms[ARM_KEYS].copy()
    for name, column in ORACLES.items():
        g = cells.spread({"gain": cells.decisions[column].to_numpy(dtype=float)})["gain"]
        with np.errstate(invalid="ignore"):  # a planted effect of exactly zero is no gain
            fire = cells.delay_ok(d_min) & (g > 1e-9)
        outcome, intervened, _ = walk(cells, fire)
        out[f"y_{name}"] = outcome.astype(int)
        out[f"int_{name}"] = intervened.astype(int)
    return out


def p_err_auc(router: Any, test: pd.DataFrame) -> float:
    """The held-out ROC AUC of the router's error model on the decision cells."""
    decisions = build_cells(test, router.delays, router.operations, "planted table").decisions
    labels = (decisions["condition"] != "clean").to_numpy(dtype=int)
    p_err = router.predict(decisions[router.features].to_numpy(dtype=float))["p_err_chosen"]
    return float(roc_auc_score(labels, p_err)) if 0 < labels.sum() < len(labels) else float("nan")


@dataclass
class Walked:
    """A replicate's routers fitted on a new fitting table and walked, with their baselines and the
    planted oracles, on a new held-out one: what :func:`world_replicate` and the hard worlds'
    replicate (:mod:`cir.study.hard_worlds`) each read their rows from."""

    test: pd.DataFrame
    routers: dict[str, Any]
    arms: pd.DataFrame
    policies: list[str]
    summary: pd.DataFrame
    margins: pd.DataFrame

    @cached_property
    def risk(self) -> pd.DataFrame:
        """The walked arms with each arm's planted success and harm."""
        planted = self.test.groupby(ARM_KEYS, sort=False)[["planted_success", "planted_harm"]].first()
        return self.arms.join(planted, on=ARM_KEYS)

    @cached_property
    def every(self) -> pd.DataFrame:
        """The summary over all conditions, by policy."""
        return self.summary[self.summary["condition"] == "all"].set_index("policy")

    def row(self, world: str, replicate: int, policy: str) -> dict[str, Any]:
        """The policy's row of :data:`ROW_COLUMNS`: its held-out effect, interventions, realized and
        expected clean harm (the planted harm of the clean arms it recovers in) and its p_err AUC."""
        risk = self.risk
        clean = (risk["condition"] == "clean").to_numpy()
        r = self.every.loc[policy]
        recovered = risk[f"int_{policy}"].to_numpy() == 1
        expected = float((risk["planted_success"] * risk["planted_harm"])[clean & recovered].sum() / max(clean.sum(), 1))
        realized = self.summary[(self.summary["policy"] == policy) & (self.summary["condition"] == "clean")][
            "clean_harm_rate"]
        auc = p_err_auc(self.routers[policy], self.test) if policy in self.routers else float("nan")
        return {"world": world, "replicate": replicate, "policy": policy, "n_arms": int(r["n"]),
                "effect_pp": float(r["effect_pp"]), "ci_low_pp": float(r["ci_low_pp"]),
                "ci_high_pp": float(r["ci_high_pp"]), "interventions": int(r["interventions"]),
                "intervention_rate": float(r["intervention_rate"]),
                "clean_harm_rate": float(realized.iloc[0]) if len(realized) else float("nan"),
                "expected_clean_harm": expected, "p_err_auc": auc}


def fit_and_walk(world: str, spec: Any, replicate: int, *, seed: int, resamples: int, epsilon: float, delta: float,
                 heldout: bool = False) -> Walked:
    """``spec``'s routers fitted on a new planted table of ``world`` (seed ``(seed, replicate, 0)``)
    and walked on a new held-out one (``(seed, replicate, 1)``; ``heldout``: drawn from the world's
    held-out population) beside their baselines and the planted oracles."""
    train = planted_world(world, spec.fit_tasks, seed=(seed, replicate, 0), delays=spec.delays, task_prefix="fit")
    test = planted_world(world, spec.heldout_tasks, seed=(seed, replicate, 1), delays=spec.delays, task_prefix="test",
                         **({"heldout": True} if heldout else {}))
    routers = {name: CIRPolicy(estimator=est, budget=budget, epsilon=epsilon, delta=delta, seed=seed + replicate)
               .fit(train).to_router() for name, (est, budget) in spec.routers.items()}
    arms, policies = walk_routers(routers, test, source=f"planted world {world}")
    first = next(iter(routers.values()))
    arms = arms.merge(oracle_walks(test, int(first.params["d_min"]), first.delays), on=ARM_KEYS, how="left",
                      validate="1:1")
    policies = [*policies, *ORACLES]
    summary, margins = summarize_walks(arms, policies, list(routers), resamples=resamples, seed=seed + replicate)
    return Walked(test, routers, arms, policies, summary, margins)


def world_replicate(world: str, replicate: int, *, seed: int = 0, resamples: int = 2000,
                    epsilon: float = DEFAULT_EPSILON, delta: float = DEFAULT_DELTA) -> pd.DataFrame:
    """One replicate of one world: the routers fitted on a new planted table (seed ``(seed,
    replicate, 0)``, :data:`VALIDATION_WORLDS`) and walked on a new held-out one (``(seed, replicate,
    1)``) beside their baselines and the planted oracles; one row per policy (:data:`ROW_COLUMNS`)."""
    walked = fit_and_walk(world, VALIDATION_WORLDS[world], replicate, seed=seed, resamples=resamples,
                          epsilon=epsilon, delta=delta)
    rows = [walked.row(world, replicate, policy) for policy in walked.policies]
    return pd.DataFrame(rows, columns=ROW_COLUMNS)


#: :func:`world_replicate`'s options and their defaults (a key's options, as given or defaulted).
REPLICATE_OPTIONS = {k: p.default for k, p in inspect.signature(world_replicate).parameters.items()
                     if p.kind is p.KEYWORD_ONLY and k != "seed"}


def _one(job: tuple[str, int], options: dict[str, Any], folder: str | None, caches: dict[str, str]) -> pd.DataFrame:
    rows = world_replicate(job[0], job[1], **options)
    text = rows.to_csv(index=False)
    for where in (folder, caches.get(job[0])):  # written as it goes: a run that stops keeps what it finished
        if where is not None:
            _write_part(_part(Path(where), *job), text)
    return rows


def _part(folder: Path, world: str, replicate: int) -> Path:
    return folder / f"world-{world}-{replicate:04d}.csv"


def _write_part(path: Path, text: str) -> None:
    from cir.util.files import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)


def _read_part(path: Path) -> pd.DataFrame | None:
    """A kept replicate's rows as they were computed (every digit read back), or None if it is
    not there or not whole."""
    try:  # pandas 3 reads every float back as written; before it, only its round-trip parser did
        rows = pd.read_csv(path, **({} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}))
    except (OSError, ValueError):
        return None
    return rows if list(rows.columns) == ROW_COLUMNS and len(rows) else None


#: The layout of the planted worlds' cache; a change makes every kept replicate a miss.
CACHE_FORMAT = 1
#: What the rows are computed by: the code of these parts of cir (their bytes) and these libraries.
_CODE = ("__init__.py", "util/", "episode/", "pairs/", "stats/", "router/", "study/validation.py",
         "families/family.py", "families/registry.py", "families/alfworld/features.py")
_LIBRARIES = ("numpy", "scipy", "scikit-learn", "pandas", "mapie")


def code_version() -> str:
    """A digest of the code that computes a replicate's rows (:data:`_CODE`, the versions of
    :data:`_LIBRARIES`): what ``cir``'s version number alone would not tell apart between two
    checkouts of the same version (:func:`cir.study.outputs.code_version`)."""
    from cir.study.outputs import code_version as digest

    return digest(_CODE, _LIBRARIES)


def replicate_key(world: str, seed: int, options: dict[str, Any] | None = None) -> str:
    """The key of a world's replicates: its spec (:meth:`World.identity`), the seed, the options
    of :func:`world_replicate` (resamples, epsilon, delta as given), :func:`code_version` and
    :data:`CACHE_FORMAT`; two calls with one key compute the same rows."""
    import hashlib
    import json

    effective = {**REPLICATE_OPTIONS, **(options or {})}  # an option given as its default is the same replicate
    identity = {"format": CACHE_FORMAT, "world": VALIDATION_WORLDS[world].identity(), "seed": int(seed),
                "options": {k: effective[k] for k in sorted(effective)}, "code": code_version()}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def cache_folder(world: str, seed: int, options: dict[str, Any] | None = None) -> Path:
    """Where the user's cache keeps the replicates of this key (:func:`cir.util.files.user_cache`)."""
    from cir.util.files import user_cache

    return user_cache("planted-worlds") / replicate_key(world, seed, options)[:32]


def run_validation(replicates: int, *, worlds: tuple[str, ...] = tuple(VALIDATION_WORLDS), seed: int = 0,
                   jobs: int = 1, folder: str | Path | None = None, cache: bool = True,
                   steps: Steps | None = None, **options: Any) -> pd.DataFrame:
    """Every replicate of every world (:func:`world_replicate`), in order, as one table.

    With ``folder``, each replicate's rows are written there as it finishes and a replicate
    already there is read back instead of fitted again, so a long run resumes; the folder must
    hold replicates of the same settings (``seed``, ``options``: the caller keeps it so). With
    ``cache`` (the default), a replicate the user's cache holds under its key
    (:func:`replicate_key`: the world, the seed, ``options``, the code) is read from there, and
    each one fitted is kept there: a study, a replicate of a study or the benchmark fits a
    world's replicate once per version of the code. ``steps``: a progress line, advanced by one
    part per replicate (the caller's step, of ``replicates * len(worlds)`` parts)."""
    todo = [(w, r) for w in worlds for r in range(replicates)]
    done: dict[tuple[str, int], pd.DataFrame] = {}
    folder = None if folder is None else Path(folder)
    caches = {w: cache_folder(w, seed, options) for w in worlds} if cache else {}
    for job in todo:
        rows = _read_part(_part(folder, *job)) if folder is not None else None
        if rows is None and job[0] in caches:
            kept = _part(caches[job[0]], *job)
            rows = _read_part(kept)
            if rows is not None and folder is not None:  # the study keeps its own copy
                _write_part(_part(folder, *job), kept.read_text(encoding="utf-8"))
        if rows is not None:
            done[job] = rows
            if steps is not None:
                steps.advance()
    missing = [job for job in todo if job not in done]
    with one_thread_each():  # small solves: one thread each (cir.util.parallel)
        ran = parallel_map(_one, missing, {"seed": seed, **options}, None if folder is None else str(folder),
                           {w: str(c) for w, c in caches.items()}, jobs=jobs)
        for job, rows in zip(missing, ran, strict=True):
            done[job] = rows
            if steps is not None:
                steps.advance()
    parts = [done[job] for job in todo]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=ROW_COLUMNS)


def t_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of independent replicates' values: a t interval."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    half = float(stats.t.ppf(0.5 + level / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))
    return mean, mean - half, mean + half


SUMMARY_COLUMNS = ["world", "policy", "replicates", "effect_pp", "ci_low_pp", "ci_high_pp", "share_planted_oracle",
                   "share_feature_oracle", "excludes_zero", "above_zero", "below_zero", "recovered_any",
                   "intervention_rate", "clean_harm_rate", "expected_clean_harm", "violations_realized",
                   "violations_expected", "p_err_auc"]
MARGIN_COLUMNS = ["world", "policy", "versus", "replicates", "margin_pp", "ci_low_pp", "ci_high_pp", "above_zero"]


def validation_summary(rows: pd.DataFrame, epsilon: float = DEFAULT_EPSILON) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, margins) pooled over replicates, per world and policy: the mean effect with its t
    interval over replicates, its share of each planted oracle's mean gain, the share of replicates
    whose own interval excludes zero (above it, below it), that recovered at all, the clean harm
    (realized, expected) and the share of replicates where it exceeds ``epsilon``, the mean held-out
    AUC of the error model; and each router's margin over every other policy (t interval)."""
    out, margins = [], []
    for world, w in rows.groupby("world", sort=True):
        by = {p: g.sort_values("replicate") for p, g in w.groupby("policy", sort=False)}
        oracle = {name: by[name]["effect_pp"].mean() for name in ORACLES if name in by}
        routers = list(WORLD_ROUTERS[world])
        for policy, g in by.items():
            mean, low, high = t_interval(g["effect_pp"].to_numpy())
            out.append({
                "world": world, "policy": policy, "replicates": len(g), "effect_pp": mean, "ci_low_pp": low,
                "ci_high_pp": high,
                "share_planted_oracle": mean / oracle["planted_oracle"] if oracle.get("planted_oracle", 0) > 0 else np.nan,
                "share_feature_oracle": mean / oracle["feature_oracle"] if oracle.get("feature_oracle", 0) > 0 else np.nan,
                "excludes_zero": float(((g["ci_low_pp"] > 0) | (g["ci_high_pp"] < 0)).mean()),
                "above_zero": float((g["ci_low_pp"] > 0).mean()), "below_zero": float((g["ci_high_pp"] < 0).mean()),
                "recovered_any": float((g["interventions"] > 0).mean()),
                "intervention_rate": float(g["intervention_rate"].mean()),
                "clean_harm_rate": float(g["clean_harm_rate"].mean()),
                "expected_clean_harm": float(g["expected_clean_harm"].mean()),
                "violations_realized": float((g["clean_harm_rate"] > epsilon + 1e-12).mean()),
                "violations_expected": float((g["expected_clean_harm"] > epsilon + 1e-12).mean()),
                "p_err_auc": float(g["p_err_auc"].mean()) if g["p_err_auc"].notna().any() else np.nan})
            if policy not in routers:
                continue
            for versus, h in by.items():
                if versus == policy:
                    continue
                diff = g["effect_pp"].to_numpy() - h["effect_pp"].to_numpy()
                m, lo, hi = t_interval(diff)
                margins.append({"world": world, "policy": policy, "versus": versus, "replicates": len(diff),
                                "margin_pp": m, "ci_low_pp": lo, "ci_high_pp": hi,
                                "above_zero": float((diff > 0).mean())})
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS), pd.DataFrame(margins, columns=MARGIN_COLUMNS)


def criteria(summary: pd.DataFrame, margins: pd.DataFrame, delta: float = DEFAULT_DELTA) -> pd.DataFrame:
    """The checks of each world (:attr:`World.checks`), measured: (a) cir_paired's share of the
    planted oracles' gain (>= 80%) and its margin over the anomaly rule (interval above zero); (b)
    the share of replicates whose router-minus-never interval excludes zero (<= 7%); (c) the
    certified budget's share of replicates over epsilon (<= delta), the empirical budget's beside
    it (no target)."""
    s = summary.set_index(["world", "policy"])
    m = margins.set_index(["world", "policy", "versus"])
    rows = [{"world": name, "criterion": c, "value": v, "target": t, "met": met}
            for name, world in VALIDATION_WORLDS.items() for c, v, t, met in world.checks(s, m, delta)]
    return pd.DataFrame(rows, columns=CRITERIA_COLUMNS)


#: Replicates of each world a study's report runs by default (the benchmark runs 200 too).
STUDY_REPLICATES = PLANTED_WORLD_REPLICATES
VALIDATION_DIR = "validation"


def study_validation(out: Path, replicates: int, *, seed: int, jobs: int = 1, steps: Steps | None = None
                     ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(summary, margins, criteria) of ``replicates`` replicates of every world, for a study's
    report; each replicate's rows are kept in ``out/validation/replicates/`` as it finishes, with
    the key of each world's (:func:`replicate_key`), and reused by a later call with the same key
    (a resumed study does not fit them again; more replicates add to them); what the user's
    cache holds is read from there (:func:`run_validation`)."""
    import json

    from cir.util.files import write_atomic

    folder = Path(out) / VALIDATION_DIR
    settings = {"seed": int(seed), "format": CACHE_FORMAT,
                "worlds": {w: replicate_key(w, seed) for w in VALIDATION_WORLDS}}
    settings_path = folder / "validation.json"
    try:
        kept = json.loads(settings_path.read_text(encoding="utf-8")) if settings_path.exists() else None
    except (OSError, ValueError):
        kept = None
    if kept != settings:
        old = kept.get("worlds") if isinstance(kept, dict) and kept.get("format") == CACHE_FORMAT else None
        for world, key in settings["worlds"].items():  # another seed or code: its replicates are not these
            if not isinstance(old, dict) or old.get(world) != key:
                for part in (folder / "replicates").glob(f"world-{world}-*.csv"):
                    part.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(settings_path, json.dumps(settings, indent=2, sort_keys=True) + "\n")
    rows = run_validation(replicates, seed=seed, jobs=jobs, folder=folder / "replicates", steps=steps)
    text = rows.to_csv(index=False)
    path = folder / "validation_rows.csv"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        write_atomic(path, text)
    summary, margins = validation_summary(rows)
    return summary, margins, criteria(summary, margins)


def validation_section(report: Any, out: Path, replicates: int, *, seed: int, jobs: int = 1,
                       steps: Steps | None = None) -> None:
    """"Does the router work when there is something to learn?": the planted worlds' checks
    (``steps``: a progress line whose current step has a part per world replicate)."""
    from cir.study.page import format_number, save_csv

    summary, margins, checks = study_validation(out, replicates, seed=seed, jobs=jobs, steps=steps)
    report.heading("Does the router work when there is something to learn?")
    s = summary.set_index(["world", "policy"])

    def pp(world: str, policy: str) -> str:
        if (world, policy) not in s.index:
            return "n/a"
        r = s.loc[(world, policy)]
        if not np.isfinite(r["ci_low_pp"]):  # one replicate: no interval over replicates
            return f"{format_number(r['effect_pp'], 2)} pp"
        return f"{format_number(r['effect_pp'], 2)} pp [{format_number(r['ci_low_pp'], 2)}, {format_number(r['ci_high_pp'], 2)}]"

    report.text(
        "With the built-in agent every error is visible and recovery after one rarely harms, so the study cannot "
        "tell whether selectivity helps. The planted worlds (`cir.pairs.synthetic.planted_world`) know the "
        f"answer; the study's routers, every setting their default, are fitted on {replicates} replicate{'' if replicates == 1 else 's'} of "
        "each world (a new fitting table and a new held-out one each) and checked against it. (a) Errors only "
        "partly detectable and recovery that rescues in some visible states and harms in others: `cir_paired` "
        f"{pp('a', 'cir_paired')}, `anomaly` {pp('a', 'anomaly')}, the oracle that knows what a router sees "
        f"{pp('a', 'feature_oracle')}, the one that knows everything {pp('a', 'planted_oracle')}. (b) A null "
        f"world, recovery without effect anywhere: `cir_paired` {pp('b', 'cir_paired')}. (c) Recovery that gains "
        "after errors and harms clean successes: the certified clean-harm budget against the empirical one. "
        "Intervals: t over replicates. `benchmarks/router_validation.py` runs the same with 200 replicates "
        "of each world.")
    report.table(checks, save_csv(checks, out / "tables" / "router_validation_criteria.csv"),
                 "Each world's check, measured (met: whether the target holds; no target where it is shown beside)")
    shown = summary[summary["policy"].isin(["cir", "cir_paired", "anomaly", "anomaly_rate_matched_heldout",
                                            "cir_paired_empirical", "cir_paired_certified", "feature_oracle",
                                            "planted_oracle"])]
    path = save_csv(summary, out / "tables" / "router_validation.csv")
    save_csv(margins, out / "tables" / "router_validation_margins.csv")
    shown = shown[["world", "policy", "replicates", "effect_pp", "ci_low_pp", "ci_high_pp",
                   "share_feature_oracle", "excludes_zero", "intervention_rate", "expected_clean_harm",
                   "violations_expected", "p_err_auc"]]
    brief = shown[[(w, p) in BRIEF for w, p in zip(shown["world"], shown["policy"], strict=True)]]
    report.table(shown, path, "The planted worlds, pooled over replicates (every policy and column in the CSV)",
                 summary=brief, summary_caption="The planted worlds, pooled over replicates: what each world's "
                 "check reads (every policy shown in the whole table)")


#: The rows of the planted worlds' table the main text shows: what each world's check reads.
BRIEF = {("a", "cir_paired"), ("a", "anomaly"), ("a", "feature_oracle"), ("a", "planted_oracle"),
         ("b", "cir"), ("b", "cir_paired"), ("c", "cir_paired_empirical"), ("c", "cir_paired_certified")}
