# cir 0.1 compatibility: examples/counter.py at commit 5c46ee4^, before the renames of 0.2.0, kept
# verbatim below this comment (its agent defines settings()). tests/compat/test_compat.py runs it.
"""Bring your own environment: a sticky counter through the paired replayer, the analysis and CIR.

Nothing here is ALFWorld. The four parts a study needs are each a few lines:

- an **environment** (:class:`cir.envs.base.Env`): ``reset``, ``step``, exact
  ``snapshot``/``restore``, and the ``refresh_query`` a refresh sends;
- an **agent** (:class:`cir.agents.base.Agent`): a pure function of the messages it was shown;
- a **feature extractor** (:class:`cir.episode.extractor.FeatureExtractor`): what a harness knows
  before a recovery decision, read from the shown text of *this* environment;
- **tasks**: anything with a ``task_id`` (``split`` and ``task_type`` are used when present).

The game: make a counter show a target number, then ``stop``. ``add 1`` / ``add 2`` click
the counter, but at some numbers it is sticky and ``add 2`` clicks only once; the answer
says how many times it clicked, so an agent that reads its observations keeps count. A
stale or missing observation makes it lose count; a refresh (``read counter``) shows the
number again, and costs one of the counter's few moves. So refresh can rescue a run, and
harm one that had no move to spare.

The same parts bundled as an environment family (:data:`FAMILY`, :class:`cir.Family`) go
through every command: ``cir tasks generate --env examples.counter:FAMILY --split test --n 40
--out counter-tasks``, ``cir check-env --env examples.counter:FAMILY``, ``cir run --env
examples.counter:FAMILY --tasks counter-tasks/test --out counter-run``, ``cir fit``, ``cir
evaluate``, ``cir explain``, ``cir episode --router`` (from this repository's folder).

Run it (a few seconds): ``python examples/counter.py [--out DIR]``. It prints the paired
outcomes, the effects of refresh with task-level bootstrap intervals, CIR's held-out
evaluation, and the log of a chat-style harness that asks the router live; with ``--out``
it keeps the test tasks' ``paired.csv`` (``cir table DIR/paired.csv`` reads it) and the router.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cir import (
    REFRESH_PREFIX,
    CIRPolicy,
    Family,
    LLMPrompt,
    ReplaySettings,
    Router,
    Transcript,
    effect_table,
    evaluate,
    run_task_pairs,
    validate_paired,
)

_SHOWS = re.compile(r"The counter shows (\d+)\.")
_CLICKS = re.compile(r"The counter clicks (\d+) times?\.")
_GOAL = re.compile(r"Your task is to: make the counter show (\d+), then stop\. It locks after (\d+) moves\.")


# -- tasks and the environment ------------------------------------------------------------------
@dataclass(frozen=True)
class CounterTask:
    task_id: str
    split: str
    target: int
    sticky: int  # add 2 clicks once at numbers divisible by this
    moves: int  # the counter locks after this many moves
    task_type: str = "counter"


def make_tasks(n: int, split: str, seed: int) -> list[CounterTask]:
    """``n`` tasks; ``seed`` keeps splits apart. Each has 0-2 moves to spare."""
    tasks = []
    for i in range(n):
        target, sticky, spare = 9 + (i * 7 + seed) % 12, 3 + (i + seed) % 3, (i * 5 + seed) % 3
        needed = _optimal_moves(target, sticky)
        tasks.append(CounterTask(f"counter-{split}-{i:03d}", split, target, sticky, needed + spare))
    return tasks


def _clicks(count: int, add: int, sticky: int) -> int:
    return 1 if add == 2 and count % sticky == 0 else add


def _optimal_moves(target: int, sticky: int) -> int:
    count, moves = 0, 0
    while count < target:
        count += _clicks(count, min(2, target - count), sticky)
        moves += 1
    return moves + 1  # and stop


class CounterEnv:
    """The sticky counter (an :class:`cir.envs.base.Env`); its state is three numbers."""

    refresh_query = "read counter"

    def __init__(self, task: CounterTask) -> None:
        self.task = task
        self.state = (0, 0, False)  # count, moves, done

    def reset(self) -> str:
        self.state = (0, 0, False)
        t = self.task
        return (f"You stand before a counter. The counter shows 0.\n"
                f"Your task is to: make the counter show {t.target}, then stop. It locks after {t.moves} moves.")

    def step(self, action: str) -> tuple[str, bool, bool]:
        count, moves, done = self.state
        if done:
            return "The counter is locked.", True, False
        moves += 1
        won, text = False, "Nothing happens."
        if action in ("add 1", "add 2"):
            clicks = _clicks(count, int(action[-1]), self.task.sticky)
            count += clicks
            text = f"The counter clicks {clicks} time{'s' if clicks > 1 else ''}."
        elif action == self.refresh_query:
            text = f"The counter shows {count}."
        elif action == "stop":
            won, done = count == self.task.target, True
            text = "The counter opens. You win." if won else f"The counter shows {count}. Wrong number."
        if moves >= self.task.moves and not done:
            done, text = True, text + " The counter locks."
        self.state = (count, moves, done)
        return text, done, won

    def snapshot(self) -> tuple[int, int, bool]:
        return self.state

    def restore(self, snapshot: tuple[int, int, bool]) -> None:
        self.state = snapshot


# -- the agent --------------------------------------------------------------------------------------
def believed_count(messages: list[dict[str, str]]) -> int:
    """What the messages say the counter shows: readings reset it, clicks add to it, and an
    answer that says neither (missing) is taken to have clicked as asked."""
    count, asked = 0, 0
    for m in messages[1:]:
        text = m["content"]
        if m["role"] == "assistant":
            asked = int(text[-1]) if text.startswith("add ") else 0
            continue
        shows, clicks = _SHOWS.search(text), _CLICKS.search(text)
        count = int(shows.group(1)) if shows else count + (int(clicks.group(1)) if clicks else asked)
        asked = 0
    return count


class CounterAgent:
    """Adds up to the target by what it was shown, then stops (an :class:`cir.agents.base.Agent`)."""

    name = "counter-agent"

    def act(self, context: list[dict[str, str]]) -> str:
        target = int(_GOAL.search(context[0]["content"]).group(1))
        left = target - believed_count(context)
        return "stop" if left <= 0 else f"add {min(2, left)}"

    def settings(self) -> dict[str, Any]:
        return {"version": 1}


# -- the feature extractor ----------------------------------------------------------------------------
class CounterFeatures:
    """What a harness of the counter knows before a decision (a :class:`cir.episode.extractor.FeatureExtractor`)."""

    name = "counter"
    features = {
        "f_delay": "env actions since the suspect observation",
        "f_moves_left": "moves left before the counter locks",
        "f_left_believed": "target minus the count the shown messages imply",
        "f_suspect_unreadable": "1 if the suspect observation says neither clicks nor a number",
        "f_suspect_odd": "1 if the suspect observation reports more clicks than were asked for",
    }

    def extract(self, transcript: Transcript, delay: int, *, max_turns: int, max_actions: int) -> dict[str, float]:
        target, moves = map(int, _GOAL.search(transcript.task_text).groups())
        acted = [s for s in transcript.steps if s.action is not None]
        messages = transcript.context()
        f = dict.fromkeys(self.features, 0.0)
        f["f_delay"] = float(delay)
        f["f_moves_left"] = float(moves - len(acted))
        f["f_left_believed"] = float(target - believed_count(messages))
        if len(acted) - delay >= 1:
            suspect = acted[len(acted) - delay - 1]
            clicks = _CLICKS.search(suspect.shown)
            f["f_suspect_unreadable"] = float(not clicks and not _SHOWS.search(suspect.shown))
            asked = int(suspect.action[-1]) if suspect.action.startswith("add ") else 0
            f["f_suspect_odd"] = float(bool(clicks) and int(clicks.group(1)) > asked)
        return f


COUNTER_FEATURES = CounterFeatures()


# -- the family: the same parts for the command line ------------------------------------------------
SPLIT_SEEDS = {"train": 0, "test": 1}


def generate_tasks(folder: str | Path, split: str, n: int, seed: int, *, progress: bool = True,
                   jobs: int = 1) -> None:
    """``n`` tasks of ``split`` into ``folder/split/tasks.json`` (``seed`` shifts every split)."""
    out = Path(folder) / split
    out.mkdir(parents=True, exist_ok=True)
    tasks = make_tasks(n, split, seed=SPLIT_SEEDS[split] + 2 * seed)
    (out / "tasks.json").write_text(json.dumps([asdict(t) for t in tasks], indent=1) + "\n")


def load_tasks(path: str | Path, split: str | None = None) -> list[CounterTask]:
    """The tasks of a split folder, or of a folder of split folders, sorted by id."""
    path = Path(path)
    files = [path / "tasks.json"] if (path / "tasks.json").is_file() else sorted(path.glob("*/tasks.json"))
    tasks = [CounterTask(**t) for f in files for t in json.loads(f.read_text(encoding="utf-8"))]
    return sorted((t for t in tasks if split is None or t.split == split), key=lambda t: t.task_id)


def counter_agent(profile: str = "default", *, seed: int = 0) -> CounterAgent:
    return CounterAgent()


def counter_actions(env: CounterEnv, observation: str) -> list[str]:
    return ["add 1", "add 2", "read counter", "stop"]


PROMPT = LLMPrompt(
    version="counter-1",
    instructions="You click a counter to a target number. Commands: add 1, add 2, read counter, stop.",
    examples=("You stand before a counter. The counter shows 0.\n"
              "Your task is to: make the counter show 3, then stop. It locks after 4 moves.\n"
              "> add 2\nThe counter clicks 2 times.\n> add 1\nThe counter clicks 1 time.\n"
              "> stop\nThe counter opens. You win.",),
)

FAMILY = Family(name="counter", load_tasks=load_tasks, make_env=CounterEnv, extractor=COUNTER_FEATURES,
                prompt=PROMPT, splits=("train", "test"), generate_tasks=generate_tasks,
                builtin_agent=counter_agent, walk_actions=counter_actions)


# -- a harness of your own, asking the router live -------------------------------------------------------
def chat_harness(task: CounterTask, router: Router, suspect_move: int) -> tuple[bool, list[dict[str, Any]]]:
    """A chat-style harness: a message list, an observation it suspects (here: it showed the
    previous answer again at ``suspect_move``), the router asked after every later move, and
    the refresh it asks for sent, shown and logged. Returns (won, log)."""
    env, agent = CounterEnv(task), CounterAgent()
    messages = [{"role": "user", "content": env.reset()}]
    log: list[dict[str, Any]] = []
    for move in range(1, task.moves + 1):
        action = agent.act(messages)
        obs, done, won = env.step(action)
        shown = messages[-1]["content"] if move == suspect_move and move > 1 else obs
        messages += [{"role": "assistant", "content": action}, {"role": "user", "content": shown}]
        if done:
            return won, log
        if move < suspect_move:
            continue
        transcript = Transcript.from_messages(task.task_id, messages, refresh_query=env.refresh_query)
        decision = router.decide(transcript, delay=move - suspect_move)
        log.append({"move": move, "delay": decision.delay, "recover": decision.operation,
                    "p_err": round(decision.p_err, 3), "p0": round(decision.p0, 3),
                    "p1": round(decision.p1, 3), "blocked_by": decision.blocked_by})
        if decision.recover:  # this router was fitted for refresh, its one operation
            answer, done, won = env.step(env.refresh_query)  # one move, like any action
            messages.append({"role": "user", "content": f"{REFRESH_PREFIX} {answer}"})
            log.append({"move": move, "recovery": "refresh", "query": env.refresh_query, "shown": answer})
            if done:
                return won, log
    return False, log


# -- the study ------------------------------------------------------------------------------------------
def paired_table(tasks: list[CounterTask], settings: ReplaySettings) -> pd.DataFrame:
    """Every task through the paired replayer, as one validated paired table."""
    rows = []
    for task in tasks:
        result = run_task_pairs(task, CounterAgent(), CounterEnv(task), settings, extractor=COUNTER_FEATURES)
        rows += result.rows
    return validate_paired(pd.DataFrame(rows), source="counter study")


def main(out: Path | None = None, resamples: int = 2000) -> dict[str, Any]:
    """The whole study; returns its tables (the test checks them)."""
    settings = ReplaySettings(conditions=("clean", "stale1", "stale2", "missing"), delays=(0, 1, 2, 4),
                              operations=("refresh", "refresh_ablated"), perturb_fraction=0.5,
                              max_turns=30, max_actions=30)
    train = paired_table(make_tasks(60, "train", seed=0), settings)
    test = paired_table(make_tasks(40, "test", seed=1), settings)

    counts = pd.crosstab([test["operation"], test["condition"]], test["outcome"])
    print("Paired outcomes on the test tasks (pairs, all delays):\n")
    print(counts.to_string(), "\n")
    effects = effect_table(test, by=["operation", "condition", "delay"], resamples=resamples, seed=0)
    shown = effects[["operation", "condition", "delay", "n", "rescues", "harms", "effect_pp",
                     "ci_low_pp", "ci_high_pp"]]
    print("Effect of refresh (pp, 95% task-level bootstrap CI; refresh_ablated in the returned table):\n")
    print(shown[shown["operation"] == "refresh"].to_string(index=False, float_format=lambda v: f"{v:.1f}"), "\n")

    out = out or Path(tempfile.mkdtemp())
    test.to_csv(out / "paired.csv", index=False)  # the command line reads it too: cir table OUT/paired.csv
    policy = CIRPolicy(extractor=COUNTER_FEATURES, delays=(1, 2, 4), seed=0).fit(train)
    path = policy.to_router(max_turns=settings.max_turns, max_actions=settings.max_actions).save(
        out / "counter-router.json")
    router = Router.load(path, extractor=COUNTER_FEATURES)  # refuses any other extractor
    result = evaluate(router, test, resamples=resamples, seed=0)
    summary = result["summary"].query("condition == 'all'")[
        ["policy", "success_policy", "effect_pp", "ci_low_pp", "ci_high_pp", "intervention_rate", "clean_harm_rate"]]
    print(f"CIR fitted on {policy.n_tasks_} train tasks, evaluated on the test tasks:\n")
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.3f}"), "\n")

    task = make_tasks(40, "test", seed=1)[29]
    won, log = chat_harness(task, router, suspect_move=2)
    print(f"a chat-style harness on {task.task_id} (stale observation at move 2): "
          f"{'won' if won else 'lost'}; its log:")
    for entry in log:
        print("  ", entry)
    return {"train": train, "test": test, "effects": effects, "summary": result["summary"],
            "router": router, "log": log, "won": won}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A sticky counter through the paired replayer and CIR.")
    parser.add_argument("--out", type=Path, help="folder for paired.csv and counter-router.json (default: a temp folder)")
    args = parser.parse_args()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    main(args.out)
