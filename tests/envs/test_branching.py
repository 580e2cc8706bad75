"""Cursors of one branching env (cir.envs.branching): each its own state, one memo, the real
env used by one thread at a time, each transition computed once."""

from __future__ import annotations

import threading

from support.replay import fake_tasks, make_fake_env

from cir.envs.branching import BranchingEnv
from cir.envs.counting import CountingEnv


class Guarded:
    """A fake env that fails if two threads use it at once."""

    def __init__(self, env) -> None:
        self.env, self.busy, self.overlaps = env, threading.Lock(), 0

    def __getattr__(self, name):
        method = getattr(self.env, name)

        def call(*args):
            if not self.busy.acquire(blocking=False):
                self.overlaps += 1
                self.busy.acquire()
            try:
                return method(*args)
            finally:
                self.busy.release()
        return call


def test_cursors_keep_their_own_state_over_one_memo():
    env = BranchingEnv(make_fake_env(fake_tasks(1)[0]))
    env.reset()
    env.step("go to drawer 1")
    fork = env.cursor()
    assert fork.snapshot() == env.snapshot() and fork.stats is env.stats
    env.step("go to shelf 1")
    fork.step("go to desk 1")
    assert env.snapshot() == ("go to drawer 1", "go to shelf 1")
    assert fork.snapshot() == ("go to drawer 1", "go to desk 1")
    steps = env.stats["env_steps"]
    again = env.cursor()
    again.restore(("go to drawer 1",))
    again.step("go to desk 1")  # the other cursor's transition: from the memo
    assert env.stats["env_steps"] == steps and env.stats["env_memo_hits"] == 1


def test_cursors_in_threads_do_each_transition_once_and_never_overlap_in_the_env():
    task = fake_tasks(1)[0]
    real = Guarded(make_fake_env(task))
    counted = CountingEnv(BranchingEnv(real))
    counted.reset()
    walks = [["go to drawer 1", "go to shelf 1", "look"], ["go to drawer 1", "go to desk 1"],
             ["go to shelf 1", "look", "go to drawer 1"]] * 4
    results: dict[int, list] = {}

    def walk(i, actions):
        cursor = counted.cursor()
        cursor.restore(())
        results[i] = [cursor.step(a) for a in actions]

    threads = [threading.Thread(target=walk, args=(i, w)) for i, w in enumerate(walks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    distinct = {tuple(w[:n]) for w in walks for n in range(1, len(w) + 1)}
    stats = counted.env.stats
    assert stats["env_steps"] == len(distinct) and real.overlaps == 0
    assert counted.counts.steps == sum(len(w) for w in walks)
    assert results[0] == results[3] == results[6] == results[9]
