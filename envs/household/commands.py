"""The command grammar: which commands make sense in a state, and reading what the agent typed.

For every state the agent reaches, `entry_for(world)` builds (once, then caches in the layout)
a table from each admissible command's exact text to the operation it performs, the anchor
hash and the progress of that state. Stepping with a well-formed command is then one dict
lookup; anything else goes through `normalize` (case, spacing, "put X in Y" aliases) before
it is declared invalid.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from agentgym.envs.household.goals import evaluate
from agentgym.envs.household.world import (
    APPLIANCE_EFFECT, CLEAN, COOL, HOT, MIDDLE, NOTHING, World, clear_state_caches,
)

GO, OPEN, CLOSE, TAKE, MOVE, TREAT, USE, EXAMINE_REC, EXAMINE_OBJ, LOOK, INVENTORY = range(11)
TREAT_VERB = {CLEAN: "clean", HOT: "heat", COOL: "cool"}

GRAMMAR = (
    "go to X, open X, close X, take X from Y, move X to Y, heat X with Y, cool X with Y, "
    "clean X with Y, use X, examine X, look, inventory"
)
VERBS = frozenset({"go", "goto", "open", "close", "take", "move", "put", "heat", "cool", "clean", "use", "examine",
                   "look", "inventory"})
NOTHING_HAPPENS = "Nothing happens."
UNKNOWN_COMMAND = f"Nothing happens. That is not a command. The commands are: {GRAMMAR}."

_PUT = re.compile(r"^(?:put|place|move) (.+?) (?:in|on|into|onto|to|in/on) (.+)$")
# Cached states cost ~1.2 kB each: bound them per layout and per process (~120 MB), so that
# long training runs over thousands of tasks do not grow memory without limit.
_MAX_STATES_PER_LAYOUT = 20_000
_MAX_STATES = 100_000
_cached = 0


@dataclass(slots=True)
class StateEntry:
    anchor: str
    actions: list[str]  # admissible commands, sorted
    table: dict[str, tuple[int, int, int]]  # command -> (op, a, b)
    progress: float
    success: bool


def entry_for(world: World) -> StateEntry:
    key = world.key()
    states = world.layout.states
    entry = states.get(key)
    if entry is None:
        global _cached
        _cached += 1
        if _cached > _MAX_STATES:
            _cached = 0
            clear_state_caches()
        if len(states) >= _MAX_STATES_PER_LAYOUT:
            states.clear()
        table = admissible_table(world)
        progress, success = evaluate(world)
        digest = hashlib.blake2b(key, digest_size=8, key=world.layout.task_id.encode()).hexdigest()
        entry = StateEntry(digest, sorted(table), table, progress, success)
        states[key] = entry
    return entry


def admissible_table(world: World) -> dict[str, tuple[int, int, int]]:
    """ALFWorld-style admissible commands: only those that do something now."""
    lay = world.layout
    names, objs = lay.rec_names, lay.obj_names
    here, held = world.loc, world.held
    table = dict(_moves_from(lay, here))
    if held != NOTHING:
        table["examine " + objs[held]] = (EXAMINE_OBJ, held, 0)
    if here == MIDDLE:
        return table
    name = names[here]
    if lay.rec_openable[here]:
        if world.rec_open[here]:
            table["close " + name] = (CLOSE, here, 0)
        else:
            table["open " + name] = (OPEN, here, 0)
    if world.rec_open[here]:
        for o, where in enumerate(world.obj_loc):
            if where != here:
                continue
            if lay.obj_is_lamp[o]:
                table["use " + objs[o]] = (USE, o, 0)
            elif held == NOTHING:  # one object at a time, as in ALFWorld
                table[f"take {objs[o]} from {name}"] = (TAKE, o, here)
        if held != NOTHING:
            table[f"move {objs[held]} to {name}"] = (MOVE, held, here)
    effect = APPLIANCE_EFFECT.get(lay.rec_types[here])
    if held != NOTHING and effect is not None and lay.obj_effects[held] & effect:
        table[f"{TREAT_VERB[effect]} {objs[held]} with {name}"] = (TREAT, held, here)
    return table


def _moves_from(lay, here: int) -> dict[str, tuple[int, int, int]]:
    """The commands available at a location whatever the rest of the state (go to elsewhere,
    look, inventory, examine the receptacle), built once per layout and location."""
    cache = lay.moves
    table = cache.get(here)
    if table is None:
        table = {"look": (LOOK, 0, 0), "inventory": (INVENTORY, 0, 0)}
        for r, name in enumerate(lay.rec_names):
            if r != here:
                table["go to " + name] = (GO, r, 0)
        if here != MIDDLE:
            table["examine " + lay.rec_names[here]] = (EXAMINE_REC, here, 0)
        cache[here] = table
    return table


def normalize(text: str) -> str:
    """Lower case, single spaces, no final period; "put X in Y" and "goto X" as their canonical forms."""
    text = " ".join(text.lower().split()).rstrip(".!").rstrip()
    if text.startswith(("put ", "place ", "move ")):
        match = _PUT.match(text)
        if match:
            return f"move {match.group(1)} to {match.group(2)}"
    elif text.startswith("goto "):
        return "go to " + text[5:]
    return text


def lookup(entry: StateEntry, world: World, action: str) -> tuple[tuple[int, int, int] | None, str]:
    """The operation `action` names in this state (or None) and the normalized text."""
    op = entry.table.get(action)
    if op is not None:
        return op, action
    text = normalize(action)
    op = entry.table.get(text)
    if op is None and text.startswith("take ") and " from " not in text and world.loc != MIDDLE:
        # "take apple 1" at the countertop means "take apple 1 from countertop 1"
        op = entry.table.get(f"{text} from {world.layout.rec_names[world.loc]}")
    return op, text


def invalid_message(normalized: str) -> str:
    """"Nothing happens." for a command that cannot be done now (ALFWorld's wording); the
    grammar as a hint for text that is no command at all."""
    first = normalized.split(" ", 1)[0] if normalized else ""
    return NOTHING_HAPPENS if first in VERBS else UNKNOWN_COMMAND


def execute(world: World, op: tuple[int, int, int]) -> str:
    """Apply an admissible operation; returns the observation."""
    code, a, b = op
    if code == GO:
        return world.go_to(a)
    if code == TAKE:
        return world.take(a, b)
    if code == MOVE:
        return world.move(a, b)
    if code == OPEN:
        return world.open(a)
    if code == CLOSE:
        return world.close(a)
    if code == TREAT:
        return world.treat(a, b)
    if code == USE:
        return world.use(a)
    if code == EXAMINE_REC:
        return world.describe_receptacle(a)
    if code == EXAMINE_OBJ:
        return world.describe_object(a)
    if code == LOOK:
        return world.look()
    return world.inventory()


CHANGES_STATE = frozenset({GO, TAKE, MOVE, OPEN, CLOSE, TREAT, USE})
