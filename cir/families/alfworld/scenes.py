"""Room layouts and object placements for generated ALFWorld tasks.

ALFWorld's data set comes from 120 AI2-THOR floor plans (30 per room kind). We cannot ship
those, so a *layout* here is a procedurally drawn receptacle configuration for one scene
number, using ALFWorld's own constants (which receptacle types exist, which open, which hold
which objects). A layout depends only on ``(layout_seed, room, scene)``, so every invocation
sees the same pool: train and valid_seen draw scenes from one range, valid_unseen from a
disjoint one, as in ALFWorld.

Everything here is deterministic: random draws use ``random.Random`` seeded from a SHA-256
of the inputs (never ``hash()``), and every collection is sorted before it is drawn from.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

from alfworld.gen import constants as C

from cir.util.errors import CirValueError

# Room kinds, as named in the manifest, and ALFRED's scene-number base for each
# (ALFRED: Kitchen 1-30, LivingRoom 201-230, Bedroom 301-330, Bathroom 401-430).
ROOMS: tuple[str, ...] = ("kitchen", "livingroom", "bedroom", "bathroom")
ROOM_ALFRED_NAME = {"kitchen": "Kitchen", "livingroom": "LivingRoom", "bedroom": "Bedroom",
                    "bathroom": "Bathroom"}
ROOM_SCENE_BASE = {"kitchen": 0, "livingroom": 200, "bedroom": 300, "bathroom": 400}
SCENES_PER_ROOM = 30
# Scene offsets 1..24 are "seen" (train, valid_seen); 25..30 are "unseen" (valid_unseen).
SEEN_OFFSETS = tuple(range(1, 25))
UNSEEN_OFFSETS = tuple(range(25, SCENES_PER_ROOM + 1))

MIN_RECEPTACLES = 8
MAX_RECEPTACLES = 25
MIN_OBJECTS = 10
MAX_OBJECTS = 40

# Receptacle catalogue per room kind: (ALFRED type, min count, max count). Counts follow the
# real ALFWorld rooms (many cabinets and drawers in kitchens, a bed and drawers in bedrooms...).
ROOM_RECEPTACLES: dict[str, tuple[tuple[str, int, int], ...]] = {
    "kitchen": (
        ("Cabinet", 3, 9), ("CoffeeMachine", 1, 1), ("CounterTop", 1, 3), ("DiningTable", 0, 1),
        ("Drawer", 1, 5), ("Fridge", 1, 1), ("GarbageCan", 1, 1), ("Microwave", 1, 1),
        ("Shelf", 0, 3), ("SideTable", 0, 1), ("SinkBasin", 1, 1), ("StoveBurner", 2, 4),
        ("Toaster", 0, 1),
    ),
    "livingroom": (
        ("ArmChair", 0, 2), ("Cabinet", 0, 4), ("CoffeeTable", 1, 2), ("DiningTable", 0, 1),
        ("Drawer", 0, 6), ("Dresser", 0, 1), ("GarbageCan", 1, 1), ("Ottoman", 0, 1),
        ("Safe", 0, 1), ("Shelf", 0, 6), ("SideTable", 1, 3), ("Sofa", 1, 1), ("TVStand", 0, 1),
    ),
    "bedroom": (
        ("ArmChair", 0, 1), ("Bed", 1, 1), ("Cabinet", 0, 2), ("Desk", 0, 1), ("Drawer", 2, 8),
        ("Dresser", 0, 1), ("GarbageCan", 1, 1), ("LaundryHamper", 0, 1), ("Safe", 0, 1),
        ("Shelf", 0, 6), ("SideTable", 1, 2),
    ),
    "bathroom": (
        ("BathtubBasin", 0, 1), ("Cabinet", 2, 4), ("Cart", 0, 1), ("CounterTop", 1, 1),
        ("Drawer", 0, 4), ("Dresser", 0, 1), ("GarbageCan", 1, 1), ("HandTowelHolder", 0, 2),
        ("Shelf", 0, 3), ("SinkBasin", 1, 2), ("Toilet", 1, 1), ("ToiletPaperHanger", 1, 1),
        ("TowelHolder", 0, 1),
    ),
}

# Objects that occur in each room kind (ALFRED object classes; all appear in
# VAL_RECEPTACLE_OBJECTS, so each has receptacles that can hold it).
ROOM_OBJECTS: dict[str, tuple[str, ...]] = {
    "kitchen": (
        "Apple", "Book", "Bowl", "Bread", "ButterKnife", "CellPhone", "CreditCard", "Cup",
        "DishSponge", "Egg", "Fork", "Glassbottle", "Kettle", "Knife", "Ladle", "Lettuce", "Mug",
        "Pan", "PepperShaker", "Plate", "Pot", "Potato", "SaltShaker", "SoapBottle", "Spatula",
        "Spoon", "Statue", "Tomato", "Vase", "WineBottle",
    ),
    "livingroom": (
        "Book", "Bowl", "Box", "CellPhone", "CreditCard", "KeyChain", "Laptop", "Newspaper",
        "Pillow", "Plate", "RemoteControl", "Statue", "TissueBox", "Vase", "Watch", "WateringCan",
    ),
    "bedroom": (
        "AlarmClock", "BaseballBat", "BasketBall", "Book", "Bowl", "Box", "CD", "CellPhone",
        "Cloth", "CreditCard", "KeyChain", "Laptop", "Mug", "Pen", "Pencil", "Pillow",
        "TennisRacket", "TissueBox", "Watch",
    ),
    "bathroom": (
        "Candle", "Cloth", "DishSponge", "HandTowel", "Plunger", "SoapBar", "SoapBottle",
        "SprayBottle", "TissueBox", "ToiletPaper", "Towel",
    ),
}

# Groups of easily confused object classes: distractors for a target are drawn from its group.
SIMILAR_GROUPS: tuple[tuple[str, ...], ...] = (
    ("Apple", "Potato", "Tomato", "Egg"),
    ("Bread", "Lettuce"),
    ("ButterKnife", "Knife", "Fork", "Spoon", "Spatula", "Ladle"),
    ("Cup", "Mug", "Bowl", "Glassbottle"),
    ("Pan", "Pot", "Kettle", "Plate"),
    ("PepperShaker", "SaltShaker", "SoapBottle"),
    ("WineBottle", "Glassbottle", "SoapBottle"),
    ("CellPhone", "CreditCard", "RemoteControl", "KeyChain", "Watch"),
    ("Book", "Newspaper", "Laptop", "Box"),
    ("Pen", "Pencil", "CD", "AlarmClock"),
    ("BaseballBat", "BasketBall", "TennisRacket", "Pillow"),
    ("Statue", "Vase", "TissueBox", "WateringCan"),
    ("Cloth", "HandTowel", "Towel", "DishSponge"),
    ("SoapBar", "SoapBottle", "SprayBottle", "Candle"),
    ("ToiletPaper", "TissueBox", "Plunger"),
)

# Lamps for look_at_obj_in_light stand on these receptacles.
LAMP_RECEPTACLES: tuple[str, ...] = ("Desk", "Dresser", "SideTable")
TOGGLE_TARGETS: tuple[str, ...] = ("DeskLamp",)
# Receptacles that hold a single item in the real scenes.
SINGLE_SLOT = frozenset({"CoffeeMachine", "HandTowelHolder", "StoveBurner", "Toaster",
                         "ToiletPaperHanger", "TowelHolder"})
MAX_PER_RECEPTACLE = 6
NOT_PICKUPABLE = frozenset({"DeskLamp", "FloorLamp"})

OPENABLE = frozenset(C.OPENABLE_CLASS_LIST)
MOVABLE_RECEPTACLES = frozenset(C.MOVABLE_RECEPTACLES)


def can_contain(rtype: str, otype: str) -> bool:
    """ALFWorld's rule (VAL_RECEPTACLE_OBJECTS) for whether ``rtype`` may hold ``otype``."""
    return otype in C.VAL_RECEPTACLE_OBJECTS.get(rtype, ())


def action_class(otype: str, prop: str) -> bool:
    """Whether ``otype`` is in ALFWorld's VAL_ACTION_OBJECTS[prop] (Heatable, Coolable, ...)."""
    return otype in C.VAL_ACTION_OBJECTS[prop]


def derive_seed(*parts: object) -> int:
    """A 64-bit seed from any parts, stable across processes and PYTHONHASHSEED."""
    text = "|".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def rng_for(*parts: object) -> random.Random:
    """A private ``random.Random`` for the given parts (never the global one)."""
    return random.Random(derive_seed(*parts))


def _coord(value: float) -> str:
    """ALFRED's coordinate text, e.g. ``+01.23`` / ``-00.45``."""
    return f"{value:+06.2f}"


def mangle(alfred_id: str) -> str:
    """ALFRED object id -> PDDL name (``Mug|+01.23|...`` -> ``Mug_bar__plus_01_dot_23...``)."""
    out = alfred_id.replace("-", "_minus_").replace("+", "_plus_").replace(".", "_dot_")
    return out.replace(",", "_comma_").replace("|", "_bar_")


def alfred_object_id(otype: str, xyz: tuple[float, float, float]) -> str:
    """PDDL id for an object or receptacle of ALFRED class ``otype`` at ``xyz``.

    Sinks and bathtubs are named like ALFRED's basins (``Sink|..|SinkBasin``) so that the
    ALFWorld demangler prints ``sinkbasin 1``.
    """
    coords = "|".join(_coord(v) for v in xyz)
    if otype == "SinkBasin":
        return mangle(f"Sink|{coords}|SinkBasin")
    if otype == "BathtubBasin":
        return mangle(f"Bathtub|{coords}|BathtubBasin")
    return mangle(f"{otype}|{coords}")


def location_id(x: int, z: int, rot: int, horizon: int) -> str:
    """ALFWorld location name ``loc|x|z|rot|horizon`` in PDDL form."""
    return mangle(f"loc|{x}|{z}|{rot}|{horizon}")


@dataclass(frozen=True)
class Receptacle:
    """A static receptacle of a layout at its own location."""

    rtype: str
    rid: str
    location: str

    @property
    def openable(self) -> bool:
        return self.rtype in OPENABLE


@dataclass(frozen=True)
class Layout:
    """A room's receptacle configuration (one ALFRED-style scene number)."""

    room: str
    scene: int
    receptacles: tuple[Receptacle, ...]
    start: str  # agent start location, holding no receptacle

    @property
    def rtypes(self) -> tuple[str, ...]:
        return tuple(sorted({r.rtype for r in self.receptacles}))

    def of_type(self, rtype: str) -> tuple[Receptacle, ...]:
        return tuple(r for r in self.receptacles if r.rtype == rtype)


@dataclass(frozen=True)
class PlacedObject:
    """An object instance and the receptacle it starts in."""

    otype: str
    oid: str
    receptacle: str  # receptacle id


def scene_number(room: str, offset: int) -> int:
    """ALFRED scene number of a room kind's ``offset``-th layout (1-based)."""
    return ROOM_SCENE_BASE[room] + offset


def scene_pool(room: str, unseen: bool) -> tuple[int, ...]:
    """Scene numbers a split may use: seen (train/valid_seen) or unseen (valid_unseen)."""
    offsets = UNSEEN_OFFSETS if unseen else SEEN_OFFSETS
    return tuple(scene_number(room, o) for o in offsets)


class _Coords:
    """Draws distinct 3D positions and grid locations within one scene."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used_xyz: set[tuple[str, str, str]] = set()
        self.used_loc: set[tuple[int, int, int, int]] = set()

    def xyz(self) -> tuple[float, float, float]:
        while True:
            p = (round(self.rng.uniform(-4.0, 4.0), 2), round(self.rng.uniform(0.0, 2.2), 2),
                 round(self.rng.uniform(-4.0, 4.0), 2))
            key = tuple(_coord(v) for v in p)
            if key not in self.used_xyz:
                self.used_xyz.add(key)  # type: ignore[arg-type]
                return p

    def loc(self) -> str:
        while True:
            q = (self.rng.randint(-12, 12), self.rng.randint(-12, 12), self.rng.randint(0, 3),
                 self.rng.choice((0, 15, 30, 45, 60)))
            if q not in self.used_loc:
                self.used_loc.add(q)
                return location_id(*q)


def _receptacle_counts(room: str, rng: random.Random) -> dict[str, int]:
    catalogue = ROOM_RECEPTACLES[room]
    counts = {t: rng.randint(lo, hi) for t, lo, hi in catalogue}
    bounds = {t: (lo, hi) for t, lo, hi in catalogue}
    types = sorted(counts)
    while sum(counts.values()) > MAX_RECEPTACLES:
        shrinkable = [t for t in types if counts[t] > bounds[t][0]]
        counts[max(shrinkable, key=lambda t: (counts[t], t))] -= 1
    while sum(counts.values()) < MIN_RECEPTACLES:
        growable = [t for t in types if counts[t] < bounds[t][1]]
        counts[rng.choice(growable)] += 1
    # Rooms where lamps occur need a place for the lamp.
    if room in ("livingroom", "bedroom") and not any(counts.get(t, 0) for t in LAMP_RECEPTACLES):
        counts["SideTable"] = 1
    return {t: c for t, c in counts.items() if c > 0}


def make_layout(room: str, scene: int, layout_seed: int = 0) -> Layout:
    """The receptacle layout of ``scene`` (deterministic in ``layout_seed, room, scene``)."""
    if room not in ROOM_RECEPTACLES:
        raise CirValueError(f"unknown room kind {room!r}; expected one of {', '.join(ROOMS)}")
    rng = rng_for("layout", layout_seed, room, scene)
    counts = _receptacle_counts(room, rng)
    coords = _Coords(rng)
    receptacles = []
    for rtype in sorted(counts):
        for _ in range(counts[rtype]):
            receptacles.append(Receptacle(rtype, alfred_object_id(rtype, coords.xyz()), coords.loc()))
    start = coords.loc()
    return Layout(room, scene, tuple(sorted(receptacles, key=lambda r: r.rid)), start)


def similar_types(otype: str) -> tuple[str, ...]:
    """Object classes easily confused with ``otype`` (excluding itself), sorted."""
    out = {t for group in SIMILAR_GROUPS if otype in group for t in group}
    out.discard(otype)
    return tuple(sorted(out))


def pick(rng: random.Random, items: Sequence[str]) -> str:
    """``rng.choice`` over a sorted copy, so set-derived inputs stay deterministic."""
    return rng.choice(sorted(items))
