"""The named mechanisms by which the built-in agent fails, is rescued or is harmed.

Every random choice of the built-in agent is a :class:`~cir.agents.modelfree.Draws` call keyed
by the task and by *content*: the mechanism's name and what it is about (a receptacle, an object, a visit
number, the sub-goal in progress, the attempt count of a command, the ordinal of a
harness message of one kind). Never by a message's position or by the whole message
list. So an extra harness message changes an episode only through what it says and
through the mechanisms whose role is ``rescue``, ``harm``, ``sampling`` or ``harness`` below: those
are the ones that can explain why two arms of a pair diverge
(:data:`DIVERGENCE_MECHANISMS`). At a temperature above 0 (:mod:`cir.agents.sampling`) one
more draw is keyed by the sample index too: ``sampled_choice``, where two samples of the
same state part, and which a recovery can also reach (through the commands it changes).

A fired mechanism is recorded as a :class:`cir.agents.modelfree.Fired` (name and what it
was about; :class:`Mechanism` and the draws live there too, shared by every model-free agent);
the harness stores them in the episode's explanation trace, beside the transcript and never
in it, so no feature and no router can read them.
"""

from __future__ import annotations

from cir.agents.modelfree import (
    BUDGET,
    Mechanism,
    divergence_mechanisms,
    mechanism_table,
    sampled_choice,
)

_ALL = (
    # slips of a plain run (any arm, any condition)
    Mechanism("overlook", "slip", "overlook",
              "overlooks a wanted item in a list of 3+ items (chance grows with the list's length)"),
    Mechanism("forget_open", "slip", "forget_open",
              "takes a closed receptacle for searched on arrival, never opening it"),
    Mechanism("repeat", "slip", "repeat", "repeats its previous command"),
    Mechanism("think", "slip", "think", "thinks aloud at a milestone (a model turn, no env action)"),
    Mechanism("loop", "slip", "loop", "retries a command that just gave 'Nothing happens.'"),
    Mechanism("give_up", "slip", "give_up",
              "once every place is seen, stops searching systematically and idles around the likeliest few"),
    Mechanism("forget_transform", "slip", "forget_transform",
              "forgets the heat/cool/clean step until a placement fails to finish the task"),
    Mechanism("close_after", "slip", "close_after", "closes a receptacle it found useless"),
    Mechanism("confuse", "slip", "confuse", "takes a look-alike type for the goal's object or receptacle"),
    Mechanism("old_syntax", "slip", "old_syntax", "says 'put X in/on Y' (older ALFWorld) instead of 'move X to Y'"),
    # how it corrects itself without help
    Mechanism("reground", "self_correction", "reground",
              "after a failed command, checks where it is or what it holds (look, examine, inventory, go again)"),
    Mechanism("self_check", "self_correction", "self_check",
              "checks its hands (inventory); the chance grows with consecutive failed commands"),
    Mechanism("notice_loop", "self_correction", "notice_loop",
              "having lost track, notices it is going round in circles and returns to its plan (per reply)"),
    # what a stale or missing text does to it
    Mechanism("stale_location", "error", "stale_location",
              "believes a text that does not answer its command (e.g. an arrival elsewhere) and counts the "
              "intended place as searched without seeing inside, until contradicted"),
    Mechanism("hidden_pickup", "error", "hidden_pickup",
              "a 'take' answered by another text: believes its hands are still empty"),
    Mechanism("hidden_placement", "error", "hidden_placement",
              "a 'move' answered by another text: believes it still holds the object"),
    Mechanism("missing_text", "error", "missing_text",
              "an unreadable text: assumes the command worked (a place gone to counts as searched)"),
    Mechanism("stale_rollback", "error", "stale_rollback",
              "believes a text last shown two or more commands earlier and takes its hands to be as they "
              "were then (a pickup or placement since is undone in belief)"),
    Mechanism("lost_track", "error", "lost_track",
              "misled by a stale or missing text, loses track of its plan and goes round its last two "
              "commands, reading but not acting on what it is shown, until it notices or a harness "
              "message makes it reconsider"),
    # what a harness message does to it
    Mechanism("harness_recheck", "rescue", "harness_recheck",
              "a harness message makes it re-check the step it is least sure of (one whose text did not "
              "answer the command) or, going round in circles after that step was settled, return to its plan"),
    Mechanism("refresh_correction", "rescue", "refresh_correction",
              "a refreshed text contradicts where it believes it is: it corrects the belief and puts back "
              "a place it only assumed searched"),
    Mechanism("interruption", "harm", "interruption",
              "a harness message during a sub-goal (object seen, transform pending, carrying to the "
              "target) makes it re-plan and redo or drop that sub-goal"),
    Mechanism("misread_refresh", "harm", "misread_refresh",
              "reads 'Next to it, you see nothing.' as 'this place holds nothing' where it knew the contents"),
    Mechanism("over_correct", "harm", "over_correct",
              "a harness message makes it doubt its last step although the text answered it, and undo or "
              "redo it: puts back the object it took (and looks for another), redoes a heat/cool/clean, "
              "takes back a placement, doubts an object it saw, or searches the places it searched again"),
    Mechanism("distraction", "harm", "distraction",
              "a refreshed text that names a place pulls it there: a look-alike of the goal's object it knows "
              "is there is taken for the goal's object; else, a place it had ruled out is searched again"),
    # what sampling does (only at a temperature above 0: cir.agents.sampling)
    sampled_choice("a look, the inventory, the next-likeliest place, examining where it is"),
    # what the harness does
    BUDGET,
    Mechanism("rewind", "harness", None,
              "a rewind restored the state before the suspect observation: the progress since is discarded "
              "and redone (the redone step shows the true text)"),
)

MECHANISMS: dict[str, Mechanism] = mechanism_table(_ALL)

#: the mechanisms through which a recovery operation can change an episode (and, at a
#: temperature, the sampled choices through which two draws of one state part)
DIVERGENCE_MECHANISMS: frozenset[str] = divergence_mechanisms(_ALL)
