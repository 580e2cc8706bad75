"""The explanation trace: every divergence between two arms is explained by a mechanism.

A grid of real generated tasks x conditions x delays x every recovery operation runs
through the paired replayer with the built-in default agent; then every pair whose arms
diverge must name a mechanism that fired at or after the decision, and a placebo message
on a clean run must leave the episode identical exactly when neither an interruption nor an
over-correction fired (the two reactions a content-free message can cause there).
The default run uses six tasks (one per type); ``-m slow`` runs 40.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cir.agents.modelfree import Draws
from cir.cli import main
from cir.episode.operations import OPERATIONS
from cir.episode.protocol import DEFAULT_CONDITIONS, DEFAULT_DELAYS
from cir.episode.transcript import AGENT, HARNESS, Step, TraceEvent, Transcript
from cir.families.alfworld.agent.beliefs import read_context
from cir.families.alfworld.agent.builtin import PROFILES, BuiltinAgent
from cir.families.alfworld.features import extract_features
from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.settings import RunSettings
from cir.pairs.store import read_episodes
from cir.stats.explain import (
    ATTRIBUTIONS,
    attribution_split,
    explain_pair,
    explain_run,
    find_pair,
    format_pair,
    harm_table,
    mechanism_counts,
    tail_loop,
)


def _grid(root: Path, n: int) -> Path:
    from cir.families.alfworld.generate import generate_split
    from cir.families.alfworld.tasks import load_tasks

    generate_split(root / "tasks", "valid_unseen", n, 0, progress=False, jobs=2)
    out = root / "run"
    run_experiment(load_tasks(root / "tasks" / "valid_unseen"), out,
                   RunSettings(replay=ReplaySettings(conditions=DEFAULT_CONDITIONS, delays=DEFAULT_DELAYS,
                                           operations=tuple(OPERATIONS)), jobs=2),
                   progress=False, echo=lambda s: None)
    return out


def _check(run: Path) -> pd.DataFrame:
    table = explain_run(run)
    paired = pd.read_csv(run / "paired.csv")
    assert len(table) == len(paired)
    unexplained = table[~table["explained"]]
    assert unexplained.empty, unexplained.head().to_string()
    # an arm that never diverged has the same outcome
    assert (table.loc[~table["diverged"], "y0"] == table.loc[~table["diverged"], "y1"]).all()
    # placebo on clean runs: identical exactly when an interruption or an over-correction fired
    placebo = table[(table["operation"] == "placebo") & (table["condition"] == "clean") & table["executed"]]
    reacted = placebo["mechanisms"].str.contains("interruption|over_correct")
    assert (placebo["diverged"] == reacted).all()
    assert len(placebo) and (~placebo["diverged"]).mean() > 0.5
    # what can explain a divergence is reachable by the operation: only a shown refreshed
    # text can correct, be misread or distract
    counts = mechanism_counts(table)
    by_op = counts.groupby("operation")["mechanism"].apply(set).to_dict()
    content_free = {"harness_recheck", "interruption", "over_correct", "budget", "unattributed"}
    assert by_op.get("placebo", set()) <= content_free
    assert by_op.get("replan", set()) <= content_free
    assert by_op.get("refresh_ablated", set()) <= content_free
    assert by_op.get("refresh", set()) <= content_free | {"refresh_correction", "misread_refresh", "distraction"}
    assert "rewind" in by_op.get("rewind", {"rewind"})
    # the strict attribution: every divergence is attributed, budgeted or not; a mechanism
    # attributed is one the window names (it fired on the divergent decision, or it is the rewind)
    d = table[table["diverged"]]
    assert set(d["attribution"]) <= set(ATTRIBUTIONS) and (table.loc[~table["diverged"], "attribution"] == "").all()
    for _, r in d[d["attribution"] == "mechanism"].iterrows():
        assert set(r["decision_mechanisms"].split(",")) <= set(r["mechanisms"].split(","))
    assert (d.loc[d["attribution"] == "unattributed", "decision_mechanisms"] == "").all()
    split = attribution_split(table).set_index("operation")
    assert (split[list(ATTRIBUTIONS)].sum(axis=1) == split["diverged"]).all()
    assert split.loc["all", "diverged"] == len(d) and split.loc["all", "unexplained"] == 0
    harms = harm_table(table)
    assert harms["harms"].sum() >= (table["outcome"] == "harm").sum()
    assert (harms["ended_by_budget"] <= harms["harms"]).all() and (harms["ended_in_circles"] <= harms["harms"]).all()
    return table


def _replies_and_features(run: Path) -> None:
    """Every recorded reply is what the agent answers without its prefix memo, and the
    doubt features count exactly the agent's own unsettled doubts (no-recovery arms)."""
    plain = BuiltinAgent("default", memo=False)
    for i, ep in enumerate(read_episodes(run)):
        if ep.transcript is None or (ep.is_branch and i % 5):
            continue  # every arm, and one recovery branch in five
        t = ep.transcript
        for n, step in enumerate(t.steps):
            if step.actor == AGENT:
                assert plain.act(t.prefix(n).context()) == step.reply, (ep.task_id, ep.role, n)
        if ep.is_arm:
            for n in range(1, len(t.steps) + 1):
                ctx = t.prefix(n).context()
                doubts = read_context(ctx, Draws(b"x"), dict(PROFILES["default"])).doubts
                assert extract_features(t.prefix(n), 0)["f_doubts_open"] == len(doubts)


def test_every_divergence_is_explained_on_six_task_types(tmp_path: Path, capsys) -> None:
    run = _grid(tmp_path, 6)
    table = _check(run)
    _replies_and_features(run)
    # features never see the trace: the paired rows are computed without it
    assert not any(c.startswith("f_") and "trace" in c for c in pd.read_csv(run / "paired.csv").columns)
    assert all(ep.transcript is None or ep.transcript.trace is not None for ep in read_episodes(run))
    assert any(ep.transcript is not None and ep.transcript.trace for ep in read_episodes(run))
    # one diverged pair, side by side
    row = table[table["diverged"]].iloc[0]
    ex = find_pair(run, row["task_id"], row["condition"], int(row["delay"]), row["operation"])
    text = format_pair(ex)
    assert "<-- first divergence" in text and "NOT EXPLAINED" not in text
    assert main(["explain", str(run), "--task", row["task_id"], "--condition", row["condition"],
                 "--delay", str(int(row["delay"])), "--operation", row["operation"]]) == 0
    assert "first divergence at step" in capsys.readouterr().out
    assert main(["explain", str(run)]) == 0
    assert "unexplained" in capsys.readouterr().out
    assert main(["explain", str(run), "--task", row["task_id"]]) == 2


@pytest.mark.slow
def test_every_divergence_is_explained_on_forty_tasks(tmp_path: Path) -> None:
    _check(_grid(tmp_path, 40))


def test_every_draw_of_a_sampled_run_is_explained(tmp_path, pick_place_task):
    """At a temperature, K draws per arm: each further draw of an arm parts from the first only by
    sampled_choice (at the first divergent reply), and each draw's branches are explained against
    the same draw of their arm, as at one draw."""
    from cir.agents.factory import LLMConfig

    out = tmp_path / "sampled"
    run_experiment([pick_place_task], out, RunSettings(
        replay=ReplaySettings(conditions=("clean", "stale2"), delays=(0, 2), operations=("refresh", "placebo"),
                              samples=4), llm=LLMConfig(temperature=1.0)), progress=False, echo=lambda s: None)
    table = explain_run(out)
    assert (table["sample"] > 0).any() and table["explained"].all()
    draws = table[table["operation"] == "another_draw"]
    assert len(draws) == 2 * 2 * 3  # conditions x delays x further draws
    assert draws["diverged"].any()
    assert set(draws.loc[draws["diverged"], "mechanisms"]) == {"sampled_choice"}
    paired = pd.read_csv(out / "paired.csv")
    assert len(table) == len(paired) * 4 + len(draws)  # every draw's pair, and the draw pairs
    one = explain_run(_one_draw(tmp_path, pick_place_task))
    assert "sample" not in one.columns  # a run of one draw explains as before


def _one_draw(tmp_path: Path, task) -> Path:
    out = tmp_path / "one"
    run_experiment([task], out, RunSettings(replay=ReplaySettings(conditions=("clean",), delays=(0,),
                                                                  operations=("refresh",))),
                   progress=False, echo=lambda s: None)
    return out


def _t(replies: list[str], trace: list[tuple[int, str]] = (), harness_at: int | None = None,
       won: bool = False) -> Transcript:
    """A transcript of agent replies (one env action each), a harness step at ``harness_at``,
    and trace events (step index, mechanism) recorded by the decision of that step."""
    steps = []
    for i, r in enumerate(replies):
        if harness_at is not None and i == harness_at:
            steps.append(Step(HARNESS, "refresh", "look", "x", "[Refreshed observation] x", []))
        steps.append(Step("agent", r, r, "Nothing happens.", "Nothing happens.", [], won=won and i == len(replies) - 1))
    return Transcript("t", "task", steps, [TraceEvent(i, i, m) for i, m in trace])


MECHS = frozenset({"refresh_correction", "over_correct", "budget", "rewind"})


def test_a_divergence_is_attributed_to_what_fired_on_the_divergent_decision():
    arm = _t(["a", "b", "c", "d", "e"], won=True)
    # the branch point is step 2; the harness step at index 2, then the agent's replies
    fired_there = _t(["a", "b", "c", "x", "y"], [(4, "refresh_correction")], harness_at=2)
    ex = explain_pair("t", "stale2", 0, "refresh", arm, fired_there, 2, MECHS)
    assert (ex.divergence, ex.attribution, [e.mechanism for e in ex.decision]) == (4, "mechanism", ["refresh_correction"])
    # it fired on the decision before, whose reply happened to be the arm's: unattributed
    fired_before = _t(["a", "b", "c", "x", "y"], [(3, "refresh_correction")], harness_at=2)
    ex = explain_pair("t", "stale2", 0, "refresh", arm, fired_before, 2, MECHS)
    assert (ex.attribution, ex.explained, ex.decision) == ("unattributed", True, [])
    assert "unattributed" in format_pair(ex) and "earlier in the branch: refresh_correction" in format_pair(ex)
    # the same replies until the branch ran out of its budget (one turn short of the arm's win)
    budget = _t(["a", "b", "c", "d"], [(3, "refresh_correction")], harness_at=2)
    budget.trace.append(TraceEvent(len(budget.steps) - 1, len(budget.steps), "budget"))
    ex = explain_pair("t", "stale2", 0, "refresh", arm, budget, 2, MECHS)
    assert (ex.divergence, ex.attribution, ex.y0, ex.y1) == (len(budget.steps), "budget", 1, 0)
    # a rewind acts on the first decision after it (that decision reads the rewound context)
    rewound = _t(["a", "b", "x", "y", "z"], harness_at=2)
    rewound.trace.append(TraceEvent(2, 2, "rewind"))
    ex = explain_pair("t", "stale2", 0, "rewind", arm, rewound, 2, MECHS)
    assert (ex.divergence, ex.attribution) == (3, "mechanism")
    late = _t(["a", "b", "c", "d", "y"], harness_at=2)
    late.trace.append(TraceEvent(2, 2, "rewind"))
    assert explain_pair("t", "stale2", 0, "rewind", arm, late, 2, MECHS).attribution == "unattributed"


def test_tail_loop_counts_the_circles_an_episode_ends_in():
    assert tail_loop(_t(["a", "b", "a", "b", "a", "b"])) == 6
    assert tail_loop(_t(["c", "a", "a", "a", "a"])) == 4
    assert tail_loop(_t(["c", "d", "a", "b", "a"])) == 0  # three: not two rounds
    assert tail_loop(_t(["a", "b", "a", "b", "a", "b"]), start=3) == 0
    assert tail_loop(_t([])) == 0
