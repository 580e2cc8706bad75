"""A model-free ReAct-style agent for ALFWorld that errs like an LLM, deterministically.

``BuiltinAgent(profile, seed).act(context)`` rebuilds its beliefs from the context
(:mod:`cir.agents.beliefs`), picks the next subgoal of the parsed goal
(:mod:`cir.agents.goals`), searches unseen receptacles in order of a common-sense
prior (:mod:`cir.agents.priors`) and answers with one ALFWorld action or a
``think: ...`` thought. It believes what it is shown, so stale and missing
observations mislead it the way they mislead a language model.

Its mistakes are the ones LLM agents make: a poor search order, overlooking an item
in a long list, repeating an action, retrying what just failed, forgetting to open
a closed receptacle, forgetting the heat/cool/clean step, assuming a place was
searched, misreading ``You are facing the X. Next to it, you see nothing.`` as "X
is empty", giving up a search. Each slip is decided by a hash (hashlib) of the
agent's settings and of its context (the whole message list for per-turn slips; the
message that formed a belief for belief slips), never by a random state. Any change
to the context can change what follows, as with an LLM under greedy decoding, and
the same context always gives the same reply in any process.

``PROFILES`` holds named skill levels (``weak``, ``default``, ``strong``); the
numbers are slip probabilities, calibrated with ``benchmarks/agent_calibration.py``
(100 generated valid_unseen tasks: clean success weak 59%, default 86%, strong 96%;
default under stale2 75%, under missing 79%; default 20.4 env actions per clean episode
against a mean optimal plan of 6.4).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cir.agents.beliefs import Beliefs, otype, parse_action, read_context
from cir.agents.goals import LOOK, TWO, Goal
from cir.agents.priors import prior
from cir.errors import CirError

#: slip probabilities per skill profile (see module docstring and PARAMETERS)
PROFILES: dict[str, dict[str, float]] = {
    "weak": {
        "prior_noise": 3.0,
        "overlook": 0.25,
        "forget_open": 0.3,
        "repeat": 0.08,
        "think": 0.5,
        "loop": 0.55,
        "reground": 0.25,
        "notice_mismatch": 0.05,
        "mismatch_visited": 0.85,
        "gap_visited": 0.6,
        "gap_check": 0.1,
        "misread_refresh": 0.6,
        "give_up": 0.7,
        "forget_transform": 0.35,
        "close_after": 0.2,
        "harness_react": 0.2,
        "confuse": 0.35,
        "old_syntax": 0.3,
    },
    "default": {
        "prior_noise": 1.8,
        "overlook": 0.16,
        "forget_open": 0.12,
        "repeat": 0.04,
        "think": 0.45,
        "loop": 0.3,
        "reground": 0.45,
        "notice_mismatch": 0.15,
        "mismatch_visited": 0.7,
        "gap_visited": 0.4,
        "gap_check": 0.35,
        "misread_refresh": 0.2,
        "give_up": 0.5,
        "forget_transform": 0.15,
        "close_after": 0.15,
        "harness_react": 0.4,
        "confuse": 0.22,
        "old_syntax": 0.1,
    },
    "strong": {
        "prior_noise": 0.8,
        "overlook": 0.03,
        "forget_open": 0.03,
        "repeat": 0.01,
        "think": 0.35,
        "loop": 0.08,
        "reground": 0.75,
        "notice_mismatch": 0.4,
        "mismatch_visited": 0.4,
        "gap_visited": 0.15,
        "gap_check": 0.7,
        "misread_refresh": 0.15,
        "give_up": 0.1,
        "forget_transform": 0.04,
        "close_after": 0.1,
        "harness_react": 0.6,
        "confuse": 0.02,
        "old_syntax": 0.0,
    },
}

#: one line per profile parameter (for docs and ``cir episode --show``)
PARAMETERS: dict[str, str] = {
    "prior_noise": "noise on the common-sense search prior (higher: poorer search order)",
    "overlook": "chance to overlook a wanted item in a list of 3+ items (grows with length)",
    "forget_open": "chance to take a closed receptacle for checked on arrival (never opening it)",
    "repeat": "per-turn chance to repeat the previous action",
    "think": "chance to think aloud at a milestone (costs a model turn)",
    "loop": "chance to retry an action that just gave 'Nothing happens.'",
    "reground": "chance to re-ground (look, inventory, go again) after a failure",
    "notice_mismatch": "chance to notice that the arrival text names another place than the go-to",
    "mismatch_visited": "chance to count the intended place as searched after such a mismatch",
    "gap_visited": "chance to count a place as searched when its arrival text was unreadable",
    "gap_check": "chance to check (examine/inventory) after an unreadable observation",
    "misread_refresh": "chance to read 'You are facing X. Next to it, you see nothing.' as X empty",
    "give_up": "per-episode chance to stop searching systematically once all places are seen",
    "forget_transform": "per-episode chance to forget the heat/cool/clean step at first",
    "close_after": "chance to close a receptacle after finding nothing useful in it",
    "harness_react": "chance to re-ground with 'look' after a harness message it cannot read, and to re-open places only assumed searched after any harness message",
    "confuse": "per-episode chance to take a look-alike type for the goal's object or receptacle",
    "old_syntax": "chance to say 'put X in/on Y' (older ALFWorld) instead of 'move X to Y'",
}

#: types an agent may take for one another (reading fast, or from a vague goal)
LOOKALIKES: dict[str, tuple[str, ...]] = {
    "spraybottle": ("soapbottle",), "soapbottle": ("spraybottle", "soapbar"), "soapbar": ("soapbottle",),
    "pen": ("pencil",), "pencil": ("pen",), "knife": ("butterknife",), "butterknife": ("knife",),
    "cup": ("mug",), "mug": ("cup",), "saltshaker": ("peppershaker",), "peppershaker": ("saltshaker",),
    "plate": ("bowl",), "bowl": ("plate",), "pot": ("pan",), "pan": ("pot",), "spoon": ("ladle", "fork"),
    "fork": ("spoon",), "ladle": ("spoon",), "creditcard": ("cellphone", "keychain"),
    "cellphone": ("creditcard", "remotecontrol"), "keychain": ("creditcard",), "cd": ("creditcard",),
    "glassbottle": ("winebottle",), "winebottle": ("glassbottle",), "tomato": ("apple",),
    "apple": ("tomato",), "potato": ("apple",), "watch": ("alarmclock",), "alarmclock": ("watch",),
    "remotecontrol": ("cellphone",), "newspaper": ("book",), "book": ("newspaper",),
    "cloth": ("handtowel", "dishsponge"), "handtowel": ("cloth",), "dishsponge": ("cloth",),
    "toiletpaper": ("papertowel",), "vase": ("statue",), "statue": ("vase",),
    "drawer": ("dresser", "cabinet"), "dresser": ("drawer",), "sidetable": ("desk", "coffeetable"),
    "desk": ("sidetable",), "countertop": ("diningtable",), "diningtable": ("countertop",),
    "cabinet": ("shelf", "drawer"), "shelf": ("cabinet",), "sofa": ("armchair",), "armchair": ("sofa",),
    "coffeetable": ("sidetable", "diningtable"), "bathtubbasin": ("sinkbasin",),
    "sinkbasin": ("bathtubbasin",), "garbagecan": ("cart",), "cart": ("garbagecan",),
    "bed": ("sofa",), "toilet": ("garbagecan",),
}

_REGROUND_VERBS = ("go", "take", "open", "close", "move", "heat", "cool", "clean", "use", "examine")


class BuiltinAgent:
    """The model-free agent (see module docstring). Stateless: ``act`` reads only ``context``."""

    def __init__(self, profile: str = "default", seed: int = 0) -> None:
        if profile not in PROFILES:
            raise CirError(
                f"agent profile {profile!r}: unknown; expected one of {', '.join(sorted(PROFILES))}"
            )
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise CirError(f"agent seed {seed!r}: expected an integer")
        self.profile = profile
        self.seed = seed
        self.params = dict(PROFILES[profile])
        self.name = f"builtin:{profile}"
        self._key = json.dumps(self.settings(), sort_keys=True).encode()

    def settings(self) -> dict[str, Any]:
        """Profile name and parameters plus the seed: with the context they fix the reply."""
        return {"agent": "builtin", "profile": self.profile, "seed": self.seed, **self.params}

    def act(self, context: list[dict[str, str]]) -> str:
        """The next reply: one ALFWorld action or a ``think: ...`` thought."""
        if not context:
            return "look"
        h = hashlib.blake2b(self._key, digest_size=16)
        for msg in context:
            h.update(msg.get("role", "").encode())
            h.update(b"\x1f")
            h.update((msg.get("content") or "").encode())
            h.update(b"\x1e")
        digest = h.digest()
        task_key = hashlib.blake2b(
            self._key + (context[0].get("content") or "").encode(), digest_size=16
        ).digest()
        p = self.params

        def belief_slip(name: str, key: str) -> bool:
            prob = p.get(name, 0.0)
            if name == "overlook":
                n = int(key.rsplit("|", 1)[1])
                prob = min(0.9, prob * n / 4.0)
            return _unit(task_key, name + "|" + key) < prob

        beliefs = read_context(context, belief_slip)
        return _Decider(beliefs, p, digest, task_key).decide()


def _unit(digest: bytes, salt: str) -> float:
    """A number in [0, 1) fixed by ``digest`` and ``salt``."""
    d = hashlib.blake2b(digest + salt.encode(), digest_size=8).digest()
    return int.from_bytes(d, "big") / 2**64


class _Decider:
    """One decision from the beliefs; slips drawn from the context digest."""

    def __init__(self, b: Beliefs, p: dict[str, float], digest: bytes, task_key: bytes) -> None:
        self.b = b
        self.p = p
        self.digest = digest
        self.task_key = task_key
        self.goal: Goal | None = b.goal
        # the types I accept as the goal's object and receptacle (a look-alike when confused)
        self.objs: tuple[str, ...] = ()
        self.receps: tuple[str, ...] = ()
        g = self.goal
        if g is not None:
            self.objs = (g.obj,)
            self.receps = (g.recep,) if g.recep else ()
            if _unit(task_key, "confuse") < p["confuse"]:
                present = {otype(r) for r in b.receptacles}
                alt_r = [t for t in LOOKALIKES.get(g.recep or "", ()) if t in present]
                if alt_r and _unit(task_key, "confuse_what") < 0.5:
                    self.receps = (alt_r[0], g.recep or alt_r[0])
                elif g.obj in LOOKALIKES:
                    self.objs = (g.obj, LOOKALIKES[g.obj][0])

    def u(self, salt: str) -> float:
        return _unit(self.digest, salt)

    def chance(self, name: str, scale: float = 1.0) -> bool:
        return self.u(name) < self.p[name] * scale

    # -- top level -----------------------------------------------------------------------
    def decide(self) -> str:
        b = self.b
        last = b.last
        if last is None:
            if self.goal is not None and self.chance("think"):
                return self.plan_thought()
            return self.plan()
        if last.kind == "harness_gap" and last.reply is None:
            if self.chance("harness_react"):
                return "look"
            if self.u("harness_think") < self.p["think"] and not self._just_thought():
                return "think: The harness says something. Let me recall where I am and what I still need to do."
        if last.kind in ("nothing", "bad"):
            reply = self.after_failure(last)
            if reply:
                return reply
        if last.kind == "gap" and last.action is not None:
            reply = self.after_gap(last)
            if reply:
                return reply
        if last.mismatch and self.chance("notice_mismatch"):
            return f"go to {last.mismatch}"
        prev = b.last_env_reply()
        if (
            prev
            and last.kind not in ("think", "harness", "harness_gap")
            and self.chance("repeat")
        ):
            return prev
        reply = self.plan()
        if reply in self.recent_failures():
            # the plan says to do again what just failed: an agent that is not looping
            # checks its picture of the world instead
            if self.u("loop_plan") >= self.p["loop"]:
                alt = self.reground(parse_action(reply))
                return alt if alt and alt != reply else "look"
        return reply

    def recent_failures(self, window: int = 3) -> set[str]:
        """Replies that got ``Nothing happens.`` among the last few env actions."""
        out: set[str] = set()
        seen = 0
        for s in reversed(self.b.steps):
            if s.kind == "think":
                continue
            if s.kind in ("nothing", "bad") and s.reply:
                out.add(s.reply.strip())
            seen += 1
            if seen >= window:
                break
        return out

    def _just_thought(self) -> bool:
        last = self.b.last
        return last is not None and last.kind == "think"

    # -- reacting to surprises --------------------------------------------------------------
    def after_failure(self, last: Any) -> str | None:
        b = self.b
        act = last.action
        streak = 0
        for s in reversed(b.steps):
            if s.kind in ("nothing", "bad") and s.reply == last.reply:
                streak += 1
            elif s.kind == "think":
                continue
            else:
                break
        if last.kind == "bad":
            return None
        if self.u("loop") < self.p["loop"] * (0.6 ** (streak - 1)):
            return last.reply
        if self.u("reground") < self.p["reground"]:
            if not self._just_thought() and self.u("fail_think") < self.p["think"] * 0.5:
                return "think: That did not work. Maybe I am not where I think I am, or I misread something."
            return self.reground(act)
        return None

    def reground(self, act: tuple[str, ...] | None) -> str | None:
        """Check where I am / what I hold / what is here, the way an LLM does after a surprise."""
        if not act:
            return "look"
        verb = act[0]
        if verb not in _REGROUND_VERBS:
            return None
        place = act[2] if verb in ("take", "move", "heat", "cool", "clean") else act[1]
        x = self.u("reground_how")
        if verb == "go":
            # "go to X" fails when I am already at X: look, or check X itself
            if x < 0.5 and place in self.b.receptacles:
                return f"examine {place}"
            return "look"
        if verb in ("take", "move", "heat", "cool", "clean") and x < 0.3:
            return "inventory"
        if x < 0.6 and place in self.b.receptacles:
            return f"go to {place}"
        return "look"

    def after_gap(self, last: Any) -> str | None:
        """The observation could not be read: maybe check before going on."""
        act = last.action
        if not self.chance("gap_check"):
            return None
        verb = act[0]
        if verb == "go":
            if act[1] in self.b.searched:
                return None
            return f"examine {act[1]}"
        if verb in ("take", "move", "heat", "cool", "clean"):
            return "inventory"
        if verb == "open":
            return f"examine {act[1]}"
        return "look"

    # -- planning --------------------------------------------------------------------------
    def plan_thought(self) -> str:
        g = self.goal
        assert g is not None
        places = self.ranked(g.obj)[:3]
        where = ", ".join(places) if places else "the room"
        steps = [f"find and take a {g.obj}"]
        if g.transform:
            steps.append(f"{g.transform} it with the {g.appliance}")
        if g.task_type == LOOK:
            steps.append(f"find the {g.toggle} and use it")
        elif g.recep:
            steps.append(f"put it in/on the {g.recep}")
            if g.count == 2:
                steps.append(f"find and put a second {g.obj} there")
        return (
            f"think: To solve the task, I need to {', then '.join(steps)}. "
            f"A {g.obj} is more likely to appear in {where}. I can check one by one."
        )

    def milestone(self, action: str, thought: str) -> str:
        """Return ``thought`` instead of ``action`` sometimes (thinking aloud at a milestone)."""
        if self._just_thought() or any(s.reply == "think: " + thought for s in self.b.steps):
            return action
        if self.u("think|" + action) < self.p["think"]:
            return "think: " + thought
        return action

    def plan(self) -> str:
        g = self.goal
        b = self.b
        if g is None:
            return self.explore(None)
        held = b.holding
        transform_needed = self.transform_needed()
        if held is not None:
            if otype(held) not in self.objs or held in self.done_objects():
                if b.location is None:
                    return self.explore(g.obj)
                return f"move {held} to {b.location}"
            if g.task_type == LOOK:
                return self.light(held)
            if transform_needed and g.transform not in b.states.get(held, set()):
                return self.transform(held)
            return self.place(held)
        # hands are empty: find (another) object
        need = g.count - len(self.done_objects())
        if g.task_type != LOOK and need <= 0:
            # I believe the job is done, yet the episode goes on: something is off
            if transform_needed is False and self.goal and self.goal.transform:
                pass
            return self.recheck()
        cands = self.candidates()
        if cands:
            o, r = cands[0]
            if b.location != r:
                return self.milestone(
                    f"go to {r}", f"I remember a {otype(o)} in/on the {r}. I should go there and take it."
                )
            if b.opened.get(r) is False:
                return f"open {r}"
            return self.milestone(
                f"take {o} from {r}", f"Now I find a {o}. Next, I need to take it."
            )
        return self.explore(g.obj)

    def transform_needed(self) -> bool:
        """False while the 'forgot the heat/cool/clean step' slip holds (until a placement)."""
        g = self.goal
        if g is None or not g.transform:
            return False
        if self.b.placed:
            return True
        return _unit(self.task_key, "forget_transform") >= self.p["forget_transform"]

    def done_objects(self) -> list[str]:
        """Objects I believe I have put where the goal wants them (and in the right state)."""
        g = self.goal
        if g is None or not g.recep:
            return []
        need_state = g.transform if self.transform_needed() else None
        done = []
        for o, r in self.b.placed:
            if otype(o) not in self.objs or otype(r) not in self.receps:
                continue
            if o not in self.b.contents.get(r, ()):
                continue
            if need_state and need_state not in self.b.states.get(o, set()):
                continue
            if o not in done:
                done.append(o)
        return done

    def candidates(self) -> list[tuple[str, str]]:
        """Known objects of the goal type I could take, best first."""
        g = self.goal
        assert g is not None
        b = self.b
        done = set(self.done_objects())
        placed = {o for o, _ in b.placed}
        out = []
        for o, r in [x for t in self.objs for x in b.where_is(t)]:
            if o in done:
                continue
            if g.recep and otype(r) in self.receps and (g.task_type == TWO or o in placed):
                if not (self.transform_needed() and g.transform not in b.states.get(o, set())):
                    continue
            out.append((o, r))
        # the one here first, then the most recently seen
        out.sort(key=lambda x: (x[1] != b.location, -b.observed_at.get(x[1], 0)))
        return out

    def transform(self, held: str) -> str:
        g = self.goal
        assert g is not None and g.appliance and g.transform
        b = self.b
        apps = b.of_type(g.appliance)
        if not apps:
            return self.explore(g.appliance)
        app = b.location if b.location in apps else apps[0]
        if b.location != app:
            return self.milestone(
                f"go to {app}", f"Now I take a {held}. Next, I need to go to the {app} and {g.transform} it."
            )
        return f"{g.transform} {held} with {app}"

    def place(self, held: str) -> str:
        g = self.goal
        assert g is not None and g.recep
        b = self.b
        targets = [r for t in self.receps for r in b.of_type(t)]
        if not targets:
            return self.explore(g.recep)
        tgt = b.location if b.location in targets else targets[0]
        if b.location != tgt:
            note = f"Now I have a {held}" + (f" that I {g.transform}ed" if g.transform and g.transform in b.states.get(held, set()) else "")
            return self.milestone(f"go to {tgt}", f"{note}. Next, I need to put it in/on the {tgt}.")
        if b.opened.get(tgt) is False:
            return f"open {tgt}"
        if self.u("old_syntax") < self.p["old_syntax"]:
            return f"put {held} in/on {tgt}"
        return f"move {held} to {tgt}"

    def light(self, held: str) -> str:
        g = self.goal
        assert g is not None and g.toggle
        b = self.b
        lamps = b.where_is(g.toggle)
        if not lamps:
            return self.explore(g.toggle)
        lamps.sort(key=lambda x: (x[1] != b.location, x[0]))
        lamp, r = lamps[0]
        if b.location != r:
            return self.milestone(
                f"go to {r}", f"Now I have the {held}. Next, I need to find the {g.toggle} and use it."
            )
        return f"use {lamp}"

    def recheck(self) -> str:
        """The goal looks done but the game goes on: look again at my assumptions."""
        x = self.u("recheck")
        if x < 0.35:
            return "inventory"
        if x < 0.55:
            return "look"
        g = self.goal
        assert g is not None
        if g.recep:
            placed = [(o, r) for o, r in self.b.placed if otype(r) == g.recep]
            if placed:
                o, r = placed[-1]
                if self.b.location != r:
                    return f"go to {r}"
                return f"examine {r}"
        return self.explore(g.obj)

    # -- searching ----------------------------------------------------------------------------
    def score(self, target: str, recep: str) -> float:
        noise = _unit(self.task_key, f"order|{target}|{recep}") - 0.5
        s = prior(target, otype(recep)) + self.p["prior_noise"] * noise
        g = self.goal
        if g is not None and g.recep and otype(recep) == g.recep and target == g.obj:
            s -= 1.0  # the object is rarely where it must go already
        return s - 0.01 * _num(recep)

    def ranked(self, target: str) -> list[str]:
        seen: list[str] = []
        for r in sorted(self.b.receptacles, key=lambda r: -self.score(target, r)):
            t = otype(r)
            if t not in seen:
                seen.append(t)
        return seen

    def explore(self, target: str | None) -> str:
        b = self.b
        recs = b.receptacles
        if not recs:
            return "look"
        here = b.location
        if target is not None and here is not None and here in recs and here not in b.searched:
            # at a place whose contents I have not read (closed, or the text was lost)
            if b.opened.get(here) is False:
                return f"open {here}"
            elif f"examine {here}" not in self.recent_failures():
                return f"examine {here}"
        # close what I just opened and found useless (some agents tidy up)
        last = b.last
        if (
            last is not None
            and last.action is not None
            and last.action[0] == "open"
            and last.kind == "ok"
            and here is not None
            and b.opened.get(here)
            and self.u("close_after") < self.p["close_after"]
        ):
            return f"close {here}"
        unsearched = [r for r in recs if r not in b.searched and r != here]
        if target is None:
            if unsearched:
                return f"go to {unsearched[0]}"
            return "look"
        if unsearched:
            best = max(unsearched, key=lambda r: self.score(target, r))
            return f"go to {best}"
        # everything seen once: search again, oldest observation first; or give up on a
        # systematic search and keep going back to the few likeliest places
        again = [r for r in recs if r != here]
        if not again:
            return "look"
        if _unit(self.task_key, "give_up") < self.p["give_up"]:
            if self.u("idle") < 0.25:
                return "look" if self.u("idle_how") < 0.5 else "inventory"
            again = sorted(again, key=lambda r: -self.score(target, r))[:3]
        best = min(again, key=lambda r: (b.observed_at.get(r, -1), -self.score(target, r)))
        return f"go to {best}"


def _num(name: str) -> int:
    n = name.rpartition(" ")[2]
    return int(n) if n.isdigit() else 0
