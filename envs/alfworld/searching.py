"""A searching demonstrator for agentgym/ALFWorld-v0: it knows only what the agent has seen.

The planner's plan (ALFWorldTaskSpace.solve) walks straight to where the object is, which no
agent can know at test time; a policy cloned from it learns to head for a place it cannot know.
This demonstrator plays the game step by step and decides each command from what the chat
layer shows a policy with `memory_style="marks"` and `memory_seen=True`:

* the current observation and the admissible commands, those already taken marked "(tried)";
* where the task's things were seen ("Seen: apple 2 (go to countertop 1)", chat.update_sightings).

Its rule, in this order:
1. holding the goal object: heat / cool / clean it at the first microwave / fridge / sinkbasin
   (once), use the lamp where it stands (look tasks: go where a lamp was seen, else search on),
   or go to the first receptacle of the target type, open it if closed, and move it there;
2. a goal object can be taken here (not from where it was put): take it;
3. one was seen elsewhere: go there;
4. here is closed and not yet opened: open it;
5. go to the first receptacle in the admissible list that was not visited yet, target-type
   receptacles last (the goal object never starts in one).
Its search order is the admissible list's (alphabetical), a fixed order a policy can learn from
its prompt; it is what imitation can teach, and its success is the ceiling of a clone of it.
"""

from __future__ import annotations

import re

from agentgym.chat import update_sightings

APPLIANCE = {"pick_heat_then_place_in_recep": ("heat", "microwave"),
             "pick_cool_then_place_in_recep": ("cool", "fridge"),
             "pick_clean_then_place_in_recep": ("clean", "sinkbasin")}
_GO = "go to "


def _kind(name: str) -> str:
    """'apple 2' -> 'apple'."""
    return name.rsplit(" ", 1)[0]


class SearchingDemonstrator:
    """One episode's decisions. `act(observation, admissible)` returns the next command;
    `observe(command, observation)` records what it led to."""

    def __init__(self, instruction: str, task_type: str, pddl_params: dict):
        self.instruction = instruction
        self.task_type = task_type
        self.object = pddl_params["object_target"].lower()
        self.target = (pddl_params.get("parent_target") or "").lower()
        self.lamp = (pddl_params.get("toggle_target") or "").lower()
        self.needed = 2 if task_type == "pick_two_obj_and_place" else 1
        self.tried: set[str] = set()  # valid commands taken (what the "(tried)" marks show)
        self.seen: dict[str, str] = {}  # thing -> the command after which it was last seen
        self.here = ""  # the receptacle the last "go to" reached
        self.placed: set[str] = set()  # goal objects put into the target
        self.drop_site = ""  # where they were put (never taken from there again)
        self.treated = False

    def observe(self, command: str, observation: str) -> None:
        self.tried.add(command)
        update_sightings(self.seen, self.instruction, command, observation)
        if command.startswith(_GO):
            self.here = command[len(_GO):]
        for verb in ("heat ", "cool ", "clean "):
            if command.startswith(verb):
                self.treated = True
        match = re.fullmatch(r"move (.+) to (.+)", command)
        if match and _kind(match.group(1)) == self.object:
            self.placed.add(match.group(1))
            self.drop_site = match.group(2)
            self.treated = False

    def _held(self, admissible: list[str]) -> str | None:
        """The goal object in hand: the list offers to move it (at an open receptacle) or to
        examine it (anywhere; objects lying in a receptacle are offered only to take)."""
        for command in admissible:
            match = re.fullmatch(r"move (.+) to .+|examine (.+)", command)
            thing = match and (match.group(1) or match.group(2))
            if thing and _kind(thing) == self.object:
                return thing
        return None

    def _first(self, admissible: list[str], kind: str) -> str | None:
        """The first receptacle of `kind` in the list's go-to commands (or here)."""
        if self.here and _kind(self.here) == kind:
            return self.here
        for command in admissible:
            if command.startswith(_GO) and _kind(command[len(_GO):]) == kind:
                return command[len(_GO):]
        return None

    def _go_or_open(self, place: str, admissible: list[str]) -> str | None:
        if self.here != place:
            return _GO + place
        if f"open {place}" in admissible and f"open {place}" not in self.tried:
            return f"open {place}"
        return None

    def act(self, observation: str, admissible: list[str]) -> str:
        held = self._held(admissible)
        if held is not None:
            return self._deliver(held, admissible)
        for command in admissible:  # 2. take one here
            match = re.fullmatch(r"take (.+) from (.+)", command)
            if match and _kind(match.group(1)) == self.object and match.group(1) not in self.placed \
                    and match.group(2) != self.drop_site:
                return command
        for thing, where in self.seen.items():  # 3. go where one was seen
            if _kind(thing) == self.object and thing not in self.placed:
                place = _place_of(where)
                if place and place != self.here and place != self.drop_site:
                    return _GO + place
        return self._search(admissible, avoid=self.target)

    def _deliver(self, held: str, admissible: list[str]) -> str:
        if self.task_type in APPLIANCE and not self.treated:
            verb, kind = APPLIANCE[self.task_type]
            place = self._first(admissible, kind)
            if place is None:  # no such appliance in the list: search on
                return self._search(admissible, avoid="")
            use = f"{verb} {held} with {place}"
            if use in admissible:
                return use
            return self._go_or_open(place, admissible) or "look"
        if self.task_type == "look_at_obj_in_light":
            for command in admissible:
                if command.startswith("use ") and _kind(command[4:]) == self.lamp:
                    return command
            for thing, where in self.seen.items():
                place = _place_of(where)
                if _kind(thing) == self.lamp and place and place != self.here:
                    return _GO + place
            return self._search(admissible, avoid="")
        place = self.drop_site or self._first(admissible, self.target)
        if place is None:  # no receptacle of the target type in the list: search on
            return self._search(admissible, avoid="")
        move = f"move {held} to {place}"
        if move in admissible:
            return move
        return self._go_or_open(place, admissible) or "look"

    def _search(self, admissible: list[str], avoid: str) -> str:
        if self.here and f"open {self.here}" in admissible and f"open {self.here}" not in self.tried:
            return f"open {self.here}"
        unvisited = [c for c in admissible if c.startswith(_GO) and c not in self.tried]
        first = [c for c in unvisited if _kind(c[len(_GO):]) != avoid]
        return (first or unvisited or ["look"])[0]


class SearchingTeacher:
    """The demonstrator as a `Teacher` (agentgym.tasks.protocol): it follows an episode someone
    else plays, so it can say what it would do in any state that episode reaches (DAgger)."""

    def __init__(self, task_type: str, pddl_params: dict):
        self.task_type, self.pddl_params = task_type, pddl_params
        self.demonstrator: SearchingDemonstrator | None = None

    def act(self, observation: str, info: dict) -> str:
        if self.demonstrator is None:  # the instruction arrives with the first observation
            self.demonstrator = SearchingDemonstrator(info.get("instruction") or first_observation(observation)[1],
                                                      self.task_type, self.pddl_params)
        admissible = [c for c in info.get("admissible_actions", []) if c != "help"]
        return self.demonstrator.act(observation, admissible)

    def observe(self, action: str, observation: str, info: dict) -> None:
        if self.demonstrator is None:
            raise RuntimeError("SearchingTeacher.observe before act: ask it about the first state first")
        self.demonstrator.observe(action, observation)


def _place_of(command: str) -> str | None:
    """The receptacle a command was taken at: 'go to X' / 'open X' / 'close X' -> X; '... from X' /
    '... to X' / '... with X' -> X."""
    for prefix in (_GO, "open ", "close "):
        if command.startswith(prefix):
            return command[len(prefix):]
    match = re.search(r" (?:from|to|with) (.+)$", command)
    return match.group(1) if match else None


_BANNER = re.compile(r"^\s*-= Welcome to TextWorld, ALFRED! =-\s*")
_TASK = re.compile(r"Your task is to: (.*)$", re.S)


def first_observation(feedback: str) -> tuple[str, str]:
    """The engine's reset text -> (the observation without TextWorld's banner, the instruction)."""
    observation = _BANNER.sub("", feedback).strip()
    match = _TASK.search(observation)
    return observation, match.group(1).strip() if match else ""


def play(engine, task_type: str, pddl_params: dict, max_steps: int) -> list[str]:
    """The demonstrator's commands in `engine` (a game loaded) from its reset until it wins or
    `max_steps` commands are taken. Every command it picks is admissible (it picks from the list)."""
    state = engine.reset()
    _, instruction = first_observation(state.feedback)
    demonstrator = SearchingDemonstrator(instruction, task_type, pddl_params)
    commands: list[str] = []
    for _ in range(max_steps):
        admissible = [c for c in state["admissible_commands"] if c != "help"]
        command = demonstrator.act(state.feedback, admissible)
        if command not in state["admissible_commands"]:  # nothing left to try ("look" where it is not listed)
            break
        state = engine.step(command)
        commands.append(command)
        demonstrator.observe(command, state.feedback.strip())
        if state["won"]:
            break
    return commands
