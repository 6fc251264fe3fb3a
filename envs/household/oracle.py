"""The oracle planner: a shortest-in-practice plan for any valid household task.

It plans with full knowledge of the layout (it knows what closed containers hold), always
picks the goal object and destination that need the fewest actions, and checks each command
against the admissible table while simulating, so a plan it returns is executable by
construction.
"""

from __future__ import annotations

from agentgym.envs.household.commands import TREAT_VERB, admissible_table, execute
from agentgym.envs.household.goals import evaluate
from agentgym.envs.household.world import APPLIANCE_EFFECT, EFFECT_OF_TASK, Layout, World


class _Planner:
    def __init__(self, layout: Layout):
        self.world = World(layout)
        self.lay = layout
        self.plan: list[str] = []

    def do(self, command: str) -> None:
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

    def fetch(self, candidates) -> int:
        w = self.world
        o = min(candidates, key=lambda o: (self.cost_to_reach(w.obj_loc[o]), o))
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


def plan_for(layout: Layout) -> list[str]:
    """Commands that solve the layout's task from its initial state."""
    p = _Planner(layout)
    task_type = layout.task_type
    goal = list(layout.goal_objs)
    if task_type == "look_at_obj_in_light":
        p.fetch(goal)
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
