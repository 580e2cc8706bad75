"""Live router decisions versus offline decisions on a real run, and the cost of a decision.

For every no-recovery arm in RUN_DIR/episodes.jsonl.gz and every candidate delay of
the router, rebuild the decision prefix exactly as the replayer does (the transcript
up to env action ``point + delay``), ask ``Router.decide`` and compare with the
offline policy's decision on the same row of RUN_DIR/paired.csv (features read back
from the CSV). Prints the number of decisions compared, the number that agree (the
design requires all), the features that differ if any, and the time per live decision
relative to the time per offline row decision, measured in the same run.

    python benchmarks/policy_live_offline.py RUN_DIR ROUTER_JSON
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from cir.episode.transcript import Transcript
from cir.families.alfworld.features import extract_features
from cir.pairs.paired import read_paired
from cir.pairs.store import read_episodes, read_task_summaries
from cir.router.evaluation import decide_rows
from cir.router.runtime import Router


def main(run_dir: str, router_path: str) -> int:
    router = Router.load(router_path)
    path = Path(run_dir) / "episodes.jsonl.gz"
    table = read_paired(Path(run_dir) / "paired.csv")
    table = table[table["operation"] == router.operations[0]]
    summaries = read_task_summaries(path)
    factual: dict[str, dict] = {}
    arms: list[tuple[str, str, dict]] = []
    for ep in read_episodes(path):
        if ep.get("role") == "factual":
            factual[ep["task_id"]] = ep["transcript"]
        elif ep.get("role") == "no_recovery":
            arms.append((ep["task_id"], ep["condition"], ep))
    live, rows, mismatched_features = [], [], 0
    t_live = 0.0
    for task_id, condition, ep in arms:
        data = ep["transcript"] if ep.get("transcript") is not None else factual.get(task_id)
        if data is None:
            continue
        t = Transcript.from_dict(data)
        p = summaries[task_id]["point"]
        for d in router.delays:
            j = p + d
            if t.env_actions < j:
                continue
            k = t.steps_until_env_action(j)
            if k >= len(t.steps):  # the episode ended at this action: no decision (executed = 0)
                continue
            prefix = t.prefix(k)
            row = table[(table["task_id"] == task_id) & (table["condition"] == condition)
                        & (table["delay"] == d)]
            if row.empty:
                continue
            start = time.perf_counter()
            decision = router.decide(prefix, d)
            t_live += time.perf_counter() - start
            feats = extract_features(prefix, d, max_turns=int(router.params["max_turns"]),
                                     max_actions=int(router.params["max_actions"]))
            csv = row.iloc[0]
            if any(float(csv[f]) != feats[f] for f in router.features):
                mismatched_features += 1
            live.append(decision)
            rows.append(row)
    if not rows:
        print("no decision cells found")
        return 1
    offline_rows = pd.concat(rows)
    start = time.perf_counter()
    offline = decide_rows(router, offline_rows)
    t_off = time.perf_counter() - start
    agree = sum(a.recover == b and a.blocked_by == c and a.operation == o for a, b, c, o in
                zip(live, offline["recover"], offline["blocked_by"], offline["operation"], strict=True))
    same_p = sum(a.p_err == b and a.utility == u for a, b, u in
                 zip(live, offline["p_err"], offline["utility"], strict=True))
    n = len(live)
    print(f"decisions compared: {n}; equal decisions and blockers: {agree}; equal scores: {same_p}; "
          f"rows whose CSV features differ from live features: {mismatched_features}")
    print(f"live recoveries: {sum(d.recover for d in live)}; "
          f"blocked by: {pd.Series([d.blocked_by for d in live]).value_counts(dropna=False).to_dict()}")
    print(f"time per live decision (features + 3 models): {1e3 * t_live / n:.3f} ms; per offline row "
          f"(batched): {1e3 * t_off / n:.3f} ms; ratio {t_live / max(t_off, 1e-12):.1f}x")
    return 0 if agree == n else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
