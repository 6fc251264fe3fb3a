"""The oracle planner: a shortest-in-practice plan for any valid household task.

It plans with full knowledge of the layout (it knows what closed containers hold), always
picks the goal object and destination that need the fewest actions, and checks each command
against the admissible table while simulating, so a plan it returns is executable by
construction.

The searching variant (`search_rng`) knows only what an agent could have seen: the room's
receptacles, and the contents of those it has visited. It visits unseen receptacles in a random
order until it sees an object it needs (goal object, lamp), then goes on as the oracle. A model
cloned from the plain oracle learns to walk straight to hidden objects, i.e. to guess where
things are; cloned from the searcher it learns to pick its next stop among the listed ones.
"""

from __future__ import annotations

from agentgym.envs.household.commands import TREAT_VERB, admissible_table, execute
from agentgym.envs.household.goals import evaluate
from agentgym.envs.household.world import APPLIANCE_EFFECT, EFFECT_OF_TASK, Layout, World


# What a dawdling searcher does instead of progressing: admissible commands that change nothing.
IDLE_COMMANDS = ("look", "inventory", "examine ")


class _Planner:
    def __init__(self, layout: Layout, search_rng=None, dawdle_prob: float = 0.0):
        self.world = World(layout)
        self.lay = layout
        self.plan: list[str] = []
        self.search_rng = search_rng  # None: the all-knowing oracle
        self.seen: set[int] = set()  # receptacles whose contents the searcher has seen
        self.dawdle_prob = dawdle_prob

    def do(self, command: str) -> None:
        # A dawdling searcher first spends a turn on a command that changes nothing (look,
        # inventory, examine): an imperfect demonstrator whose clone wastes turns, which reward can
        # teach it not to do and imitation of more such demonstrations cannot.
        while self.dawdle_prob and self.search_rng.random() < self.dawdle_prob:
            idle = sorted(c for c in admissible_table(self.world) if c.startswith(IDLE_COMMANDS))
            self._execute(idle[int(self.search_rng.integers(len(idle)))])
        self._execute(command)

    def _execute(self, command: str) -> None:
        op = admissible_table(self.world).get(command)
        if op is None:  # a planner bug, never a property of the task
            raise RuntimeError(f"oracle planned an inadmissible command {command!r} for task {self.lay.task_id}")
        execute(self.world, op)
        self.plan.append(command)

    def cost_to_reach(self, r: int) -> int:
        w = self.world
        return (w.loc != r) + (not w.rec_open[r])

    def go(self, r: int) -> None:
        if self.world.loc != r:
            self.do("go to " + self.lay.rec_names[r])
        if not self.world.rec_open[r]:
            self.do("open " + self.lay.rec_names[r])
        self.seen.add(r)

    def knows(self, o: int) -> bool:
        return self.search_rng is None or self.world.held == o or self.world.obj_loc[o] in self.seen

    def search(self, objects) -> None:
        """Visit unseen receptacles in random order until one of `objects` has been seen."""
        unseen = [r for r in range(len(self.lay.rec_names)) if r not in self.seen]
        for r in (self.search_rng.permutation(unseen) if self.search_rng is not None else ()):
            if any(self.knows(o) for o in objects):
                return
            self.go(int(r))

    def fetch(self, candidates) -> int:
        w = self.world
        self.search(candidates)
        o = min((o for o in candidates if self.knows(o)), key=lambda o: (self.cost_to_reach(w.obj_loc[o]), o))
        r = w.obj_loc[o]
        self.go(r)
        self.do(f"take {self.lay.obj_names[o]} from {self.lay.rec_names[r]}")
        return o

    def place(self, o: int) -> None:
        d = min(self.lay.dest_recs, key=lambda r: (self.cost_to_reach(r), r))
        self.go(d)
        self.do(f"move {self.lay.obj_names[o]} to {self.lay.rec_names[d]}")

    def treat(self, o: int, effect: int) -> None:
        lay = self.lay
        r = min((r for r, t in enumerate(lay.rec_types) if APPLIANCE_EFFECT.get(t) == effect),
                key=lambda r: (self.world.loc != r, r))
        if self.world.loc != r:
            self.do("go to " + lay.rec_names[r])
        self.do(f"{TREAT_VERB[effect]} {lay.obj_names[o]} with {lay.rec_names[r]}")


def plan_for(layout: Layout, search_rng=None, dawdle_prob: float = 0.0) -> list[str]:
    """Commands that solve the layout's task from its initial state; with `search_rng`, as an
    agent that must search for what it has not seen (a random search order per call), and with
    `dawdle_prob` one that before each command idles (look / inventory / examine) with that
    probability, again and again (a geometric number of idle turns)."""
    if dawdle_prob and search_rng is None:
        raise ValueError("dawdle_prob needs the searching planner's search_rng")
    if not 0.0 <= dawdle_prob < 1.0:
        raise ValueError(f"dawdle_prob must be in [0, 1), got {dawdle_prob}")
    p = _Planner(layout, search_rng, dawdle_prob)
    task_type = layout.task_type
    goal = list(layout.goal_objs)
    if task_type == "look_at_obj_in_light":
        p.fetch(goal)
        p.search([layout.lamp])
        host = p.world.obj_loc[layout.lamp]
        if p.world.loc != host:
            p.do("go to " + layout.rec_names[host])
        p.do("use " + layout.obj_names[layout.lamp])
    elif task_type == "pick_two_obj_and_place":
        first = p.fetch(goal)
        p.place(first)
        p.place(p.fetch([o for o in goal if o != first]))
    else:
        o = p.fetch(goal)
        if task_type in EFFECT_OF_TASK:
            p.treat(o, EFFECT_OF_TASK[task_type])
        p.place(o)
    if not evaluate(p.world)[1]:
        raise RuntimeError(f"oracle plan does not solve task {layout.task_id}")
    return p.plan
