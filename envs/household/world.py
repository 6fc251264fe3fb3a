"""The household world: a layout generated from a TaskSpec, and the mutable state played in it.

`build_layout(spec)` turns a task's params and seed into a fixed `Layout` (receptacles, objects,
where everything starts, the goal). A `World` holds the state that actions change: where the
agent is, what it holds, where each object is, which containers are open, and object states
(clean / hot / cool, lamp on). The state is a few small lists, so a step is cheap and the
canonical key (`World.key()`) is a tuple of ints that equal states share whatever the path.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Mapping

from agentgym.envs.household.catalog import (
    APPLIANCE_FOR, CLEANABLE, COOLABLE, HEATABLE, OPENABLE, PUT_IN, ROOM_OBJECTS, ROOM_RECEPTACLES, TASK_TYPES,
    article_list, lamp_hosts_in, objects_for, rooms_for, targets_for,
)

# Object state bits.
CLEAN, HOT, COOL, ON = 1, 2, 4, 8
STATE_WORDS = ((CLEAN, "clean"), (HOT, "hot"), (COOL, "cool"))
APPLIANCE_EFFECT = {"sinkbasin": CLEAN, "microwave": HOT, "fridge": COOL}
EFFECT_OF_TASK = {"pick_clean_then_place": CLEAN, "pick_heat_then_place": HOT, "pick_cool_then_place": COOL}

# Sentinels are 255 rather than -1 so that the whole state packs into a bytes key (layouts
# have far fewer than 255 receptacles and objects).
MIDDLE = 255  # agent location before it goes anywhere
HELD = 255  # object location while the agent carries it
NOTHING = 255  # held object when the hands are empty

LIMITS = {"num_receptacles": (3, 16), "num_distractors": (0, 12)}
DEFAULTS = {"num_receptacles": 6, "num_distractors": 2, "closed_fraction": 0.0, "goal_visible": True}

_INSTRUCTIONS = {
    "pick_and_place": ("put a {o} {p} {r}.", "put some {o} {p} {r}."),
    "pick_clean_then_place": ("put a clean {o} {p} {r}.", "clean some {o} and put it {p} {r}."),
    "pick_heat_then_place": ("put a hot {o} {p} {r}.", "heat some {o} and put it {p} {r}."),
    "pick_cool_then_place": ("put a cool {o} {p} {r}.", "cool some {o} and put it {p} {r}."),
    "pick_two_obj_and_place": ("put two {o} {p} {r}.", "find two {o} and put them {p} {r}."),
    "look_at_obj_in_light": ("look at {o} under the {r}.", "examine the {o} with the {r}."),
}


def instruction_for(task_type: str, obj: str, target: str, seed: int) -> str:
    template = _INSTRUCTIONS[task_type][seed % 2]
    return template.format(o=obj, r=target, p="in" if target in PUT_IN else "on")


def check_params(params: Mapping[str, Any]) -> dict:
    """The params with defaults filled in; ValueError naming the problem for an invalid task."""
    p = dict(DEFAULTS, **params)
    task_type = p.get("task_type")
    if task_type not in TASK_TYPES:
        raise ValueError(f"task_type must be one of {', '.join(TASK_TYPES)}, got {task_type!r}")
    room = p.get("room")
    if room not in rooms_for(task_type):
        raise ValueError(f"{task_type} tasks happen in {', '.join(rooms_for(task_type))}, got room {room!r}")
    if p.get("object") not in objects_for(task_type, room):
        raise ValueError(f"object {p.get('object')!r} cannot be used for {task_type} in the {room}")
    key = "lamp" if task_type == "look_at_obj_in_light" else "receptacle"
    if p.get(key) not in targets_for(task_type, room):
        raise ValueError(f"{key} {p.get(key)!r} is not available for {task_type} in the {room}")
    unknown = set(p) - set(DEFAULTS) - {"task_type", "room", "object", key}
    if unknown:
        raise ValueError(f"unknown params {sorted(unknown)} for a {task_type} task")
    for name, (low, high) in LIMITS.items():
        value = p[name]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    fraction = p["closed_fraction"]
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not 0.0 <= fraction <= 1.0:
        raise ValueError(f"closed_fraction must be a number in [0, 1], got {fraction!r}")
    if not isinstance(p["goal_visible"], bool):
        raise ValueError(f"goal_visible must be true or false, got {p['goal_visible']!r}")
    return p


@dataclass
class Layout:
    """Everything about a task that no action changes, plus its per-state caches."""

    task_id: str
    task_type: str
    goal_type: str
    target: str  # destination receptacle type, or the lamp type of a look task
    instruction: str
    rec_names: list[str]
    rec_types: list[str]
    rec_openable: list[bool]
    obj_names: list[str]
    obj_types: list[str]
    obj_is_lamp: list[bool]
    obj_effects: list[int]  # state bits the object can take (CLEAN | HOT | COOL)
    init_loc: list[int]
    init_open: list[int]
    goal_objs: tuple[int, ...]
    dest_recs: frozenset[int]
    lamp: int  # object index of the lamp of a look task, else -1
    room_line: str = ""
    # canonical state key -> StateEntry (admissible actions, anchor, progress); filled lazily
    states: dict = field(default_factory=dict, repr=False)
    moves: dict = field(default_factory=dict, repr=False)  # location -> location-only commands
    plan: list[str] | None = field(default=None, repr=False)


def build_layout(spec) -> Layout:
    """Generate the household of `spec` (deterministic: `random.Random` is stable across Python
    versions, so the same spec gives the same household everywhere)."""
    p = check_params(spec.params)
    rng = random.Random(spec.seed)
    task_type, room, goal_type = p["task_type"], p["room"], p["object"]
    look = task_type == "look_at_obj_in_light"
    target = p["lamp"] if look else p["receptacle"]
    dest = None if look else target

    capacity = dict(ROOM_RECEPTACLES[room])
    types: list[str] = []

    def add(t: str) -> None:
        types.append(t)
        capacity[t] -= 1

    host_type = rng.choice(lamp_hosts_in(room, target)) if look else None
    add(host_type if look else dest)
    appliance = APPLIANCE_FOR.get(task_type)
    if appliance is not None:
        add(appliance)
    # Where the (first) goal object starts: never a destination, or the task would start solved.
    start_type = rng.choice([t for t in ROOM_RECEPTACLES[room] if t != dest])
    if start_type not in types:
        add(start_type)
    while len(types) < p["num_receptacles"]:
        add(rng.choice([t for t, left in capacity.items() if left > 0]))
    order = {t: i for i, t in enumerate(ROOM_RECEPTACLES[room])}
    types.sort(key=order.__getitem__)
    counts: dict[str, int] = {}
    rec_names = []
    for t in types:
        counts[t] = counts.get(t, 0) + 1
        rec_names.append(f"{t} {counts[t]}")
    openable = [t in OPENABLE for t in types]

    open_flags = [1] * len(types)
    containers = [i for i, o in enumerate(openable) if o]
    for i in rng.sample(containers, round(p["closed_fraction"] * len(containers))):
        open_flags[i] = 0

    not_dest = [i for i, t in enumerate(types) if t != dest]
    # (type, receptacle index, is_lamp) of every object, shuffled below so that the goal object
    # is not always listed first.
    objects: list[tuple[str, int, bool]] = []
    first_start = rng.choice([i for i, t in enumerate(types) if t == start_type])
    objects.append((goal_type, first_start, False))
    if task_type == "pick_two_obj_and_place":
        objects.append((goal_type, rng.choice(not_dest), False))
    if p["goal_visible"]:
        for _, r, _ in objects:
            open_flags[r] = 1
    if look:
        hosts = [i for i, t in enumerate(types) if t == host_type]
        objects.append((target, rng.choice(hosts), True))
    distractor_types = [o for o in ROOM_OBJECTS[room] if o != goal_type]
    for _ in range(p["num_distractors"]):
        objects.append((rng.choice(distractor_types), rng.randrange(len(types)), False))
    rng.shuffle(objects)

    obj_counts: dict[str, int] = {}
    obj_names = []
    for t, _, _ in objects:
        obj_counts[t] = obj_counts.get(t, 0) + 1
        obj_names.append(f"{t} {obj_counts[t]}")
    obj_types = [t for t, _, _ in objects]
    effects = [(CLEAN if t in CLEANABLE else 0) | (HOT if t in HEATABLE else 0) | (COOL if t in COOLABLE else 0)
               for t in obj_types]
    lamp = next((i for i, (_, _, is_lamp) in enumerate(objects) if is_lamp), -1)
    layout = Layout(
        task_id=spec.task_id,
        task_type=task_type,
        goal_type=goal_type,
        target=target,
        instruction=instruction_for(task_type, goal_type, target, spec.seed),
        rec_names=rec_names,
        rec_types=types,
        rec_openable=openable,
        obj_names=obj_names,
        obj_types=obj_types,
        obj_is_lamp=[is_lamp for _, _, is_lamp in objects],
        obj_effects=[0 if is_lamp else e for e, (_, _, is_lamp) in zip(effects, objects)],
        init_loc=[r for _, r, _ in objects],
        init_open=open_flags,
        goal_objs=tuple(i for i, t in enumerate(obj_types) if t == goal_type),
        dest_recs=frozenset(i for i, t in enumerate(types) if t == dest),
        lamp=lamp,
    )
    layout.room_line = (
        "You are in the middle of a room. Looking quickly around you, you see " + article_list(rec_names) + "."
    )
    return layout


_LAYOUTS: OrderedDict[str, Layout] = OrderedDict()
_MAX_LAYOUTS = 4096


def get_layout(spec) -> Layout:
    """The (cached) layout of a spec: resets of a task already seen skip generation."""
    layout = _LAYOUTS.get(spec.task_id)
    if layout is None:
        layout = build_layout(spec)
        _LAYOUTS[spec.task_id] = layout
        if len(_LAYOUTS) > _MAX_LAYOUTS:
            _LAYOUTS.popitem(last=False)
    return layout


def clear_state_caches() -> None:
    """Forget the per-state caches of every cached layout (they are rebuilt on demand)."""
    for layout in _LAYOUTS.values():
        layout.states.clear()


class World:
    """The mutable state of one episode and the effects of actions on it.

    Methods that act assume the action was admissible (commands.py only offers those), so
    they do no checks of their own."""

    __slots__ = ("layout", "loc", "held", "obj_loc", "rec_open", "obj_flags")

    def __init__(self, layout: Layout):
        self.layout = layout
        self.loc = MIDDLE
        self.held = NOTHING
        self.obj_loc = list(layout.init_loc)
        self.rec_open = list(layout.init_open)
        self.obj_flags = [0] * len(layout.obj_names)

    def key(self) -> bytes:
        """The canonical state packed into bytes (agent location, held object, object
        locations, open flags, object state bits): equal keys mean equal states, whatever led
        there. Compact and hashable, and stable across Python versions for the anchor hash."""
        return bytes((self.loc, self.held, *self.obj_loc, *self.rec_open, *self.obj_flags))

    def copy(self) -> "World":
        other = World.__new__(World)
        other.layout, other.loc, other.held = self.layout, self.loc, self.held
        other.obj_loc, other.rec_open, other.obj_flags = list(self.obj_loc), list(self.rec_open), list(self.obj_flags)
        return other

    # --- what the agent perceives ---------------------------------------------------------
    def contents(self, r: int) -> list[int]:
        return [o for o, where in enumerate(self.obj_loc) if where == r]

    def accessible(self, r: int) -> bool:
        return self.rec_open[r] == 1

    def describe_receptacle(self, r: int) -> str:
        lay = self.layout
        name = lay.rec_names[r]
        if lay.rec_openable[r]:
            if not self.rec_open[r]:
                return f"The {name} is closed."
            return f"The {name} is open. In it, you see {self._listing(r)}."
        return f"On the {name}, you see {self._listing(r)}."

    def _listing(self, r: int) -> str:
        names = self.layout.obj_names
        return article_list([names[o] for o in self.contents(r)])

    def describe_object(self, o: int) -> str:
        lay = self.layout
        if lay.obj_is_lamp[o]:
            return f"The {lay.obj_names[o]} is {'on' if self.obj_flags[o] & ON else 'off'}."
        words = [w for bit, w in STATE_WORDS if self.obj_flags[o] & bit]
        if not words:
            return f"There's nothing special about {lay.obj_names[o]}."
        return f"This is a {' and '.join(words)} {lay.obj_names[o]}."

    def look(self) -> str:
        if self.loc == MIDDLE:
            return self.layout.room_line
        return f"You are facing the {self.layout.rec_names[self.loc]}. Next to it, you see nothing."

    def inventory(self) -> str:
        if self.held == NOTHING:
            return "You are not carrying anything."
        return f"You are carrying: a {self.layout.obj_names[self.held]}."

    # --- actions --------------------------------------------------------------------------
    def go_to(self, r: int) -> str:
        self.loc = r
        return f"You arrive at {self.layout.rec_names[r]}. {self.describe_receptacle(r)}"

    def open(self, r: int) -> str:
        self.rec_open[r] = 1
        name = self.layout.rec_names[r]
        return f"You open the {name}. The {name} is open. In it, you see {self._listing(r)}."

    def close(self, r: int) -> str:
        self.rec_open[r] = 0
        return f"You close the {self.layout.rec_names[r]}."

    def take(self, o: int, r: int) -> str:
        self.obj_loc[o] = HELD
        self.held = o
        return f"You pick up the {self.layout.obj_names[o]} from the {self.layout.rec_names[r]}."

    def move(self, o: int, r: int) -> str:
        self.obj_loc[o] = r
        self.held = NOTHING
        return f"You move the {self.layout.obj_names[o]} to the {self.layout.rec_names[r]}."

    def treat(self, o: int, r: int) -> str:
        """heat / cool / clean the held object with the appliance receptacle r."""
        lay = self.layout
        bit = APPLIANCE_EFFECT[lay.rec_types[r]]
        flags = self.obj_flags[o] | bit
        if bit == HOT:  # heating undoes cooling and the other way round
            flags &= ~COOL
        elif bit == COOL:
            flags &= ~HOT
        self.obj_flags[o] = flags
        verb = {CLEAN: "clean", HOT: "heat", COOL: "cool"}[bit]
        return f"You {verb} the {lay.obj_names[o]} using the {lay.rec_names[r]}."

    def use(self, lamp: int) -> str:
        self.obj_flags[lamp] ^= ON
        state = "on" if self.obj_flags[lamp] & ON else "off"
        return f"You turn {state} the {self.layout.obj_names[lamp]}."
