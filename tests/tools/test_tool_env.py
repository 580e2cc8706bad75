"""A tool world's env (cir.tools.env) as the core uses it: the ten lines of docs/own-environment.md
run as written, a refresh re-runs the suspect call, lagK answers the same call on the older state,
world events are silent and in the snapshot, and a tool's own bug is raised, never shown."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from support.shop import FAMILY, generate

from cir.episode.harness import Harness
from cir.episode.perturb import lagged_answer
from cir.episode.recovery import Checkpoints
from cir.tools import ToolEnv, ToolTask, ToolWorld, tool
from cir.util.errors import CirError

DOC = Path(__file__).resolve().parents[2] / "docs/own-environment.md"


def test_the_ten_lines_of_the_docs_run_as_written():
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## 0. Your tools and your state in ten lines"):text.index("## 1. The parts")]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    namespace: dict = {"__name__": "docs_shop"}
    exec(compile(code, str(DOC), "exec"), namespace)
    env = namespace["FAMILY"].make_env(ToolTask(
        "t1", "Cancel W0001.", "CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT);"
        "INSERT INTO orders VALUES ('W0001', 'pending');", data={"order": "W0001"}))
    assert env.reset() == "Cancel W0001."
    assert json.loads(env.step('get_order("W0001")')[0]) == {"id": "W0001", "status": "pending"}
    assert json.loads(env.step('get_order(order_id="W9")')[0]) == {"error": "no order W9"}
    env.step('cancel_order(order_id="W0001")')
    assert env.step('finish(answer="")') == ('{"finished": true}', True, True)


def _episode(task_index: int = 0):
    task = generate("train", 3, 0)[task_index]
    env = FAMILY.make_env(task)
    transcript, snapshots = Harness(FAMILY.builtin_agent()).episode_with_snapshots(env, task.task_id)
    return task, env, transcript, snapshots


def test_a_refresh_re_runs_the_suspect_call_or_the_worlds_read_after_a_change():
    task, env, transcript, snapshots = _episode()
    assert transcript.steps[0].action.startswith("get_order(")
    harness = Harness(FAMILY.builtin_agent())
    for index, want in ((0, transcript.steps[0].action), (1, 'get_order(order_id="W1000")')):
        prefix = transcript.prefix(index + 1)
        env.restore(snapshots[index + 1])
        step = harness.recover(env, prefix, "refresh", Checkpoints(anchor=index))
        assert step.action == want  # the read itself, or the world's read after cancel_order
        assert step.shown.startswith("[Refreshed observation] {")
    # without the suspect step (no anchor), the world's refresh query
    env.restore(snapshots[1])
    assert harness.recover(env, transcript.prefix(1), "refresh").action == "list_orders()"


def test_lag_shows_the_same_calls_answer_on_the_older_state():
    task, env, transcript, snapshots = _episode()
    # env action 3 reads the second order; one env action earlier the world had not yet moved
    at = 3
    lagged = lagged_answer(env, snapshots, transcript, at, 1)
    true = transcript.steps[transcript.steps_until_env_action(at) - 1].observation
    assert json.loads(lagged)["order_id"] == json.loads(true)["order_id"]
    assert env.snapshot().clock == at  # the env is back where it was


def test_a_tool_worlds_reads_are_its_read_only_calls_and_its_point_is_a_read():
    from cir.episode.perturb import find_point, parse_conditions, perturbation_point
    from cir.pairs.replay import run_task_pairs
    from cir.pairs.settings import ReplaySettings
    from cir.router.live import run_episode

    task, env, transcript, snapshots = _episode()
    assert env.reads('get_order(order_id="W1000")') and env.reads("list_orders()")
    assert not env.reads('cancel_order(order_id="W1000", reason="x")')
    assert not env.reads('finish(answer="")')  # it ends the episode: nothing a cache serves
    assert not env.reads("get_order(") and not env.reads('nope(x="1")')  # no call reads nothing
    actions = [s.action for s in transcript.steps if s.action is not None]
    conditions = parse_conditions("clean,stale1,lag1,missing")
    for at in range(1, len(actions) + 1):
        point = find_point(transcript, conditions, at=at, env=env)
        reads = [i for i in range(at, len(actions) + 1) if env.reads(actions[i - 1])]
        assert point.at == (reads[0] if reads and reads[0] > 1 else None)
    # the replayer and a live episode perturb the same read, where the protocol's point is a change
    moved = next(at for at in range(2, len(actions)) if not env.reads(actions[at - 1]))
    settings = ReplaySettings(conditions=("clean", "lag1"), delays=(0,), operations=("refresh",), perturb_at=moved)
    result = run_task_pairs(task, FAMILY.builtin_agent(), FAMILY.make_env(task), settings, extractor=FAMILY.extractor)
    assert result.point > moved and env.reads(actions[result.point - 1])
    assert result.point == perturbation_point(len(actions), at=moved) + 1
    _, episode, info = run_episode(task.task_id, FAMILY.builtin_agent(), FAMILY.make_env(task), "lag1",
                                   perturb_at=moved)
    assert info["point"] == result.point
    perturbed = [s for s in episode.steps if "perturb:lag1" in s.events]
    assert len(perturbed) == 1 and env.reads(perturbed[0].action)


def test_world_events_are_silent_and_part_of_the_snapshot():
    task = generate("train", 1, 0)[0]
    env = FAMILY.make_env(task)
    env.reset()
    shown, _, _ = env.step("list_orders()")
    env.step("list_orders()")  # the other order ships after env action 2
    assert all("shipped" not in json.dumps(o) for o in json.loads(shown) if o["order_id"] == "W1004")
    after = json.loads(env.step("list_orders()")[0])
    assert {o["order_id"]: o["status"] for o in after}["W1004"] == "shipped"
    assert env.snapshot().clock == 3


def test_a_tools_own_bug_is_raised_with_its_cause_and_a_read_only_tool_may_not_write():
    @tool(read_only=True)
    def broken(db: sqlite3.Connection, n: int) -> int:
        """Divide."""
        return 1 // n

    @tool(read_only=True)
    def sneaky(db: sqlite3.Connection) -> int:
        """Reads, but writes."""
        db.execute("INSERT INTO t VALUES (1)")
        return 0

    world = ToolWorld("bugs", tools=[broken, sneaky], state="sqlite", check=lambda db, task, answer: True,
                      refresh_query="sneaky()")
    env = world.make_env(ToolTask("t", "x", "CREATE TABLE t (a);"))
    env.reset()
    with pytest.raises(CirError, match=r"task t: tool broken raised ZeroDivisionError: .*call 'broken\(n=0\)'") as err:
        env.step("broken(n=0)")
    assert isinstance(err.value.__cause__, ZeroDivisionError)
    with pytest.raises(CirError, match="tool sneaky is marked read_only but changed the state"):
        env.step("sneaky()")


def test_the_prompt_lists_the_tools_parses_replies_and_carries_the_schemas():
    prompt = FAMILY.prompt
    assert "- get_order(order_id: str): Look up one order by its id." in prompt.instructions
    assert [t["function"]["name"] for t in prompt.tools] == ["list_orders", "get_order", "cancel_order", "finish"]
    for reply in ('> get_order(order_id="W1")', "Action: get_order('W1')", '```\nget_order("W1")\n```',
                  '{"name": "get_order", "arguments": {"order_id": "W1"}}'):
        parsed = prompt.parse(reply)
        assert parsed.ok and parsed.action == 'get_order(order_id="W1")', reply
    assert prompt.parse("think: which order first?").action.startswith("think:")
    assert not prompt.parse("cancel everything").ok


def test_a_worlds_family_says_which_shown_results_are_anomalous():
    task, env, transcript, snapshots = _episode()
    at = 3
    step = transcript.steps[transcript.steps_until_env_action(at) - 1]
    lagged = lagged_answer(env, snapshots, transcript, at, 1)
    # the generic rule: an older answer of the same call looks right; an error, another order or
    # no JSON at all is anomalous
    assert not FAMILY.anomalous(step.action, lagged)
    assert FAMILY.anomalous(step.action, '{"error": "no order W9"}')
    other = dict(json.loads(lagged), order_id="W9999")
    assert FAMILY.anomalous(step.action, json.dumps(other))
    assert FAMILY.anomalous(step.action, "Nothing happens.")
    # a world's own rule replaces the generic one
    seen = []
    world = ToolWorld("strict", tools=[get_item], state="object", check=lambda h, t, a: True,
                      refresh_query='get_item(key="a")', anomalous=lambda a, s: seen.append((a, s)) or True)
    assert world.parts()["anomalous"]('get_item(key="a")', "{}") is True
    assert seen == [('get_item(key="a")', "{}")]


@tool(read_only=True)
def get_item(state: dict, key: str) -> dict:
    """An item of the object state."""
    return {"key": key, "value": state.get(key)}


@tool(read_only=False)
def stamp(state: dict, key: str) -> dict:
    """Set an item to the world's time, which on_clock keeps in the state."""
    state[key] = state["now"]
    return {"key": key, "value": state[key]}


def _tell(state: dict, clock: int) -> None:
    state["now"] = clock


class _LoggingEnv(ToolEnv):
    """A family's own env: it keeps the calls it was sent."""

    def step(self, action: str):
        self.sent = [*getattr(self, "sent", []), action]
        return super().step(action)


def _clock_world(**options):
    return ToolWorld("clocked", tools=[get_item, stamp], state="object", check=lambda h, t, a: True,
                     **{"on_clock": _tell, **options})


def test_tools_read_the_world_clock_from_the_state_and_a_restore_brings_the_time_back():
    world = _clock_world(refresh_query='get_item(key="a")')
    env = world.make_env(ToolTask("t", "stamp a", {"now": None}))
    env.reset()
    env.step('get_item(key="a")')
    assert json.loads(env.step('stamp(key="a")')[0]) == {"key": "a", "value": 1}  # the 2nd env action: clock 1
    at_two = env.snapshot()
    env.step('get_item(key="b")')
    assert json.loads(env.step('stamp(key="a")')[0])["value"] == 3
    env.restore(at_two)
    assert json.loads(env.step('get_item(key="a")')[0])["value"] == 1  # the time of then, with the rest
    # a hook that fails is named with the task and the clock
    broken = _clock_world(refresh_query='get_item(key="a")', on_clock=lambda s, c: 1 / 0).make_env(
        ToolTask("t9", "x", {}))
    broken.reset()
    with pytest.raises(CirError, match=r"task t9: the world's on_clock raised ZeroDivisionError.*clock 0"):
        broken.step('get_item(key="a")')
    with pytest.raises(CirError, match="on_clock must be a function"):
        _clock_world(on_clock="now")


def test_a_refresh_query_per_task_and_a_familys_own_env_class():
    world = _clock_world(refresh_query=lambda task: f'get_item(key={json.dumps(task.data["key"])})',
                         env_class=_LoggingEnv)
    env = world.make_env(ToolTask("t", "read b", {"b": 2}, data={"key": "b"}))
    assert isinstance(env, _LoggingEnv) and env.refresh_query == 'get_item(key="b")'
    env.reset()
    env.step('get_item(key="b")')
    assert env.sent == ['get_item(key="b")']
    with pytest.raises(CirError, match=r"task t2: tool world 'clocked': refresh_query 'nope\(\)'"):
        _clock_world(refresh_query=lambda task: "nope()").make_env(ToolTask("t2", "x", {}))
    with pytest.raises(CirError, match=r"task t3: tool world 'clocked': refresh_query gave None"):
        _clock_world(refresh_query=lambda task: None).make_env(ToolTask("t3", "x", {}))
    with pytest.raises(CirError, match="env_class must be cir.tools.ToolEnv or a subclass"):
        _clock_world(env_class=dict)
