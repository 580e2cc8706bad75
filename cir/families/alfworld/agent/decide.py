"""The built-in agent's next reply, decided from its beliefs.

In order: a reaction to a harness message it has not answered yet (re-check a doubted
step, or re-plan the sub-goal in progress); the next command of the cycle it goes round
when it has lost track (``lost_track``) or doubts a right step (``over_correct``, set on
reading the message), unless it notices (``notice_loop``); a check of
a text it noticed was wrong; a reaction to a failed command (retry, check itself); a
repeat slip; else the plan: take a known object of the goal's type, transform it, carry
it to the target, or search the likeliest unseen place. The decision reads only the
beliefs, and every draw is keyed by content (:class:`cir.agents.modelfree.Draws`), so
identical beliefs give the identical reply whatever messages led to them.
"""

from __future__ import annotations

from cir.agents.modelfree import Draws, Fired
from cir.episode.protocol import THINK_PREFIX
from cir.families.alfworld.agent.beliefs import Beliefs, fatigue, invitation, recheck_command
from cir.families.alfworld.agent.goals import LOOK, TWO, Goal
from cir.families.alfworld.agent.priors import LOOKALIKES, prior
from cir.families.alfworld.text import Action, otype, parse_action

#: how much each sub-goal in progress is exposed to an interruption
SUBGOAL_WEIGHT = {"fetch": 0.5, "transform": 1.0, "deliver": 1.0, "light": 0.6}

_REGROUND_VERBS = ("go", "take", "move", "open", "close", "heat", "cool", "clean", "use", "examine")
_HANDS_VERBS = ("take", "move", "heat", "cool", "clean")


class Decider:
    """One decision from the beliefs; ``fired`` lists the mechanisms behind it."""

    def __init__(self, b: Beliefs, p: dict[str, float], draws: Draws) -> None:
        self.b, self.p, self.draws = b, p, draws
        self.fired: list[Fired] = []
        self.goal: Goal | None = b.goal
        # the types I accept as the goal's object and receptacle (a look-alike when confused)
        self.objs: tuple[str, ...] = ()
        self.receps: tuple[str, ...] = ()
        g = self.goal
        if g is not None:
            self.objs = (g.obj,)
            self.receps = (g.recep,) if g.recep else ()
            if draws.chance("confuse", p["confuse"]):
                present = {otype(r) for r in b.receptacles}
                alt_r = [t for t in LOOKALIKES.get(g.recep or "", ()) if t in present]
                if alt_r and draws.u("confuse", "what") < 0.5:
                    self.receps = (alt_r[0], g.recep or alt_r[0])
                elif g.obj in LOOKALIKES:
                    self.objs = (g.obj, LOOKALIKES[g.obj][0])
            if b.lure in b.receptacles:  # distracted: that place will do as the target
                self.receps = (*self.receps, otype(b.lure))
            elif b.lure is not None and otype(b.lure) not in self.objs:  # the look-alike will do
                self.objs = (*self.objs, otype(b.lure))

    # -- draws -----------------------------------------------------------------------------
    def chance(self, name: str, prob: float, *about: object) -> bool:
        """Draw ``name`` about ``about``; record it when it fires."""
        if self.draws.chance(name, prob, *about):
            self.note(name, *about)
            return True
        return False

    def note(self, name: str, *about: object) -> None:
        """Record that a slip drawn once per episode shapes this reply."""
        self.fired.append(Fired(name, " | ".join(str(a) for a in about)))

    def attempts(self, command: str) -> int:
        return self.b.attempts.get(command.strip().lower(), 0)

    def failures(self, command: str) -> int:
        """How often a command (either put/move wording) got ``Nothing happens.``."""
        return self.b.failed.get(command.strip().lower(), 0)

    # -- top level -------------------------------------------------------------------------
    def decide(self) -> str:
        b = self.b
        if b.harness_pending is not None and not b.doubting:  # (doubting: it reacts by going round)
            reply = self.react_to_harness(*b.harness_pending)
            if reply:
                return reply
        if b.lost is not None:
            return self.going_round()
        if b.check is not None:
            return b.check
        last = b.last
        if last is None:
            if self.goal is not None and self.chance("think", self.p["think"], "plan"):
                return self.plan_thought()
            return self.plan()
        if last.kind == "nothing":
            reply = self.after_failure(last.reply, last.action)
            if reply:
                return reply
        if last.kind not in ("think", "bad") and self.chance(
                "repeat", self.p["repeat"], last.reply, self.attempts(last.reply)):
            return last.reply
        planned = len(self.fired)
        reply = self.plan()
        if reply in self.recent_failures():
            # the plan says to do again what just failed: an agent that is not looping
            # checks its picture of the world instead (the plan's own slips did not act)
            del self.fired[planned:]
            if not self.chance("loop", self.p["loop"], reply, self.attempts(reply), "plan"):
                alt = self.reground(reply, parse_action(reply))
                return alt if alt and alt != reply else "look"
        return reply

    def going_round(self) -> str:
        """Lost track: the next command of the cycle, unless it notices (then the plan)."""
        nxt = self.b.cycle_next()
        assert nxt is not None
        if self.chance("notice_loop", self.p["notice_loop"], nxt, self.attempts(nxt)):
            return self.break_out(self.plan())
        return nxt

    def break_out(self, reply: str) -> str:
        """A reply that leaves the cycle it goes round (if lost): where the plan or the check
        is the cycle's next command anyway, it first looks around (``inventory`` if the
        cycle's next command is the look)."""
        nxt = self.b.cycle_next()
        if nxt is None or reply.strip().lower() != nxt.lower():
            return reply
        return "look" if reply.strip().lower() != "look" else "inventory"

    def recent_failures(self) -> set[str]:
        """The last command, if it got ``Nothing happens.``."""
        last = self.b.last
        return {last.reply.strip()} if last is not None and last.kind == "nothing" else set()

    def _just_thought(self) -> bool:
        return self.b.last is not None and self.b.last.kind == "think"

    # -- reacting to a harness message ---------------------------------------------------------
    def react_to_harness(self, kind: str, n: int) -> str | None:
        """Re-check the least-sure step, or re-plan the sub-goal in progress, or nothing."""
        b = self.b
        invite = invitation(kind, self.p)
        if b.doubts:
            doubt = b.doubts[-1]  # the latest step whose text did not answer it
            if self.chance("harness_recheck", self.p["harness_recheck"] * invite,
                           doubt.reply, doubt.attempt, kind, n):
                return self.break_out(recheck_command(doubt, b))
        elif b.lost is not None and self.chance("harness_recheck", self.p["harness_recheck"] * invite,
                                                "lost", *b.lost, kind, n):
            return self.break_out(self.plan())  # the doubt is settled, yet it was going round
        sub, about = self.subgoal()
        weight = SUBGOAL_WEIGHT.get(sub, 0.0)
        prob = self.p["interruption"] * weight * invite * fatigue(b, self.p)
        if weight and self.chance("interruption", prob, sub, about, kind, n):
            return self.interrupted(sub, about, kind, n)
        return None

    def subgoal(self) -> tuple[str, str]:
        """The sub-goal in progress: fetch, transform, deliver, light, or search (none)."""
        g, b = self.goal, self.b
        if g is None:
            return "search", ""
        held = b.holding
        if held is not None and otype(held) in self.objs and held not in self.done_objects():
            if g.task_type == LOOK:
                return "light", held
            if self.transform_needed() and g.transform not in b.states.get(held, set()):
                return "transform", held
            return "deliver", held
        if held is None and self.candidates():
            o, r = self.candidates()[0]
            return "fetch", f"{o} in {r}"
        return "search", g.obj

    def interrupted(self, sub: str, about: str, kind: str, n: int) -> str:
        """Re-plan the sub-goal in progress: redo its last step or drop it (one reply)."""
        g, b = self.goal, self.b
        assert g is not None
        how = self.draws.u("interruption", "how", sub, about, kind, n)
        if sub == "fetch":
            o, _, r = about.partition(" in ")
            if b.location == r:
                return f"examine {r}"  # is it really there?
            return f"{THINK_PREFIX} Let me re-plan. I still need a {g.obj}; I saw {o} in/on the {r}."
        held = about
        if sub == "deliver" and g.transform and how < 0.6:
            apps = b.of_type(g.appliance or "")
            if apps and b.location not in apps:
                return f"go to {apps[0]}"  # did I really {transform} it? back to the appliance
            return f"examine {held}"
        if how < 0.5 and b.location is not None and not (g.recep and otype(b.location) in self.receps):
            return f"move {held} to {b.location}"  # put it down and start this part again
        return "inventory"

    # -- reacting to surprises ----------------------------------------------------------------
    def after_failure(self, reply: str, act: Action | None) -> str | None:
        b = self.b
        n = self.attempts(reply)
        if self.chance("loop", self.p["loop"] * (0.6 ** (b.fail_streak - 1)), reply, n):
            return reply
        if (b.holding is None or act is None or act[0] in _HANDS_VERBS) and self.chance(
                "self_check", self.p["self_check"] * b.fail_streak, "hands", b.fail_streak, reply):
            return "inventory"
        if self.chance("reground", self.p["reground"], reply, n):
            if not self._just_thought() and self.draws.u("reground", "think", reply, n) < self.p["think"] * 0.5:
                return f"{THINK_PREFIX} That did not work. Maybe I am not where I think I am, or I misread something."
            return self.reground(reply, act)
        return None

    def reground(self, reply: str, act: Action | None) -> str | None:
        """Check where I am / what I hold / what is here, the way an LLM does after a surprise."""
        if not act:
            return "look"
        verb = act[0]
        if verb not in _REGROUND_VERBS:
            return None
        place = act[2] if verb in _HANDS_VERBS else act[1]
        x = self.draws.u("reground", "how", reply, self.attempts(reply))
        if verb == "go":
            # "go to X" fails when I am already at X: look, or check X itself
            if x < 0.5 and place in self.b.receptacles:
                return f"examine {place}"
            return "look"
        # (its hands it checks only by the self_check mechanism)
        if x < 0.6 and place in self.b.receptacles:
            return f"go to {place}"
        return "look"

    # -- planning ---------------------------------------------------------------------------
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
            f"{THINK_PREFIX} To solve the task, I need to {', then '.join(steps)}. "
            f"A {g.obj} is more likely to appear in {where}. I can check one by one."
        )

    def milestone(self, action: str, thought: str) -> str:
        """Return ``thought`` instead of ``action`` sometimes (thinking aloud at a milestone)."""
        said = f"{THINK_PREFIX} {thought}"
        if self._just_thought() or said in self.b.thoughts:
            return action
        if self.chance("think", self.p["think"], action):
            return said
        return action

    def plan(self) -> str:
        g, b = self.goal, self.b
        if g is None:
            return self.explore(None)
        held = b.holding
        if held is not None:
            if otype(held) not in self.objs or held in self.done_objects():
                if b.location is None:
                    return self.explore(g.obj)
                return f"move {held} to {b.location}"
            if g.task_type == LOOK:
                return self.light(held)
            if g.transform and g.transform not in b.states.get(held, set()):
                if self.transform_needed():
                    return self.transform(held)
                self.note("forget_transform", held)
            return self.place(held)
        # hands are empty: find (another) object
        if g.task_type != LOOK and g.count - len(self.done_objects()) <= 0:
            return self.recheck()  # I believe the job is done, yet the episode goes on
        cands = self.candidates()
        if cands:
            o, r = cands[0]
            if otype(o) != g.obj and not (b.lure is not None and otype(o) == otype(b.lure)):
                self.note("confuse", o)  # (a look-alike a refreshed text pulled it to is a distraction)
            if b.location != r:
                return self.milestone(
                    f"go to {r}", f"I remember a {otype(o)} in/on the {r}. I should go there and take it.")
            if b.opened.get(r) is False:
                return f"open {r}"
            return self.milestone(f"take {o} from {r}", f"Now I find a {o}. Next, I need to take it.")
        return self.explore(g.obj)

    def transform_needed(self) -> bool:
        """False while the 'forgot the heat/cool/clean step' slip holds (until a placement)."""
        g = self.goal
        if g is None or not g.transform:
            return False
        if self.b.placed:
            return True
        return self.draws.u("forget_transform") >= self.p["forget_transform"]

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
        g, b = self.goal, self.b
        assert g is not None
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
        # the look-alike it was pulled to first, then the one here, then the most recently seen
        out.sort(key=lambda x: (x[0] != b.lure, x[1] != b.location, -b.seen_at.get(x[1], 0)))
        return out

    def transform(self, held: str) -> str:
        g, b = self.goal, self.b
        assert g is not None and g.appliance and g.transform
        apps = b.of_type(g.appliance)
        if not apps:
            return self.explore(g.appliance)
        app = b.location if b.location in apps else apps[0]
        if b.location != app:
            return self.milestone(
                f"go to {app}", f"Now I take a {held}. Next, I need to go to the {app} and {g.transform} it.")
        return f"{g.transform} {held} with {app}"

    def place(self, held: str) -> str:
        g, b = self.goal, self.b
        assert g is not None and g.recep
        targets = [r for t in self.receps for r in b.of_type(t)]
        if not targets:
            return self.explore(g.recep)
        # a target that refused the object twice is tried last (the look-alike was wrong)
        refused = {r for r in targets if self.failures(f"move {held} to {r}") >= 2}
        targets = [r for r in targets if r not in refused] + [r for r in targets if r in refused]
        tgt = b.location if b.location in targets and b.location not in refused else targets[0]
        if otype(tgt) != g.recep and not (b.lure is not None and otype(tgt) == otype(b.lure)):
            self.note("confuse", tgt)
        if b.location != tgt:
            done = g.transform and g.transform in b.states.get(held, set())
            note = f"Now I have a {held}" + (f" that I {g.transform}ed" if done else "")
            return self.milestone(f"go to {tgt}", f"{note}. Next, I need to put it in/on the {tgt}.")
        if b.opened.get(tgt) is False:
            return f"open {tgt}"
        move, put = f"move {held} to {tgt}", f"put {held} in/on {tgt}"
        if self.chance("old_syntax", self.p["old_syntax"], held, tgt, self.attempts(move) + self.attempts(put)):
            return put
        return move

    def light(self, held: str) -> str:
        g, b = self.goal, self.b
        assert g is not None and g.toggle
        lamps = sorted(b.where_is(g.toggle), key=lambda x: (x[1] != b.location, x[0]))
        if not lamps:
            return self.explore(g.toggle)
        lamp, r = lamps[0]
        if b.location != r:
            return self.milestone(
                f"go to {r}", f"Now I have the {held}. Next, I need to find the {g.toggle} and use it.")
        return f"use {lamp}"

    def recheck(self) -> str:
        """The goal looks done but the game goes on: look again at my assumptions."""
        g, b = self.goal, self.b
        assert g is not None
        x = self.draws.u("recheck", len(b.placed), b.location,
                         self.attempts("inventory") + self.attempts("look") + self.attempts(f"examine {b.location}"))
        if x < 0.35:
            return "inventory"
        if x < 0.55:
            return "look"
        if g.recep:
            placed = [(o, r) for o, r in b.placed if otype(r) == g.recep]
            if placed:
                r = placed[-1][1]
                return f"go to {r}" if b.location != r else f"examine {r}"
        return self.explore(g.obj)

    # -- sampling (at a temperature: cir.agents.modelfree's sampled_choice) ---------------------
    @property
    def turn(self) -> int:
        """How many commands it has sent (a sampled choice is drawn afresh each turn)."""
        return self.b.clock

    def alternatives(self, reply: str) -> list[str]:
        """What else an agent in these beliefs might plausibly say instead of the command
        ``reply``: look, check its hands, examine where it is, or go to the likeliest unsearched
        place it did not choose; none instead of a thought (a thought is never replaced)."""
        if reply.strip().lower().startswith(THINK_PREFIX):
            return []
        b = self.b
        alts = ["look", "inventory"]
        if b.location is not None:
            alts.append(f"examine {b.location}")
        others = [r for r in b.receptacles if r not in b.searched and r != b.location and f"go to {r}" != reply]
        if others:
            target = self.goal.obj if self.goal is not None else None
            alts.append("go to " + (max(others, key=lambda r: self.score(target, r)) if target else others[0]))
        return alts

    # -- searching ---------------------------------------------------------------------------
    def score(self, target: str, recep: str) -> float:
        noise = self.draws.u("order", target, recep) - 0.5
        s = prior(target, otype(recep)) + self.p["prior_noise"] * noise
        g = self.goal
        if g is not None and g.recep and otype(recep) == g.recep and target == g.obj:
            s -= 1.0  # the object is rarely where it must go already
        return s - 0.01 * _num(recep)

    def ranked(self, target: str) -> list[str]:
        seen: list[str] = []
        for r in sorted(self.b.receptacles, key=lambda r: -self.score(target, r)):
            if otype(r) not in seen:
                seen.append(otype(r))
        return seen

    def explore(self, target: str | None) -> str:
        b = self.b
        recs, here = b.receptacles, b.location
        if not recs:
            return "look"
        if target is not None and here is not None and here in recs and here not in b.searched:
            # at a place whose contents I have not read (closed, or the text was lost)
            if b.opened.get(here) is False:
                return f"open {here}"
            if f"examine {here}" not in self.recent_failures():
                return f"examine {here}"
        last = b.last
        if (last is not None and last.action is not None and last.action[0] == "open"
                and last.kind == "ok" and here is not None and b.opened.get(here)
                and self.chance("close_after", self.p["close_after"], here, b.visits.get(here, 0))):
            return f"close {here}"  # some agents tidy up what they found useless
        unsearched = [r for r in recs if r not in b.searched and r != here]
        if target is None:
            return f"go to {unsearched[0]}" if unsearched else "look"
        if unsearched:
            return f"go to {max(unsearched, key=lambda r: self.score(target, r))}"
        # everything seen once: search again, oldest observation first; or give up on a
        # systematic search and keep going back to the few likeliest places
        again = [r for r in recs if r != here]
        if not again:
            return "look"
        if self.draws.u("give_up") < self.p["give_up"]:
            self.note("give_up", here)  # no systematic second pass
            idled = self.attempts("look") + self.attempts("inventory")
            if self.draws.u("give_up", "idle", here, b.visits.get(here or "", 0), idled) < 0.25:
                return "look"
            again = sorted(again, key=lambda r: -self.score(target, r))[:3]
        best = min(again, key=lambda r: (b.seen_at.get(r, -1), -self.score(target, r)))
        return f"go to {best}"


def _num(name: str) -> int:
    n = name.rpartition(" ")[2]
    return int(n) if n.isdigit() else 0
