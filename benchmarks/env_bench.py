"""Speed of the ALFWorld adapter: load, reset, step, snapshot, restore, reset+replay.

Everything is measured in the same run, so the ratios hold on any machine:
- restore (fast, engine state id) / reset+replay of 10 and 30 actions (portable snapshots);
- step with the engine's savings (cir.families.alfworld.engine) / step on the unmodified engine, with
  the observations checked byte-identical on the way.

    python benchmarks/env_bench.py                 # 3 verified generated tasks (temp folder)
    python benchmarks/env_bench.py --tasks DIR --n-tasks 6 --json out.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

# fast_downward rewrites sys.argv when it translates: parse arguments first.


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--tasks",
        help="a game file or task folder (default: generate verified "
        "tasks of --n-tasks types into a temporary folder)",
    )
    p.add_argument("--n-tasks", type=int, default=3, help="tasks to use (default 3)")
    p.add_argument("--walk", type=int, default=30, help="random-walk length per task (30)")
    p.add_argument("--restores", type=int, default=20, help="fast restores per task (20)")
    p.add_argument("--replays", type=int, default=3, help="reset+replay repeats per length (3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the results here")
    return p.parse_args(argv)


def _ms(seconds: float) -> float:
    return seconds * 1000.0


def _timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def _game_files(args: argparse.Namespace, tmp: Path) -> list[Path]:
    from cir.families.alfworld.tasks import load_tasks

    if args.tasks:
        refs = load_tasks(args.tasks)
        return [r.game_file for r in refs[: args.n_tasks]]
    from cir.families.alfworld.generate import generate_split

    types = [
        "pick_heat_then_place_in_recep",
        "pick_two_obj_and_place",
        "look_at_obj_in_light",
        "pick_and_place_simple",
        "pick_clean_then_place_in_recep",
        "pick_cool_then_place_in_recep",
    ]
    generate_split(tmp, "train", args.n_tasks, args.seed, types=types, progress=False)
    return [r.game_file for r in load_tasks(tmp / "train")]


def bench_task(game: Path, args: argparse.Namespace, rng: random.Random) -> dict[str, list[float]]:
    from cir.families.alfworld.env import AlfworldEnv

    t: dict[str, list[float]] = {
        k: []
        for k in (
            "load",
            "load_unmodified",
            "reset_engine",
            "reset_engine_unmodified",
            "reset_fast",
            "step",
            "step_unmodified",
            "snapshot",
            "restore_fast",
            "reset_replay_10",
            "reset_replay_30",
            "reset_replay_10_unmodified",
            "reset_replay_30_unmodified",
        )
    }

    dt, env = _timed(AlfworldEnv, game, "fast")
    t["load"].append(dt)
    dt, plain = _timed(lambda: AlfworldEnv(game, "fast", savings=False))
    t["load_unmodified"].append(dt)
    dt, obs = _timed(env.reset)
    t["reset_engine"].append(dt)
    dt, obs_plain = _timed(plain.reset)
    t["reset_engine_unmodified"].append(dt)
    assert obs == obs_plain

    # A random walk; the unmodified engine follows and must say exactly the same.
    snaps = [env.snapshot()]
    for _ in range(args.walk):
        cmds = env.admissible_commands()
        a = rng.choice(cmds) if rng.random() > 0.1 else "xyzzy"
        dt, out = _timed(env.step, a)
        t["step"].append(dt)
        dt, out_plain = _timed(plain.step, a)
        t["step_unmodified"].append(dt)
        if out != out_plain:
            raise SystemExit(f"{game}: text with savings differs on {a!r}: {out!r} vs {out_plain!r}")
        dt, s = _timed(env.snapshot)
        t["snapshot"].append(dt)
        snaps.append(s)

    for _ in range(args.restores):
        dt, _ = _timed(env.restore, rng.choice(snaps))
        t["restore_fast"].append(dt)
    for _ in range(3):
        dt, _ = _timed(env.reset)
        t["reset_fast"].append(dt)

    # Portable snapshots: restore = engine reset + replay of the recorded actions.
    for savings, suffix in ((True, ""), (False, "_unmodified")):
        rep = AlfworldEnv(game, "replay", savings=savings)
        rep.reset()
        for k in (10, 30):
            if len(snaps) <= k:
                continue
            for _ in range(args.replays):
                dt, _ = _timed(rep.restore, snaps[k])
                t[f"reset_replay_{k}{suffix}"].append(dt)
            # and the state is right: same next observation as the fast env
            env.restore(snaps[k])
            assert rep.step("look") == env.step("look")
    return t


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        games = _game_files(args, Path(tmp))
        all_t: dict[str, list[float]] = {}
        for g in games:
            for k, v in bench_task(g, args, rng).items():
                all_t.setdefault(k, []).extend(v)
    med = {k: statistics.median(v) for k, v in all_t.items() if v}
    rows = [(k, _ms(med[k]), len(all_t[k])) for k in med]
    print(f"ALFWorld adapter benchmark: {len(games)} tasks, walk {args.walk}, seed {args.seed}")
    print(f"{'operation':32s} {'median ms':>12s} {'n':>6s}")
    for k, m, n in rows:
        print(f"{k:32s} {m:12.3f} {n:6d}")
    ratios = {}
    for k in (10, 30):
        if f"reset_replay_{k}" in med:
            ratios[f"restore_fast / reset_replay_{k}"] = (
                med["restore_fast"] / med[f"reset_replay_{k}"]
            )
            ratios[f"restore_fast / reset_replay_{k}_unmodified"] = (
                med["restore_fast"] / med[f"reset_replay_{k}_unmodified"]
            )
    ratios["step / step_unmodified"] = med["step"] / med["step_unmodified"]
    ratios["load / load_unmodified"] = med["load"] / med["load_unmodified"]
    ratios["reset_engine / reset_engine_unmodified"] = (
        med["reset_engine"] / med["reset_engine_unmodified"]
    )
    ratios["reset_fast / reset_engine"] = med["reset_fast"] / med["reset_engine"]
    print()
    for k, v in ratios.items():
        print(f"{k:48s} {v:10.3g}  ({1 / v:,.0f}x faster)")
    print("observations with savings byte-identical to the unmodified engine: yes")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "settings": vars(args),
                    "tasks": [str(g) for g in games],
                    "median_ms": {k: _ms(v) for k, v in med.items()},
                    "n": {k: len(v) for k, v in all_t.items()},
                    "ratios": ratios,
                },
                indent=2,
                sort_keys=True,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
