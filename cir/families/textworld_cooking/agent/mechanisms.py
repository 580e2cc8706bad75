"""The named mechanisms by which the cooking agent fails, is rescued or is harmed.

As for ALFWorld's agent (:mod:`cir.families.alfworld.agent.mechanisms`), every random choice
is a :class:`cir.agents.modelfree.Draws` call keyed by the task, the agent's seed and
*content*: the mechanism's name and what it is about (an ingredient, a room, a command and how often it was sent, the
ordinal of a harness message of one kind), never a message's position. So an extra harness
message changes an episode only through what it says and through the mechanisms whose role
is ``rescue``, ``harm`` or ``harness`` (:data:`DIVERGENCE_MECHANISMS`), which is what
``cir explain`` reports a divergence between two arms by.
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
    # slips of a plain run
    Mechanism("overlook", "slip", "overlook",
              "overlooks a recipe ingredient a room lists, on this visit (found again on a later one)"),
    Mechanism("wrong_tool", "slip", "wrong_tool",
              "cooks an ingredient with the wrong appliance (roasts what is to be fried): the meal cannot be made"),
    # how it corrects itself without help
    Mechanism("reground", "self_correction", "reground",
              "after a refused command, or a text that does not answer its command, checks with look or inventory"),
    Mechanism("self_check", "self_correction", "self_check",
              "with nothing left to explore and an ingredient or tool still missing, looks in its hands again"),
    # what a stale or missing text does to it
    Mechanism("stale_location", "error", "stale_location",
              "a 'go' answered by a text with no room in it: believes it did not move and takes that exit for a "
              "dead end"),
    Mechanism("hidden_take", "error", "hidden_take",
              "a 'take' answered by another text: believes the ingredient is not there and searches elsewhere"),
    Mechanism("hidden_cook", "error", "hidden_cook",
              "a 'cook' answered by another text: believes it is not cooked and cooks it again (it burns: lost)"),
    Mechanism("hidden_cut", "error", "hidden_cut",
              "a 'slice/dice/chop' answered by another text: believes it is not cut and cuts it again"),
    Mechanism("missing_text", "error", "missing_text",
              "an unreadable text after a 'go': assumes it arrived in a room holding nothing it needs and never "
              "searches it"),
    # what a harness message does to it
    Mechanism("harness_recheck", "rescue", "harness_recheck",
              "a harness message makes it re-check the step it is least sure of (one whose text did not answer "
              "it) with inventory or look"),
    Mechanism("refresh_correction", "rescue", "refresh_correction",
              "a refreshed text contradicts it: it names another room than it believes it is in (it corrects where "
              "it is), or no longer names what it tried to take unanswered (it takes it to be in its hands)"),
    Mechanism("refresh_reread", "rescue", "refresh_reread",
              "a refreshed text of the room it believes it is in names other things than it believed there: it "
              "believes the text (an overlooked ingredient is seen again; one it took unawares is taken for gone)"),
    Mechanism("over_correct", "harm", "over_correct",
              "a harness message makes it doubt its last, right step and redo it: cooks again what it just "
              "cooked (it burns: lost), or puts back and retakes what it just took"),
    Mechanism("interruption", "harm", "interruption",
              "a harness message makes it re-plan from the cookbook: it goes back to the kitchen and reads it "
              "again before going on"),
    # what sampling does (only at a temperature above 0: cir.agents.sampling)
    sampled_choice("a look, the inventory, an exit of the room"),
    # what the harness does
    BUDGET,
    Mechanism("rewind", "harness", None,
              "a rewind restored the state before the suspect observation: it re-reads the room and its hands"),
)

MECHANISMS: dict[str, Mechanism] = mechanism_table(_ALL)

#: the mechanisms through which a recovery operation can change an episode (and, at a
#: temperature, the sampled choices through which two draws of one state part)
DIVERGENCE_MECHANISMS: frozenset[str] = divergence_mechanisms(_ALL)
