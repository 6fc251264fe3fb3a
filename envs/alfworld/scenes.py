"""The 120 floor plans alfworld ships, read into what a game generator needs.

alfworld's wheel holds, per floor plan, the object and receptacle types present
(`FloorPlanN-objects.json`) and one pose per receptacle instance (`FloorPlanN-openable.json`,
which despite its name lists every receptacle, openable or not). It holds no object placements:
games place objects themselves (games.py). A few receptacle types listed in `-objects.json`
have no pose (stove burners, toasters, coffee machines, most garbage cans); they get a
location of their own here, so the rooms keep the appliances a kitchen task may need.

Everything is data from `alfworld.gen.constants` and the layout files: which receptacle may
hold which object (VAL_RECEPTACLE_OBJECTS), which objects heat / cool / clean / toggle, which
classes open, which rooms suit which task type (GOALS_VALID), and ALFRED's split of floor
plans into train and test scenes.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from agentgym.errors import require

# ALFWorld's task types, in the names of its traj_data.json / goal library.
TASK_TYPES = (
    "pick_and_place_simple",
    "pick_two_obj_and_place",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
)
ROOM_OF_RANGE = (("Kitchen", 1, 30), ("LivingRoom", 201, 230), ("Bedroom", 301, 330), ("Bathroom", 401, 430))
LAMPS = ("DeskLamp", "FloorLamp")
# Where lamps stand. alfworld's tables give lamps no receptacle; its real games put desk lamps on
# tables and dressers and floor lamps on whatever receptacle THOR found them over.
LAMP_HOSTS = {
    "DeskLamp": ("SideTable", "Desk", "Dresser", "Shelf", "CoffeeTable", "DiningTable", "TVStand"),
    "FloorLamp": ("SideTable", "Desk", "Dresser", "Shelf", "CoffeeTable", "DiningTable", "TVStand", "ArmChair",
                  "Sofa", "Ottoman", "Bed", "CounterTop"),
}
# Receptacle types without a pose in the layout files get this many instances.
SYNTH_COUNT = {"StoveBurner": 4}


def constants():
    require("alfworld", "alfworld")
    import alfworld.gen.constants as c

    return c


def room_type(floorplan: int) -> str:
    for name, lo, hi in ROOM_OF_RANGE:
        if lo <= floorplan <= hi:
            return name
    raise ValueError(f"floorplan must be in 1-30, 201-230, 301-330 or 401-430, got {floorplan}")


def unseen_floorplans() -> tuple[int, ...]:
    """ALFRED's test floor plans (1-6 of each room type): heldout_unseen plays only these, and
    train / heldout never do."""
    return tuple(constants().TEST_SCENE_NUMBERS)


def seen_floorplans() -> tuple[int, ...]:
    return tuple(constants().TRAIN_SCENE_NUMBERS)


@dataclass(frozen=True)
class Receptacle:
    rid: str  # ALFRED id, e.g. "Cabinet|+00.68|+00.50|-02.20" or "Sink|-01.99|+01.14|-00.98|SinkBasin"
    rtype: str  # e.g. "Cabinet", "SinkBasin"
    loc: str  # e.g. "loc|0|-5|180|30" (grid units of 0.25 m, rotation, horizon), as ALFRED writes them


@dataclass(frozen=True)
class FloorPlan:
    number: int
    room: str
    receptacles: tuple[Receptacle, ...]
    object_types: tuple[str, ...]  # types present that can be placed in a receptacle (and lamps)


def _layout_dir() -> Path:
    require("alfworld", "alfworld")
    import alfworld

    return Path(alfworld.__file__).parent / "gen" / "layouts"


def _rtype(rid: str) -> str:
    parts = rid.split("|")
    return parts[4] if len(parts) > 4 else parts[0]


@functools.lru_cache(maxsize=None)
def floorplan(number: int) -> FloorPlan:
    c = constants()
    folder = _layout_dir()
    room = room_type(number)
    try:
        present = set(json.loads((folder / f"FloorPlan{number}-objects.json").read_text()))
        poses = json.loads((folder / f"FloorPlan{number}-openable.json").read_text())
    except FileNotFoundError:
        raise ValueError(f"alfworld ships no layout for FloorPlan{number}") from None
    static = c.RECEPTACLES - c.MOVABLE_RECEPTACLES_SET
    receptacles = []
    for rid, (x, z, rot, hor) in sorted(poses.items()):
        rtype = _rtype(rid)
        if rtype not in static:
            continue
        loc = f"loc|{round(x / 0.25)}|{round(z / 0.25)}|{int(rot)}|{int(hor)}"
        receptacles.append(Receptacle(rid, rtype, loc))
    # Receptacle types present but without a pose: a location of their own each.
    have = {r.rtype for r in receptacles}
    for k, rtype in enumerate(sorted((present & static) - have)):
        if rtype not in c.VAL_RECEPTACLE_OBJECTS:
            continue
        for i in range(SYNTH_COUNT.get(rtype, 1)):
            x, z = 40 + 4 * k, 40 + 4 * i  # off the real grid: never shared with a posed receptacle
            rid = f"{rtype}|+{x / 4:05.2f}|+00.90|+{z / 4:05.2f}"
            receptacles.append(Receptacle(rid, rtype, f"loc|{x}|{z}|0|30"))
    hosts = {r.rtype for r in receptacles}
    placeable = {o for objs in c.VAL_RECEPTACLE_OBJECTS.values() for o in objs}
    objects = sorted(t for t in present
                     if (t in placeable and t not in static and t in c.OBJECTS_SET and not t.endswith("Sliced")
                         and any(t in c.VAL_RECEPTACLE_OBJECTS.get(h, ()) for h in hosts))
                     or (t in LAMPS and hosts & set(LAMP_HOSTS[t])))
    return FloorPlan(number, room, tuple(receptacles), tuple(objects))


def all_floorplans() -> tuple[int, ...]:
    return tuple(sorted(int(p.name[len("FloorPlan"):].split("-")[0]) for p in _layout_dir().glob("FloorPlan*-objects.json")))
