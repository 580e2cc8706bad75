"""The ALFWorld engine from several threads of one process (cir.families.alfworld.engine's
locks): games load and step from 8 threads at once with the texts of one thread, a run with
``--backend threading`` gives the table of one process, and the branches of a task run at
once on the real engine (built-in agent and LLM agent) with the sequential results."""

from __future__ import annotations

import json
import sys
import threading

import pytest
from support.fake_openai import FakeOpenAI, alfworld_answer

from cir.families import make_agent
from cir.families.alfworld.env import AlfworldEnv
from cir.families.alfworld.generate import generate_split
from cir.families.alfworld.tasks import load_tasks
from cir.pairs.replay import ReplaySettings, run_task_pairs
from cir.pairs.run import run_experiment
from cir.pairs.settings import RunSettings

pytest.importorskip("alfworld")

WALK = ["look", "inventory", "go to drawer 1", "open drawer 1", "go to countertop 1", "examine countertop 1"]
SETTINGS = ReplaySettings(conditions=("clean", "stale2"), delays=(0, 2), operations=("refresh", "replan"))


@pytest.fixture(scope="module")
def eight(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("eight")
    generate_split(root, "valid_unseen", 8, 5, progress=False)
    return load_tasks(root / "valid_unseen")


def walk(task, repeats: int = 2) -> list:
    out = []
    for _ in range(repeats):
        with AlfworldEnv(task.game_file) as env:
            out.append([env.reset(), *[env.step(a) for a in WALK], env.admissible_commands()])
    return out


def test_games_load_and_step_from_eight_threads_with_the_texts_of_one(eight):
    alone = {t.task_id: walk(t, 1) * 2 for t in eight}  # each repeat gives the same texts
    argv = list(sys.argv)
    seen, errors = {}, []

    def work(task):
        try:
            seen[task.task_id] = walk(task)
        except Exception as exc:  # noqa: BLE001 - collected and shown below
            errors.append(f"{task.task_id}: {exc!r}")

    threads = [threading.Thread(target=work, args=(t,)) for t in eight]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []  # before the engine's locks: "IndexError: pop from empty list"
    assert seen == alone
    assert sys.argv == argv  # the translator's sys.argv swaps are put back


def test_a_run_with_the_threading_backend_gives_the_table_of_one_process(eight, tmp_path):
    tasks = eight[:4]
    kw = dict(tasks_source="eight", progress=False, echo=lambda s: None)
    run_experiment(tasks, tmp_path / "one", RunSettings(replay=SETTINGS, jobs=1), **kw)
    run_experiment(tasks, tmp_path / "threads", RunSettings(replay=SETTINGS, jobs=4, backend="threading"), **kw)
    assert (tmp_path / "threads" / "paired.csv").read_bytes() == (tmp_path / "one" / "paired.csv").read_bytes()


def _same(result):
    costs = {k: v for k, v in result.costs.items() if k != "env_restores"}
    return json.dumps([result.rows, [e.to_dict() for e in result.episodes], costs], sort_keys=True)


def test_branches_at_once_on_the_real_engine_give_the_sequential_results(eight):
    for task in eight[:2]:
        results = []
        for concurrency in (1, 6):
            with AlfworldEnv(task.game_file) as env:
                results.append(run_task_pairs(task, make_agent("builtin"), env, SETTINGS,
                                              concurrency=concurrency))
        assert _same(results[1]) == _same(results[0])


def test_llm_branches_at_once_on_the_real_engine_give_the_sequential_results(eight):
    settings = ReplaySettings(conditions=("clean", "stale2"), delays=(0, 1, 2), operations=("refresh", "replan"),
                              max_turns=10, max_actions=10)
    task = eight[2]
    results, requests = [], []
    for concurrency in (1, 6):
        with FakeOpenAI(answer=alfworld_answer, latency=0.005) as server, \
                AlfworldEnv(task.game_file) as env:
            agent = make_agent("openai-completion:fake", base_url=server.base_url)
            results.append(run_task_pairs(task, agent, env, settings, concurrency=concurrency))
            requests.append(server.stats())
    assert _same(results[1]) == _same(results[0])
    assert requests[1]["requests"] == requests[0]["requests"] == results[0].costs["agent_calls"]
    assert requests[0]["peak_in_flight"] == 1 < requests[1]["peak_in_flight"]
