"""The cooking features read only what was shown; the family's parts are there by their names."""

from __future__ import annotations

from cir.episode.perturb import MISSING_TEXT
from cir.episode.transcript import AGENT, Step, Transcript
from cir.families.textworld_cooking import family
from cir.families.textworld_cooking.features import COOKING_FEATURES, FEATURES

INTRO = "You are hungry!\n\n-= Kitchen =-\nYou are in a kitchen.\n\nThere is an exit to the north."


def _step(action: str, shown: str, observation: str | None = None) -> Step:
    return Step(actor=AGENT, reply=action, action=action, observation=observation or shown, shown=shown)


def test_suspect_features_read_the_shown_text_not_the_true_one():
    steps = [_step("inventory", "You are carrying nothing."),
             _step("cook red potato with stove", MISSING_TEXT, observation="You fried the red potato."),
             _step("go north", "-= Corridor =-\nYou are in a corridor.")]
    transcript = Transcript("t", INTRO, steps)
    f = COOKING_FEATURES.extract(transcript, 1, max_turns=49, max_actions=64)
    assert list(f) == list(FEATURES)
    assert (f["f_has_suspect"], f["f_suspect_missing"], f["f_suspect_unanswered"], f["f_suspect_prepare"]) == (1, 1, 1, 1)
    assert f["f_prepared"] == 0  # the true "You fried" was never shown
    assert (f["f_env_actions"], f["f_actions_left"], f["f_turns_left"], f["f_rooms_seen"]) == (3, 61, 46, 2)
    far = COOKING_FEATURES.extract(transcript, 5, max_turns=49, max_actions=64)
    assert far["f_has_suspect"] == 0 and far["f_suspect_missing"] == 0
    shown = Transcript("t", INTRO, [*steps[:1], _step("cook red potato with stove", "You fried the red potato.")])
    g = COOKING_FEATURES.extract(shown, 0, max_turns=49, max_actions=64)
    assert (g["f_suspect_unanswered"], g["f_prepared"], g["f_last_prepare"]) == (0, 1, 1)


def test_the_family_is_declared_as_alfworlds_is():
    from cir.families.alfworld import family as alfworld
    from cir.families.registry import get_family

    fam = family.FAMILY
    assert get_family("textworld-cooking") is fam and isinstance(fam, type(alfworld.FAMILY))
    assert fam.name == "textworld-cooking" and fam.splits == ("train", "valid", "test")
    assert fam.extractor is COOKING_FEATURES and fam.prompt.parse is family.PROMPT.parse
    assert fam.experiments_dir().is_dir() and any(fam.experiments_dir().glob("*.toml"))
    assert fam.env_options == ("snapshots",) and "over_correct" in fam.mechanisms
    # the same module-level parts under the same names in both families' family.py
    for name in ("make_env", "generate_tasks", "builtin_agent", "walk_actions", "FAMILY"):
        assert hasattr(family, name) and hasattr(alfworld, name), name
    actions = family.walk_actions(None, "-= Kitchen =-\nOn the counter you see a red potato.\n\nThere is an exit to the north.")
    assert "go north" in actions and "take red potato" in actions and "look" in actions
