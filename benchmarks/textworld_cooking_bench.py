"""The textworld-cooking family measured: generation, restores, the agent, and a small paired study.

1. **Generation**: games per split and the time per game (``generate_split``; the calibration
   cohort is generator seed 1, the study's games seed 0).
2. **Restores**: over random walks, restore-then-step at every step against the uninterrupted
   walk (observation, done, won, score: every mismatch counted, must be 0), for the ``fast``
   machine-state snapshots and for ``replay``; the cost of a restore+step in each mode, as a
   ratio to a plain step measured in the same run.
3. **The agent's clean success** on the calibration cohort (the only cohort its defaults were
   set on), and what fired in those clean runs.
4. **A small paired study** through :func:`cir.pairs.run.run_experiment` (``RunSettings(family=
   "textworld-cooking")``: the family's built-in agent, envs and extractor) on the study's valid games,
   its effects table (:func:`cir.stats.effects.effect_table`), CIR fitted on the valid games'
   factual successes and evaluated on the test games (:func:`cir.router.evaluation.evaluate`),
   the divergences ``cir explain``'s code finds unexplained, and the wall time of each part.

Run from the repository root::

    python benchmarks/textworld_cooking_bench.py --out /tmp/twb --calib 30 --valid 12 --test 8 --jobs 2
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import time
from pathlib import Path

import pandas as pd

from cir.episode.harness import Harness
from cir.families.textworld_cooking import family
from cir.families.textworld_cooking.agent.builtin import CookingAgent
from cir.families.textworld_cooking.agent.mechanisms import DIVERGENCE_MECHANISMS
from cir.families.textworld_cooking.env import CookingEnv
from cir.families.textworld_cooking.features import COOKING_FEATURES
from cir.families.textworld_cooking.generate import generate_split
from cir.families.textworld_cooking.tasks import load_tasks
from cir.pairs.paired import read_paired
from cir.pairs.run import run_experiment
from cir.pairs.settings import ReplaySettings, RunSettings
from cir.router.evaluation import evaluate
from cir.router.policy import CIRPolicy
from cir.stats.effects import effect_table


def generation(out: Path, counts: list[tuple[str, str, int, int]], jobs: int) -> dict:
    report = {}
    for name, split, n, seed in counts:
        t0 = time.perf_counter()
        games = generate_split(out / name, split, n, seed, jobs=jobs)
        made = sorted(g.seconds for g in games if g.seconds > 0)
        report[f"{name}/{split}"] = {
            "games": len(games), "seed": seed, "made_now": len(made), "wall_s": round(time.perf_counter() - t0, 1),
            "median_s_per_game": made[len(made) // 2] if made else None,
            "task_types": dict(collections.Counter(g.task_type for g in games)),
        }
    return report


def restores(tasks: list, steps: int = 30) -> dict:
    report = {}
    for mode in ("fast", "replay"):
        checks = mismatches = 0
        step_s = restore_step_s = 0.0
        for k, task in enumerate(tasks):
            rng = random.Random(k)
            env = CookingEnv(task.game_file, snapshots=mode)
            obs = env.reset()
            actions, walk, snaps = [], [], [env.snapshot()]
            t0 = time.perf_counter()
            for _ in range(steps):
                action = rng.choice(family.walk_actions(env, obs))
                obs, done, won = env.step(action)
                actions.append(action)
                walk.append((obs, done, won, env.score))
                snaps.append(env.snapshot())
            step_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            for i in range(steps):
                env.restore(snaps[i])
                checks += 1
                mismatches += (*env.step(actions[i]), env.score) != walk[i]
            restore_step_s += time.perf_counter() - t0
        report[mode] = {"checks": checks, "mismatches": mismatches,
                        "restore_step_vs_step": round(restore_step_s / step_s, 2)}
    return report


def clean_success(tasks: list, seed: int = 0) -> dict:
    wins, fired, lengths = 0, collections.Counter(), []
    t0 = time.perf_counter()
    for task in tasks:
        transcript = Harness(CookingAgent(seed=seed)).episode(CookingEnv(task.game_file), task.task_id)
        wins += transcript.won
        lengths.append(transcript.env_actions)
        fired.update(e.mechanism for e in transcript.trace)
    return {"tasks": len(tasks), "won": wins, "success_pct": round(100 * wins / len(tasks), 1),
            "median_env_actions": sorted(lengths)[len(lengths) // 2], "fired": dict(fired),
            "wall_s": round(time.perf_counter() - t0, 1)}


def paired_study(out: Path, valid: list, test: list, jobs: int) -> dict:
    replay = ReplaySettings(conditions=("clean", "stale2", "stale1", "missing"), delays=(0, 1, 2, 4),
                            operations=("refresh", "placebo", "replan"))
    settings = RunSettings(replay=replay, agent="builtin", jobs=jobs, family="textworld-cooking")
    report = {}
    tables = {}
    for name, tasks in (("valid", valid), ("test", test)):
        t0 = time.perf_counter()
        run_experiment(tasks, out / f"run-{name}", settings, tasks_source=f"{out}/study/{name}", progress=False,
                       echo=lambda _line: None)
        tables[name] = read_paired(out / f"run-{name}" / "paired.csv")
        report[f"run_{name}_wall_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    both = pd.concat([tables["valid"], tables["test"]], ignore_index=True)
    effects = effect_table(both, by=["operation", "condition", "delay"], resamples=2000, seed=0)
    report["effects"] = effects[["operation", "condition", "delay", "n", "rescues", "harms", "effect_pp",
                                 "ci_low_pp", "ci_high_pp"]].round(1).to_dict(orient="records")
    fit = tables["valid"][tables["valid"]["operation"] == "refresh"]
    policy = CIRPolicy(extractor=COOKING_FEATURES, seed=0).fit(fit[fit["factual_success"].astype(bool)])
    router = policy.to_router(max_turns=replay.max_turns, max_actions=replay.max_actions)
    router.save(out / "cooking-router.json")
    held_out = tables["test"][tables["test"]["operation"] == "refresh"]
    result = evaluate(router, held_out, resamples=2000, seed=0)
    summary = result["summary"].query("condition == 'all'")
    report["cir"] = summary[["policy", "success_policy", "effect_pp", "ci_low_pp", "ci_high_pp",
                             "intervention_rate", "clean_harm_rate"]].round(3).to_dict(orient="records")
    report["stats_and_cir_wall_s"] = round(time.perf_counter() - t0, 1)
    report["divergences"] = divergences(out / "run-valid")
    return report


def divergences(run_dir: Path) -> dict:
    """Diverging pairs of a run and how many no divergence mechanism of the cooking agent explains
    (``cir explain``'s first divergence, with the family's mechanisms instead of ALFWorld's)."""
    from cir.stats.explain import iter_pair_explanations

    pairs = diverged = unexplained = 0
    by_mechanism: collections.Counter = collections.Counter()
    for ex in iter_pair_explanations(run_dir):
        pairs += 1
        if not ex.diverged or ex.branch is None:
            continue
        diverged += 1
        names = {e.mechanism for e in ex.branch.trace
                 if e.mechanism in DIVERGENCE_MECHANISMS and ex.branch_step <= e.at <= ex.divergence}
        unexplained += not names
        by_mechanism.update(names)
    return {"pairs": pairs, "diverged": diverged, "unexplained": unexplained, "by_mechanism": dict(by_mechanism)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--calib", type=int, default=30, help="calibration games (train, generator seed 1)")
    parser.add_argument("--valid", type=int, default=12, help="study games to fit CIR on (valid, seed 0)")
    parser.add_argument("--test", type=int, default=8, help="study games to evaluate CIR on (test, seed 0)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict = {}
    t0 = time.perf_counter()
    report["generation"] = generation(args.out, [("calib", "train", args.calib, 1), ("study", "valid", args.valid, 0),
                                                 ("study", "test", args.test, 0)], args.jobs)
    calib = load_tasks(args.out / "calib")
    report["restores"] = restores(calib[:5])
    report["clean_success_calibration"] = clean_success(calib)
    report["study"] = paired_study(args.out, load_tasks(args.out / "study", "valid"),
                                   load_tasks(args.out / "study", "test"), args.jobs)
    report["wall_s"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(report, indent=1)
    (args.out / "bench.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
