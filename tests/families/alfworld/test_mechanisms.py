"""Every named mechanism of the built-in agent, forced on real generated ALFWorld tasks.

The agent here starts from a *quiet* profile (every chance 0: a careful searcher that
never slips) and one mechanism is turned on, so what changes is that mechanism's doing;
turned off (0) it never fires. Episodes run on the real engine through the project's
harness, perturbations and recovery operations.
"""

from __future__ import annotations

import pytest

from cir.episode.harness import Harness, SnapshotHook
from cir.episode.perturb import Perturbation, parse_condition
from cir.episode.recovery import Checkpoints
from cir.episode.transcript import AGENT, Transcript
from cir.families.alfworld.agent.builtin import PARAMETERS, PROFILES, BuiltinAgent
from cir.families.alfworld.agent.mechanisms import MECHANISMS

#: every chance 0; how strongly each kind of message invites reconsidering stays as in the
#: default profile (a weight, not a chance: at 0 no message would be reacted to at all)
QUIET = {**dict.fromkeys(PARAMETERS, 0.0), **{k: v for k, v in PROFILES["default"].items() if k.startswith("invite_")}}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory):
    """One generated task per ALFWorld task type (valid_unseen, seed 0), by type."""
    from cir.families.alfworld.generate import generate_split
    from cir.families.alfworld.tasks import load_tasks

    root = tmp_path_factory.mktemp("mech-tasks")
    generate_split(root, "valid_unseen", 6, 0, progress=False)
    return {t.task_type: t for t in load_tasks(root / "valid_unseen")}


@pytest.fixture(scope="module")
def envs(tasks):
    from cir.families.alfworld.env import AlfworldEnv

    return {k: AlfworldEnv(t.game_file) for k, t in tasks.items()}


def agent(**on: float) -> BuiltinAgent:
    return BuiltinAgent("default", overrides={**QUIET, **on})


def episode(env, a: BuiltinAgent, *, condition: str | None = None, at: int | None = None,
            recover: str | None = None, recover_at: int | None = None, max_actions: int = 64) -> Transcript:
    """One episode from reset: a perturbation of env action ``at``, a recovery after env
    action ``recover_at``."""
    h = Harness(a, max_actions=max_actions)
    t = h.reset(env, "task")
    pert = Perturbation(parse_condition(condition), at) if condition else None
    if recover is not None:
        snaps = SnapshotHook()
        snaps.snapshots[0] = env.snapshot()
        h.play(env, t, until_env_actions=recover_at, perturbation=pert, hooks=[snaps])
        # a rewind returns to the state before the perturbed (or, clean, the given) action
        anchor = t.steps_until_env_action(at) - 1 if at else None
        h.recover(env, t, recover, Checkpoints(snaps.snapshots, anchor))
    return h.play(env, t, perturbation=pert)


def replies(t: Transcript, start: int = 0) -> list[str]:
    return [s.reply for s in t.steps[start:] if s.actor == AGENT]


def fired(t: Transcript, name: str) -> list[int]:
    return [e.step for e in t.trace if e.mechanism == name]


def index_of(t: Transcript, verb: str, nth: int = 1) -> int:
    """1-based env action number of the nth command starting with ``verb``."""
    n = seen = 0
    for s in t.steps:
        if s.action is not None:
            n += 1
            if s.action.startswith(verb):
                seen += 1
                if seen == nth:
                    return n
    raise AssertionError(f"no {verb!r} number {nth} in the episode")


def step_of(t: Transcript, env_action: int) -> int:
    return t.steps_until_env_action(env_action) - 1


SIMPLE = "pick_and_place_simple"


def test_the_quiet_agent_solves_every_task_type(tasks, envs):
    for kind, env in envs.items():
        t = episode(env, agent())
        assert t.won, kind
        assert {e.mechanism for e in t.trace} <= {"budget"}, kind


def test_hidden_pickup_then_self_check_harness_recheck_or_rewind(envs):
    env = envs[SIMPLE]
    factual = episode(env, agent())
    take = index_of(factual, "take")
    # a take answered by an older text: the agent never learns it holds the object
    lost = episode(env, agent(hidden_pickup=1.0), condition="stale2", at=take)
    assert fired(lost, "hidden_pickup") == [step_of(lost, take)]
    assert not lost.won and "inventory" not in replies(lost)
    # its own check (chance grows with consecutive failures) finds the object in its hands
    checked = episode(env, agent(hidden_pickup=1.0, self_check=1.0), condition="stale2", at=take)
    if fired(checked, "self_check"):
        assert checked.won and "inventory" in replies(checked)
    # a harness message makes it re-check the doubted take: rescued without new content
    # (replan invites reconsidering most: chance harness_recheck x 1.0)
    rescued = episode(env, agent(hidden_pickup=1.0, harness_recheck=1.0), condition="stale2", at=take,
                      recover="replan", recover_at=take)
    assert fired(rescued, "harness_recheck") and rescued.won
    assert replies(rescued, step_of(rescued, take) + 2)[0] == "inventory"
    # a look refresh shows no hands; without the re-check it cannot repair this
    refreshed = episode(env, agent(hidden_pickup=1.0), condition="stale2", at=take,
                        recover="refresh", recover_at=take)
    assert not refreshed.won
    # a rewind redoes the take and sees the true text
    rewound = episode(env, agent(hidden_pickup=1.0), condition="stale2", at=take,
                      recover="rewind", recover_at=take + 1)
    assert fired(rewound, "rewind") and rewound.won


def test_rewind_discards_progress_and_redoes_it(envs):
    env = envs[SIMPLE]
    factual = episode(env, agent())
    take = index_of(factual, "take")
    rewound = episode(env, agent(), condition="clean", at=take, recover="rewind", recover_at=take + 1)
    assert rewound.won and fired(rewound, "rewind")
    # the redone actions are spent again: more env actions than the factual run
    assert rewound.env_actions > factual.env_actions


def test_stale_location_counts_the_place_searched_until_contradicted(envs):
    env = envs[SIMPLE]
    factual = episode(env, agent())
    goes = [n for n in range(3, factual.env_actions + 1)
            if factual.steps[step_of(factual, n)].action.startswith("go to")]
    assert goes, "the factual run has a go-to after two env actions"
    at = goes[-1]  # the go-to that found the object (or carried it)
    on = episode(env, agent(stale_location=1.0), condition="stale2", at=at)
    off = episode(env, agent(stale_location=0.0), condition="stale2", at=at)
    k = step_of(on, at)
    assert fired(on, "stale_location") == [k] and not fired(off, "stale_location")
    assert replies(off, k + 1)[0] == "look"  # noticed: checks where it is
    assert replies(on, k + 1) != replies(off, k + 1)
    # a refresh right away contradicts the wrong location
    corrected = episode(env, agent(stale_location=1.0, refresh_correction=1.0), condition="stale2", at=at,
                        recover="refresh", recover_at=at)
    assert fired(corrected, "refresh_correction") == [k + 1]


def test_missing_text_is_taken_as_success(envs):
    env = envs[SIMPLE]
    factual = episode(env, agent())
    at = index_of(factual, "go to")
    on = episode(env, agent(missing_text=1.0), condition="missing", at=at)
    off = episode(env, agent(missing_text=0.0), condition="missing", at=at)
    k = step_of(on, at)
    assert fired(on, "missing_text") == [k] and not fired(off, "missing_text")
    target = factual.steps[k].action.removeprefix("go to ")
    # off: it checks the place at once; on: it moves on as if it had looked inside
    assert replies(off, k + 1)[0] in (f"go to {target}", f"examine {target}")
    assert replies(on, k + 1)[0] not in (f"examine {target}", f"open {target}")


def test_lost_track_goes_round_until_it_notices_or_a_harness_message_breaks_it(envs):
    env = envs[SIMPLE]
    factual = episode(env, agent())
    goes = [n for n in range(3, factual.env_actions + 1)
            if factual.steps[step_of(factual, n)].action.startswith("go to")]
    at = goes[-1]
    k = step_of(factual, at)
    before, now = replies(factual)[k - 1], replies(factual)[k]
    base = {"stale_location": 1.0}
    off = episode(env, agent(**base, lost_track=0.0), condition="stale2", at=at)
    lost = episode(env, agent(**base, lost_track=1.0), condition="stale2", at=at)
    assert fired(lost, "lost_track") == [k] and not fired(off, "lost_track")
    assert off.won
    # it goes round its last two commands, whatever it is shown, until the budget ends
    cycle = replies(lost, k + 1)
    assert cycle[:6] == [before, now] * 3 and set(cycle) == {before, now}
    assert not lost.won and fired(lost, "budget")
    # noticing the loop returns it to its plan at once
    noticed = episode(env, agent(**base, lost_track=1.0, notice_loop=1.0), condition="stale2", at=at)
    assert fired(noticed, "notice_loop") == [k + 1] and noticed.won
    # a harness message makes it reconsider: re-check the doubted step (delay 0) or, the
    # doubt settled by the cycle's own true texts, back to the plan (later)
    for recover_at in (at, at + 2):
        rescued = episode(env, agent(**base, lost_track=1.0, harness_recheck=1.0), condition="stale2", at=at,
                          recover="placebo", recover_at=recover_at)
        assert fired(rescued, "harness_recheck") and rescued.won, recover_at
    # a missing text can lose it too
    missing = episode(env, agent(missing_text=1.0, lost_track=1.0), condition="missing", at=at)
    assert fired(missing, "lost_track") == [k] and replies(missing, k + 1)[:2] == [before, now]


def test_hidden_placement_believes_it_still_holds_the_object(envs):
    env = envs["pick_two_obj_and_place"]
    factual = episode(env, agent())
    move = index_of(factual, "move")
    on = episode(env, agent(hidden_placement=1.0), condition="stale2", at=move)
    off = episode(env, agent(hidden_placement=0.0), condition="stale2", at=move)
    k = step_of(on, move)
    assert fired(on, "hidden_placement") == [k] and not fired(off, "hidden_placement")
    assert replies(off, k + 1)[0] == "inventory"
    held = factual.steps[k].action.split()[1:3]
    moves = [r for r in replies(on, k + 1) if r.startswith(("move ", "put ", "inventory"))]
    assert moves[0].split()[1:3] == held  # it tries to place the same object again


def test_interruption_redoes_or_drops_the_subgoal_in_progress(envs):
    env = envs["pick_heat_then_place_in_recep"]
    factual = episode(env, agent())
    take = index_of(factual, "take")  # holding the object: transform pending
    same = episode(env, agent(interruption=0.0), recover="replan", recover_at=take)
    assert replies(same) == replies(factual) and same.won
    hit = episode(env, agent(interruption=1.0), recover="replan", recover_at=take)
    k = step_of(hit, take) + 1
    assert fired(hit, "interruption") == [k + 1]
    assert replies(hit) != replies(factual)
    assert hit.env_actions > factual.env_actions  # the detour costs env actions


def test_misread_refresh_forgets_what_it_saw_there(envs):
    env = envs[SIMPLE]
    factual = episode(env, agent())
    take = index_of(factual, "take")
    before = take - 1  # at the place, the object seen, not yet taken
    kept = episode(env, agent(misread_refresh=0.0), recover="refresh", recover_at=before)
    misread = episode(env, agent(misread_refresh=1.0), recover="refresh", recover_at=before)
    k = step_of(misread, before) + 1
    assert fired(misread, "misread_refresh") == [k] and not fired(kept, "misread_refresh")
    assert replies(kept) == replies(factual)
    assert not replies(misread, k + 1)[0].startswith("take")


def after(t: Transcript, verb: str, nth: int = 1) -> int:
    """1-based env action number of the nth command starting with ``verb`` (a decision point)."""
    return index_of(t, verb, nth)


@pytest.mark.parametrize(("kind", "verb", "nth", "first_two"), [
    # a pickup: puts it back and takes it again
    (SIMPLE, "take", 1, ["move soapbottle 1 to drawer 1", "take soapbottle 1 from drawer 1"]),
    # an open: closes it and opens it again
    (SIMPLE, "open cabinet 1", 1, ["close cabinet 1", "open cabinet 1"]),
    # a search that found nothing wanted: back to the place before and here again
    (SIMPLE, "go to countertop 1", 1, ["go to cabinet 3", "go to countertop 1"]),
    # a transform: does it again
    ("pick_heat_then_place_in_recep", "heat", 1, ["heat apple 1 with microwave 1"] * 2),
    # a placement that did not finish the task: takes it back out and puts it in again
    ("pick_two_obj_and_place", "move", 1, ["take creditcard 2 from sofa 1", "move creditcard 2 to sofa 1"]),
])
def test_over_correct_undoes_and_redoes_a_right_step_round_and_round(envs, kind, verb, nth, first_two):
    env = envs[kind]
    factual = episode(env, agent())
    at = after(factual, verb, nth)
    k = step_of(factual, at) + 1  # the harness step
    # off: a replan changes nothing (no other mechanism is on)
    same = episode(env, agent(over_correct=0.0), recover="replan", recover_at=at)
    assert replies(same) == replies(factual) and same.won
    # on: it doubts the step the text answered, undoes and redoes it until the budget ends
    hit = episode(env, agent(over_correct=1.0), recover="replan", recover_at=at)
    assert fired(hit, "over_correct") == [k]
    assert replies(hit, k + 1)[:2] == first_two
    assert set(replies(hit, k + 1)) == set(first_two) and not hit.won and fired(hit, "budget")
    # noticing the loop returns it to its plan
    noticed = episode(env, agent(over_correct=1.0, notice_loop=1.0), recover="replan", recover_at=at)
    assert fired(noticed, "notice_loop") == [k + 1] and noticed.won


def test_over_correct_scales_with_the_invitation_and_waits_for_doubts(envs):
    env = envs[SIMPLE]
    factual = episode(env, agent())
    take = index_of(factual, "take")
    # a content-free message invites reconsidering at invite_message (0.4): forced at 1.0,
    # silenced at 0
    loud = episode(env, agent(over_correct=1.0, invite_message=1.0), recover="placebo", recover_at=take)
    assert fired(loud, "over_correct") and not loud.won
    mute = episode(env, agent(over_correct=1.0, invite_message=0.0), recover="placebo", recover_at=take)
    assert replies(mute) == replies(factual) and mute.won
    # a step in doubt (a take answered by an older text) is re-checked instead
    checked = episode(env, agent(over_correct=1.0, hidden_pickup=1.0, harness_recheck=1.0),
                      condition="stale2", at=take, recover="replan", recover_at=take)
    assert fired(checked, "harness_recheck") and not fired(checked, "over_correct") and checked.won


def test_distraction_takes_the_place_a_refreshed_text_names_for_the_target(envs):
    env = envs[SIMPLE]
    factual = episode(env, agent())
    take = index_of(factual, "take")  # holding the soapbottle at the drawer that held it
    k = step_of(factual, take) + 1
    hit = episode(env, agent(distraction=1.0), recover="refresh", recover_at=take)
    assert fired(hit, "distraction") == [k]
    # "You are facing the drawer 1": it puts the object there and believes the task done
    assert replies(hit, k + 1)[0] == "move soapbottle 1 to drawer 1" and not hit.won
    # the content-ablated twin queries the same env and shows nothing: no distraction
    twin = episode(env, agent(distraction=1.0), recover="refresh_ablated", recover_at=take)
    assert not fired(twin, "distraction") and twin.won
    assert replies(twin, k + 1) == replies(factual, k)
    off = episode(env, agent(distraction=0.0), recover="refresh", recover_at=take)
    assert not fired(off, "distraction") and off.won


def test_distraction_takes_a_look_alike_at_the_named_place_for_the_object(envs):
    env = envs[SIMPLE]  # the goal is a soapbottle; cabinet 3 holds a spraybottle
    factual = episode(env, agent())
    at = index_of(factual, "open cabinet 3")
    k = step_of(factual, at) + 1
    hit = episode(env, agent(distraction=1.0), recover="refresh", recover_at=at)
    assert fired(hit, "distraction") == [k]
    assert replies(hit, k + 1)[0] == "take spraybottle 2 from cabinet 3"
    assert "move spraybottle 2 to toilet 1" in replies(hit) and not hit.won
    twin = episode(env, agent(distraction=1.0), recover="refresh_ablated", recover_at=at)
    assert not fired(twin, "distraction") and twin.won


def test_distraction_searches_again_a_named_place_it_had_ruled_out(envs):
    env = envs[SIMPLE]
    factual = episode(env, agent())
    at = index_of(factual, "go to shelf 1")  # a cloth there: ruled out
    k = step_of(factual, at) + 1
    hit = episode(env, agent(distraction=1.0), recover="refresh", recover_at=at)
    assert fired(hit, "distraction") == [k]
    assert replies(hit, k + 1)[0] == "examine shelf 1" and hit.won
    assert hit.env_actions == factual.env_actions + 2  # the refresh's look and the second look inside


def test_stale_rollback_takes_a_two_step_old_text_back_to_empty_hands(envs):
    env = envs[SIMPLE]
    factual = episode(env, agent())
    at = index_of(factual, "take") + 1  # the go-to that carries the object; two texts back it was not taken
    k = step_of(factual, at)
    base = {"stale_location": 1.0}
    rolled = episode(env, agent(**base, stale_rollback=1.0), condition="stale2", at=at)
    assert fired(rolled, "stale_rollback") == [k]
    assert replies(rolled, k + 1)[0] == "take soapbottle 1 from drawer 1" and not rolled.won
    # off, it knows it holds the object; and a one-step-old text (the pickup itself) has
    # nothing older to take it back to
    assert episode(env, agent(**base, stale_rollback=0.0), condition="stale2", at=at).won
    one = episode(env, agent(**base, stale_rollback=1.0), condition="stale1", at=at)
    assert not fired(one, "stale_rollback") and one.won


def test_fatigue_raises_the_harness_reactions_late_in_an_episode():
    from cir.families.alfworld.agent.beliefs import FATIGUE_HORIZON, fatigue, initial_beliefs

    b = initial_beliefs("Your task is to: put a mug in desk.")
    p = {"fatigue": 1.0}
    assert fatigue(b, p) == 1.0
    b.clock = FATIGUE_HORIZON // 2
    assert fatigue(b, p) == 1.5
    b.clock = 3 * FATIGUE_HORIZON
    assert fatigue(b, p) == 2.0 and fatigue(b, {"fatigue": 0.0}) == 1.0


def test_budget_ends_a_branch_that_spent_more(envs):
    env = envs[SIMPLE]
    factual = episode(env, agent())
    n = factual.env_actions
    tight = episode(env, agent(), max_actions=n, recover="refresh", recover_at=n - 1)
    assert not tight.won and fired(tight, "budget") == [len(tight.steps) - 1]
    assert episode(env, agent(), max_actions=n).won


#: for each slip, what its reply looks like when it fires (None: it shows in beliefs later)
SIGNATURES = {
    "repeat": "same", "loop": "same", "think": "think:", "old_syntax": "put ", "close_after": "close ",
    "self_check": "inventory", "give_up": ("look", "go to "), "reground": None, "overlook": None,
    "forget_open": None, "forget_transform": None, "confuse": None,
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_every_slip_fires_when_on_and_never_when_off(name, envs):
    # failures to react to come from the old 'put' wording where the slip needs them; a
    # search that exhausts every place, from overlooking the object
    helper = {"old_syntax": 1.0} if name in ("loop", "reground", "self_check") else {}
    helper = {"overlook": 1.0} if name == "give_up" else helper
    on, off = [], []
    for env in envs.values():
        on.append(episode(env, agent(**{name: 1.0}, **helper), max_actions=40))
        off.append(episode(env, agent(**{name: 0.0}, **helper), max_actions=40))
    assert not any(fired(t, name) for t in off)
    hits = [(t, k) for t in on for k in fired(t, name)]
    assert hits, f"{name} never fired on six task types"
    sig = SIGNATURES[name]
    for t, k in hits:
        step = t.steps[k]
        if sig is None or step.actor != AGENT:
            continue
        if sig == "same":
            previous = [s.reply for s in t.steps[:k] if s.actor == AGENT and not s.reply.startswith("think")]
            assert step.reply == previous[-1], name
        else:
            assert step.reply.startswith(sig), (name, step.reply)


def test_every_mechanism_is_documented_with_a_role():
    assert {m.role for m in MECHANISMS.values()} <= {"slip", "self_correction", "error", "rescue", "harm",
                                                     "sampling", "harness"}
    for m in MECHANISMS.values():
        assert m.meaning and (m.parameter is None or m.parameter in PARAMETERS)
    # the harness decides these; sampled_choice is set by the agent's temperature, not by a profile
    assert {m.name for m in MECHANISMS.values() if m.parameter is None} == {"budget", "rewind", "sampled_choice"}


def test_the_agent_reads_only_what_it_is_shown(envs):
    """Neither the true observation, the events nor the done flags reach the agent."""
    env = envs[SIMPLE]
    factual = episode(env, agent(hidden_pickup=1.0), condition="stale2", at=3)
    a = BuiltinAgent("default")
    twisted = factual.prefix(len(factual.steps))
    for s in twisted.steps:
        s.observation = "You are carrying: a secret 1."
        s.events = ["perturb:clean"]
        s.done = s.won = False
    for n in range(1, len(factual.steps)):
        assert a.act(factual.prefix(n).context()) == a.act(twisted.prefix(n).context())


def test_every_mechanism_and_parameter_is_in_the_agent_guide():
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[3] / "docs/builtin-agent.md").read_text(encoding="utf-8")
    for name in MECHANISMS:
        assert f"| `{name}` |" in guide, name
    for param in PARAMETERS:
        assert f"`{param}`" in guide, param
