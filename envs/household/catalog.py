"""What a household is made of: rooms, receptacle types, object types and their properties.

Everything here is plain data, so the vocabulary the agent sees stays small and regular (the
trainer builds its tiny tokenizer from environment text). Names follow ALFWorld's spelling:
one lower-case word per type ("sinkbasin", "remotecontrol"), instances numbered ("cabinet 2").
"""

from __future__ import annotations

import functools

TASK_TYPES = (
    "pick_and_place",
    "look_at_obj_in_light",
    "pick_clean_then_place",
    "pick_heat_then_place",
    "pick_cool_then_place",
    "pick_two_obj_and_place",
)

# Containers that start open or closed and must be opened before their contents can be seen,
# taken from or added to.
OPENABLE = frozenset({"cabinet", "drawer", "fridge", "microwave", "safe"})

# Receptacles things go "in" (the rest things go "on"): only changes the instruction wording.
PUT_IN = OPENABLE | {"garbagecan", "sinkbasin", "bathtubbasin", "laundryhamper"}

# Appliance receptacle type -> the state change it applies to a held object.
APPLIANCE_FOR = {
    "pick_clean_then_place": "sinkbasin",
    "pick_heat_then_place": "microwave",
    "pick_cool_then_place": "fridge",
}

# Room -> receptacle types with the most instances a room of that kind holds. The order is the
# order in which the room description lists them.
ROOM_RECEPTACLES: dict[str, dict[str, int]] = {
    "kitchen": {
        "cabinet": 6, "drawer": 4, "countertop": 3, "diningtable": 1, "fridge": 1, "microwave": 1,
        "sinkbasin": 1, "stoveburner": 4, "shelf": 2, "garbagecan": 1, "coffeemachine": 1, "toaster": 1,
    },
    "livingroom": {
        "sofa": 1, "armchair": 2, "coffeetable": 1, "sidetable": 2, "tvstand": 1, "shelf": 3, "drawer": 4,
        "cabinet": 3, "garbagecan": 1, "dresser": 1, "safe": 1,
    },
    "bedroom": {
        "bed": 1, "desk": 1, "dresser": 1, "sidetable": 2, "drawer": 6, "shelf": 4, "safe": 1,
        "garbagecan": 1, "laundryhamper": 1, "armchair": 1,
    },
    "bathroom": {
        "sinkbasin": 2, "bathtubbasin": 1, "toilet": 1, "countertop": 1, "cabinet": 4, "drawer": 4,
        "towelholder": 1, "handtowelholder": 1, "shelf": 2, "garbagecan": 1, "toiletpaperhanger": 1,
    },
}
ROOMS = tuple(ROOM_RECEPTACLES)

# Objects the agent can pick up, per room.
ROOM_OBJECTS: dict[str, tuple[str, ...]] = {
    "kitchen": (
        "apple", "tomato", "potato", "lettuce", "bread", "egg", "mug", "cup", "bowl", "plate", "pan", "pot",
        "knife", "butterknife", "fork", "spoon", "spatula", "ladle", "saltshaker", "peppershaker",
        "dishsponge", "winebottle", "kettle",
    ),
    "livingroom": (
        "book", "cellphone", "keychain", "creditcard", "remotecontrol", "pillow", "laptop", "newspaper",
        "statue", "vase", "watch", "box", "candle", "plate",
    ),
    "bedroom": (
        "book", "cellphone", "keychain", "creditcard", "alarmclock", "pillow", "laptop", "pen", "pencil",
        "cd", "mug", "bowl", "baseballbat", "tennisracket", "teddybear", "watch",
    ),
    "bathroom": (
        "soapbar", "soapbottle", "spraybottle", "toiletpaper", "candle", "cloth", "handtowel",
        "dishsponge", "tissuebox", "scrubbrush", "plunger",
    ),
}

CLEANABLE = frozenset({
    "apple", "tomato", "potato", "lettuce", "egg", "mug", "cup", "bowl", "plate", "pan", "pot", "knife",
    "butterknife", "fork", "spoon", "spatula", "ladle", "dishsponge", "soapbar", "cloth", "handtowel",
})
HEATABLE = frozenset({"apple", "tomato", "potato", "bread", "egg", "mug", "cup", "bowl", "plate"})
COOLABLE = frozenset({
    "apple", "tomato", "potato", "lettuce", "bread", "egg", "mug", "cup", "bowl", "plate", "pan", "pot",
    "winebottle",
})
# Which objects each task type can ask for (look tasks: any object of a lit room).
TASK_OBJECTS = {
    "pick_clean_then_place": CLEANABLE,
    "pick_heat_then_place": HEATABLE,
    "pick_cool_then_place": COOLABLE,
}

# Lamps are fixed objects (they cannot be taken) standing on a receptacle; `use` toggles them.
LAMP_HOSTS: dict[str, tuple[str, ...]] = {
    "desklamp": ("desk", "sidetable", "dresser"),
    "floorlamp": ("sidetable", "armchair", "sofa"),
}
ROOM_LAMPS: dict[str, tuple[str, ...]] = {
    "livingroom": ("desklamp", "floorlamp"),
    "bedroom": ("desklamp",),
}


def lamp_hosts_in(room: str, lamp: str) -> tuple[str, ...]:
    return tuple(t for t in LAMP_HOSTS[lamp] if t in ROOM_RECEPTACLES[room])


@functools.lru_cache(maxsize=None)  # pure in the constants above; hot (every sample and category)
def rooms_for(task_type: str) -> tuple[str, ...]:
    """Rooms in which a task type can be posed (they hold the appliance or lamp it needs)."""
    if task_type == "look_at_obj_in_light":
        return tuple(r for r in ROOMS if r in ROOM_LAMPS)
    appliance = APPLIANCE_FOR.get(task_type)
    if appliance is None:
        return ROOMS
    return tuple(r for r in ROOMS if appliance in ROOM_RECEPTACLES[r])


@functools.lru_cache(maxsize=None)  # pure in the constants above; hot (every sample and category)
def objects_for(task_type: str, room: str) -> tuple[str, ...]:
    allowed = TASK_OBJECTS.get(task_type)
    return tuple(o for o in ROOM_OBJECTS[room] if allowed is None or o in allowed)


@functools.lru_cache(maxsize=None)  # pure in the constants above; hot (every sample and category)
def targets_for(task_type: str, room: str) -> tuple[str, ...]:
    """Destination receptacle types of a placing task, or lamp types of a look task."""
    if task_type == "look_at_obj_in_light":
        return tuple(lamp for lamp in ROOM_LAMPS.get(room, ()) if lamp_hosts_in(room, lamp))
    appliance = APPLIANCE_FOR.get(task_type)
    # Heating an apple and putting it back into the microwave is not a task worth posing.
    return tuple(t for t in ROOM_RECEPTACLES[room] if t != appliance)


def article_list(names: list[str]) -> str:
    """ALFWorld's listing: "a apple 1", "a apple 1, and a mug 2", "a a 1, a b 1, and a c 1"."""
    if not names:
        return "nothing"
    if len(names) == 1:
        return f"a {names[0]}"
    return ", ".join(f"a {n}" for n in names[:-1]) + f", and a {names[-1]}"
