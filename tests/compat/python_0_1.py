# cir 0.1 compatibility: Python code as 0.1's documents told users to write it, each function citing
# its source (at commit 5c46ee4^ unless it says otherwise). Nothing here may be modernised: it is the
# user's code that cir must keep running. tests/compat/test_compat.py runs each beside its
# new-style twin and checks the tables are the same and each former name warned once.
"""User code of cir 0.1 (the former names on purpose)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from cir import (
    REFRESH_PREFIX,
    CIRPolicy,
    Harness,
    ReplaySettings,
    Router,
    Transcript,
    contrast_table,
    effect_table,
    evaluate,
    run_task_pairs,
    validate_paired,
)
from cir.stats import select_cohort


def guide_study(family: Any, train_tasks: list[Any], test_tasks: list[Any]) -> dict[str, Any]:
    """docs/own-environment.md, "5. The same from Python", with the agent of a 0.1 family
    (``family.builtin_agent()`` defines ``settings()``)."""
    settings = ReplaySettings(conditions=("clean", "stale1", "missing"), delays=(0, 1, 2),
                              operations=("refresh",), perturb_fraction=0.5)

    def table(tasks: list[Any]) -> pd.DataFrame:
        rows = []
        for task in tasks:
            rows += run_task_pairs(task, family.builtin_agent(), family.make_env(task), settings,
                                   extractor=family.extractor).rows
        return validate_paired(pd.DataFrame(rows))

    paired, test_paired = table(train_tasks), table(test_tasks)
    effects = effect_table(paired, by=["operation", "condition", "delay"], resamples=200, seed=0)
    policy = CIRPolicy(extractor=family.extractor, delays=(1, 2), grid_size=11).fit(paired)  # cir fit --grid-size
    router = policy.to_router(family="keydoor:FAMILY")
    result = evaluate(router, test_paired, resamples=200, seed=0)
    return {"paired": paired, "test_paired": test_paired, "effects": effects, "router": router,
            "summary": result["summary"], "searched": policy.grid_, "d_min": router.settings["d_min"]}


def notebook_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """README, "In a notebook", and experiments/analysis.ipynb: the factual-success cohort."""
    return {"effects": effect_table(df, by=["condition", "delay"], cohort="factual-success", resamples=200, seed=0),
            "contrast": contrast_table(df, "stale1", "clean", by=["delay"], cohort="factual-success",
                                       resamples=200, seed=0),
            "rows": select_cohort(df, "factual-success")}


def play_on(agent: Any, env: Any, task_id: str, until: int) -> tuple[Transcript, Transcript]:
    """cir/episode/harness.py's docstring: "Harness.run continues an existing transcript on an env
    that is in the matching state, and can stop when the transcript reaches a given number of env
    actions" (a branch by hand: stop, snapshot, continue)."""
    harness = Harness(agent)
    transcript = harness.reset(env, task_id)
    harness.run(env, transcript, until_env_actions=until)
    prefix = Transcript(task_id=transcript.task_id, task_text=transcript.task_text, steps=list(transcript.steps))
    return prefix, harness.run(env, transcript)


def chat_harness(router: Router, env: Any, task_id: str, agent: Any, suspect_move: int) -> list[dict[str, Any]]:
    """The guide's "In your own harness" as of commit 05f7bdf (the router's Decision said
    ``refresh``): a chat-style harness that keeps a message list and asks the router after each
    move that follows a suspect observation."""
    messages = [{"role": "user", "content": env.reset()}]
    log = []
    for move in range(12):
        reply = agent.act(messages)
        messages.append({"role": "assistant", "content": reply})
        answer, done, won = env.step(reply)
        messages.append({"role": "user", "content": answer})
        if done:
            break
        if move >= suspect_move:
            transcript = Transcript.from_messages(task_id, messages, refresh_query=env.refresh_query)
            decision = router.decide(transcript, delay=move - suspect_move)
            log.append({"move": move, "delay": decision.delay, "refresh": decision.refresh,
                        "p_err": round(decision.p_err, 6), "blocked_by": decision.blocked_by})
            if decision.refresh:
                answer, done, won = env.step(env.refresh_query)
                messages.append({"role": "user", "content": f"{REFRESH_PREFIX} {answer}"})
    return log
