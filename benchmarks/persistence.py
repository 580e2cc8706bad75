"""A stale cache that stays stale against a one-shot perturbation: the same study twice.

Runs (or reads) two ``cir reproduce`` outputs of the same seed and configs, one with every
config's perturbations one-shot (the shipped configs) and one with ``persistence = "refresh"`` in
every config (a copy of the configs with that one key added: the same command sent again is shown
the perturbed text again until a recovery queries the env afresh), and writes side by side, per
cohort that runs it, each operation's effect on the stale and lag arms (all delays pooled,
task-level cluster bootstrap), success without recovery, and the held-out routers and rewinds by
kind (``cir_multi``, rewinding where the anomaly rule fires, always rewinding, ``cir_paired``).
The tasks, the agent and the factual runs are the same in both: only what a read returns after the
perturbation point differs.

Usage::

    python benchmarks/persistence.py --work /tmp/persist --quick        # runs both studies
    python benchmarks/persistence.py --once OUT_A --persistent OUT_B    # reads two finished ones
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("cir_multi", "anomaly_rewind", "always_rewind", "cir_paired", "anomaly", "oracle")


def persistent_configs(source: Path, out: Path, persistence: str) -> Path:
    """A copy of the configs in ``source`` with ``persistence`` set in each (nothing else changed)."""
    out.mkdir(parents=True, exist_ok=True)
    for config in sorted(source.glob("*.toml")):
        text = config.read_text(encoding="utf-8")
        text = re.sub(r"(?m)^persistence = .*\n", "", text)
        (out / config.name).write_text(f"{text.rstrip()}\npersistence = \"{persistence}\"\n", encoding="utf-8")
    return out


def reproduce(out: Path, experiments: Path | None, quick: bool, jobs: int) -> None:
    cmd = [sys.executable, "-m", "cir", "reproduce", "--out", str(out), "--jobs", str(jobs), "--quiet",
           *(["--quick"] if quick else []), *(["--experiments", str(experiments)] if experiments else [])]
    subprocess.run(cmd, check=True, cwd=ROOT)


def effects(study: Path, resamples: int, seed: int):
    """Each cohort's effect of each operation on its stale and lag arms, all delays pooled."""
    import pandas as pd

    from cir.pairs.paired import read_paired
    from cir.stats.effects import effect_table
    from cir.study.kinds import condition_kind

    rows = []
    for run in sorted(p for p in (study / "runs").iterdir() if p.is_dir()):
        df = read_paired(run)
        df = df.assign(kind=[condition_kind(c) for c in df["condition"]])
        df = df[df["kind"].isin(["stale", "lag"])]
        table = effect_table(df, by=["kind", "operation"], subset="all", resamples=resamples, seed=seed)
        rows.append(table.assign(cohort=run.name))
    return pd.concat(rows, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, help="where to run both studies (OUT/once, OUT/persistent)")
    ap.add_argument("--once", type=Path, help="a finished study with one-shot perturbations")
    ap.add_argument("--persistent", type=Path, help="the same study with persistent ones")
    ap.add_argument("--persistence", default="refresh", help="the persistent study's setting (default refresh)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.work is None and (args.once is None or args.persistent is None):
        ap.error("give --work (run both studies) or --once and --persistent (two finished ones)")

    import pandas as pd

    from cir.study.page import markdown_table

    once, persistent = args.once, args.persistent
    if args.work is not None:
        once, persistent = args.work / "once", args.work / "persistent"
        configs = persistent_configs(ROOT / "experiments", args.work / "configs", args.persistence)
        reproduce(once, None, args.quick, args.jobs)
        reproduce(persistent, configs, args.quick, args.jobs)
    a, b = effects(once, args.resamples, args.seed), effects(persistent, args.resamples, args.seed)
    keys = ["cohort", "kind", "operation"]
    shown = ["n", "success_without", "effect_pp", "ci_low_pp", "ci_high_pp", "rescues", "harms"]
    side = a[keys + shown].merge(b[keys + shown], on=keys, suffixes=("_once", "_persistent"))
    print("Each operation on the stale and lag arms, all delays pooled (pp; task-level bootstrap)\n")
    print(markdown_table(side))
    parts = []
    for name, study in (("once", once), ("persistent", persistent)):
        kinds = pd.read_csv(study / "tables" / "cir_eval_by_kind.csv")
        kinds = kinds[kinds["policy"].isin(POLICIES) & kinds["condition"].isin(["stale", "lag"])]
        parts.append(kinds[["policy", "condition", "n", "success_never", "effect_pp", "ci_low_pp", "ci_high_pp",
                            "sign_flip_p", "intervention_rate"]].assign(study=name))
    held = pd.concat(parts, ignore_index=True).rename(columns={"condition": "kind"})
    print("\nHeld out, by kind: the routers and the rewinds\n")
    print(markdown_table(held.sort_values(["kind", "policy", "study"], kind="mergesort")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
