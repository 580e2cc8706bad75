"""Where things usually are: the built-in agent's common-sense search prior.

``CAN_HOLD`` is ALFWorld's own compatibility table (``VAL_RECEPTACLE_OBJECTS`` in
``alfworld/gen/constants.py``, lower-cased, movable receptacles and slices left out),
copied here so that the agent imports nothing heavy. ``TYPICAL`` is the kind of
guess an LLM makes ("an apple is likely in the fridge or on a countertop"); it is
deliberately imperfect: it ranks places, it does not know the scene. ``LOOKALIKES`` are
the types read fast or from a vague goal take for one another (the ``confuse`` slip, and
what a refreshed text can pull the agent to: ``distraction``); the features read it too,
to say what a place holds that could be taken for the goal's object.
"""

from __future__ import annotations

_CAN_HOLD_TEXT = {
    "armchair": "basketball book box cellphone cloth creditcard keychain laptop newspaper pillow remotecontrol",
    "bathtubbasin": "cloth dishsponge handtowel soapbar",
    "bed": "baseballbat basketball book cellphone laptop newspaper pillow tennisracket",
    "cabinet": "book bowl box candle cd cloth cup dishsponge glassbottle handtowel kettle ladle mug newspaper pan peppershaker plate plunger pot saltshaker soapbar soapbottle spraybottle tissuebox toiletpaper toiletpaperroll vase wateringcan winebottle",
    "cart": "candle cloth dishsponge handtowel mug papertowel plunger soapbar soapbottle spraybottle statue tissuebox toiletpaper toiletpaperroll vase",
    "coffeemachine": "mug",
    "countertop": "alarmclock apple baseballbat basketball book bowl box bread butterknife candle cd cellphone cloth creditcard cup dishsponge egg fork glassbottle handtowel kettle keychain knife ladle laptop lettuce mug newspaper pan papertowel pen pencil peppershaker plate pot potato remotecontrol saltshaker soapbar soapbottle spatula spoon spraybottle statue tennisracket tissuebox toiletpaper toiletpaperroll tomato vase watch wateringcan winebottle desklamp",
    "desk": "alarmclock basketball book bowl box candle cd cellphone cloth creditcard cup glassbottle keychain laptop mug newspaper pen pencil plate remotecontrol soapbottle spraybottle statue tennisracket tissuebox toiletpaper toiletpaperroll vase watch wateringcan winebottle desklamp",
    "drawer": "book butterknife candle cd cellphone cloth creditcard dishsponge fork handtowel keychain knife ladle newspaper pen pencil peppershaker remotecontrol saltshaker soapbar soapbottle spatula spoon spraybottle tissuebox toiletpaper toiletpaperroll watch wateringcan",
    "dresser": "alarmclock basketball book bowl box candle cd cellphone cloth creditcard cup glassbottle keychain laptop mug newspaper pen pencil plate remotecontrol spraybottle statue tennisracket tissuebox toiletpaper toiletpaperroll vase watch wateringcan winebottle desklamp",
    "fridge": "apple bowl bread cup egg glassbottle lettuce mug pan plate pot potato tomato winebottle",
    "garbagecan": "apple bread cd cloth dishsponge egg handtowel lettuce newspaper papertowel pen pencil potato soapbar soapbottle spraybottle tissuebox toiletpaper toiletpaperroll tomato winebottle",
    "handtowelholder": "handtowel",
    "laundryhamper": "cloth",
    "microwave": "apple bowl bread cup egg glassbottle mug plate potato tomato",
    "ottoman": "basketball book box cellphone cloth creditcard keychain laptop newspaper pillow remotecontrol",
    "safe": "cd cellphone creditcard keychain statue vase watch",
    "shelf": "alarmclock book bowl box candle cd cellphone cloth creditcard cup dishsponge glassbottle handtowel kettle keychain mug newspaper papertowel pen pencil peppershaker plate pot remotecontrol saltshaker soapbar soapbottle spraybottle statue tissuebox toiletpaper toiletpaperroll vase watch wateringcan winebottle",
    "sinkbasin": "apple bowl butterknife cloth cup dishsponge egg fork glassbottle handtowel kettle knife ladle lettuce mug pan plate pot potato soapbar spatula spoon tomato",
    "sofa": "basketball book box cellphone cloth creditcard keychain laptop newspaper pillow remotecontrol",
    "stoveburner": "kettle pan pot",
    "tvstand": "tissuebox",
    "toaster": "",
    "toilet": "candle cloth dishsponge handtowel newspaper papertowel soapbar soapbottle spraybottle tissuebox toiletpaper toiletpaperroll",
    "toiletpaperhanger": "toiletpaper toiletpaperroll",
    "towelholder": "towel",
}
_CAN_HOLD_TEXT["diningtable"] = _CAN_HOLD_TEXT["countertop"]
_CAN_HOLD_TEXT["coffeetable"] = _CAN_HOLD_TEXT["countertop"]
_CAN_HOLD_TEXT["sidetable"] = _CAN_HOLD_TEXT["countertop"]

CAN_HOLD: dict[str, frozenset[str]] = {k: frozenset(v.split()) for k, v in _CAN_HOLD_TEXT.items()}

_FOOD = "fridge countertop diningtable microwave sinkbasin garbagecan cabinet"
_KITCHENWARE = "cabinet countertop diningtable sinkbasin shelf drawer"
_UTENSIL = "drawer countertop diningtable sinkbasin cabinet"
_SMALL = "desk sidetable dresser drawer shelf coffeetable countertop"
_BATH = "cabinet countertop toilet shelf sinkbasin garbagecan drawer"
_SOFT = "sofa armchair bed ottoman coffeetable"

TYPICAL: dict[str, list[str]] = {
    k: v.split()
    for k, v in {
        "apple": _FOOD, "bread": _FOOD, "egg": _FOOD, "lettuce": _FOOD, "potato": _FOOD,
        "tomato": _FOOD,
        "mug": "coffeemachine cabinet countertop shelf sinkbasin diningtable microwave",
        "cup": "cabinet countertop sinkbasin diningtable microwave fridge shelf",
        "bowl": _KITCHENWARE, "plate": _KITCHENWARE, "pan": "stoveburner cabinet countertop sinkbasin",
        "pot": "stoveburner cabinet countertop sinkbasin", "kettle": "stoveburner cabinet countertop",
        "fork": _UTENSIL, "spoon": _UTENSIL, "knife": _UTENSIL, "butterknife": _UTENSIL,
        "spatula": _UTENSIL, "ladle": _UTENSIL,
        "saltshaker": "countertop cabinet shelf diningtable drawer",
        "peppershaker": "countertop cabinet shelf diningtable drawer",
        "winebottle": "fridge countertop cabinet diningtable shelf",
        "glassbottle": "countertop cabinet fridge diningtable shelf",
        "dishsponge": "sinkbasin countertop cabinet drawer shelf",
        "soapbar": "bathtubbasin sinkbasin countertop toilet cabinet",
        "soapbottle": _BATH, "spraybottle": _BATH, "toiletpaper": "toiletpaperhanger toilet cabinet countertop",
        "candle": "shelf countertop cabinet toilet dresser",
        "cloth": "bathtubbasin countertop cabinet laundryhamper drawer",
        "handtowel": "handtowelholder countertop cabinet", "towel": "towelholder",
        "tissuebox": "sidetable dresser shelf desk coffeetable toilet cabinet",
        "plunger": "toilet cabinet", "papertowel": "countertop cabinet",
        "book": "desk bed shelf sidetable sofa drawer dresser",
        "cellphone": "desk bed sidetable dresser drawer sofa",
        "creditcard": "desk sidetable dresser drawer shelf armchair",
        "keychain": "sidetable dresser desk drawer shelf coffeetable",
        "remotecontrol": "coffeetable sofa sidetable armchair dresser drawer",
        "laptop": "desk bed sofa coffeetable diningtable", "pillow": _SOFT,
        "newspaper": "coffeetable sofa sidetable diningtable armchair",
        "alarmclock": "desk sidetable dresser shelf", "cd": _SMALL, "pen": _SMALL, "pencil": _SMALL,
        "watch": _SMALL, "statue": "shelf coffeetable sidetable dresser desk",
        "vase": "shelf sidetable coffeetable dresser cabinet",
        "desklamp": "desk sidetable dresser shelf", "floorlamp": "sidetable desk",
        "wateringcan": "shelf sidetable desk", "box": "coffeetable sofa shelf diningtable",
        "basketball": "bed", "baseballbat": "bed", "tennisracket": "bed",
    }.items()
}


def prior(obj_type: str, recep_type: str) -> float:
    """How plausible finding ``obj_type`` in/on ``recep_type`` seems (0..3)."""
    typical = TYPICAL.get(obj_type)
    if typical and recep_type in typical:
        return 3.0 - 1.5 * typical.index(recep_type) / max(len(typical), 1)
    holds = CAN_HOLD.get(recep_type)
    if holds is not None and obj_type in holds:
        return 1.2
    return 0.3


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
