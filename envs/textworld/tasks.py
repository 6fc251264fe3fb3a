"""Task spaces for TextWorld's standard challenges: difficulty levels as params, the game seed
as the TaskSpec seed, train and held-out splits by disjoint seed ranges."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agentgym.errors import ConfigError
from agentgym.tasks.space import TaskSpace, check_schema
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import save_split

SPLIT_ROOT = Path(__file__).parent / "splits"
HELDOUT_SEED_BASE = 1_000_000  # train seeds stay below, held-out seeds above: disjoint games
SPLIT_SIZES = {"train": 100, "heldout": 30}

# What agentgym/TextWorld-v0 plays when made without game_file: a small two-room game.
DEFAULT_GAME = TaskSpec("agentgym/TextWorld-v0",
                        {"challenge": "custom", "world_size": 2, "nb_objects": 4, "quest_length": 2}, seed=1)

ENV_IDS = {
    "tw-simple": "agentgym/TextWorld-Simple-v0",
    "tw-coin_collector": "agentgym/TextWorld-CoinCollector-v0",
    "tw-treasure_hunter": "agentgym/TextWorld-TreasureHunter-v0",
    "tw-cooking": "agentgym/TextWorld-Cooking-v0",
    "custom": "agentgym/TextWorld-Custom-v0",
}


def _sample_params(challenge: str, rng: np.random.Generator, level: int | None = None) -> dict:
    """Parameters of one game; `level` (1..10) scales difficulty where the challenge has one."""
    lvl = int(level) if level is not None else int(rng.integers(1, 11))
    lvl = min(10, max(1, lvl))
    if challenge == "tw-simple":
        return {"challenge": challenge, "rewards": ["dense", "balanced", "sparse"][min(2, (lvl - 1) // 4)],
                "goal": "detailed" if lvl <= 5 else "brief"}
    if challenge == "tw-coin_collector":
        return {"challenge": challenge, "level": int(rng.integers(1, 3 * lvl + 1))}
    if challenge == "tw-treasure_hunter":
        return {"challenge": challenge, "level": int(rng.integers(1, 2 * lvl + 1))}
    if challenge == "tw-cooking":
        recipe = 1 + (lvl - 1) // 4
        return {"challenge": challenge, "recipe": recipe, "take": int(rng.integers(0, recipe + 1)),
                "go": [1, 6, 9, 12][min(3, (lvl - 1) // 3)], "open": lvl >= 3, "cook": lvl >= 5, "cut": lvl >= 7}
    if challenge == "custom":
        return {"challenge": challenge, "world_size": 1 + lvl // 2, "nb_objects": 4 + lvl, "quest_length": 1 + lvl // 2}
    raise ConfigError(f"unknown TextWorld challenge {challenge!r}")


class TextWorldTaskSpace(TaskSpace):
    """TextWorld games from one of its generators; params are the generator's options and the
    TaskSpec seed is the game seed. Levels 1..10 (keyword `level` of sample) scale difficulty."""

    split_names = ("train", "heldout")

    def __init__(self, challenge: str, game_file: str | None = None):
        self.challenge = challenge
        self.game_file = game_file
        if game_file is not None:
            self.env_id = "agentgym/TextWorld-v0"
            self.split_dir = None
        elif challenge == "file":
            # No file given: a small default game (generated once into the cache, ~1 s), so the
            # id can be made without arguments (check_env over the registry, quick trials).
            self.env_id = "agentgym/TextWorld-v0"
            self.split_dir = None
        elif challenge in ENV_IDS:
            self.env_id = ENV_IDS[challenge]
            self.split_dir = SPLIT_ROOT / challenge
        else:
            raise ConfigError(f"unknown TextWorld challenge {challenge!r}; choose one of {', '.join(ENV_IDS)}")

    @classmethod
    def for_challenge(cls, challenge: str, game_file: str | None = None) -> "TextWorldTaskSpace":
        return cls(challenge, game_file)

    def make_env(self, **kwargs):
        import gymnasium as gym

        if self.game_file is not None:
            kwargs.setdefault("game_file", self.game_file)
        return gym.make(self.env_id, **kwargs)

    def read_split(self, name: str):
        if self.game_file is not None:  # a single user-supplied game is its own (only) task
            return (TaskSpec(self.env_id, {"game_file": str(self.game_file)}, seed=0),)
        if self.challenge == "file":  # the default game: one training task, nothing held out
            return (DEFAULT_GAME,) if name == "train" else ()
        return super().read_split(name)

    def check_params(self, params: dict) -> dict:
        """The generator options of this challenge; a game file only when it is the one this
        env was made with (a task cannot name files of its own)."""
        p = check_schema(params, {}, {"challenge": str, "rewards": str, "goal": str, "level": int, "recipe": int,
                                      "take": int, "go": int, "open": bool, "cook": bool, "cut": bool,
                                      "world_size": int, "nb_objects": int, "quest_length": int, "game_file": str},
                         what="TextWorld")
        if self.challenge == "file" and self.game_file is None:
            if p != dict(DEFAULT_GAME.params):
                raise ValueError("agentgym/TextWorld-v0 without game_file plays only its default game; "
                                 "pass game_file=... to gym.make for another one")
            return p
        if "game_file" in p:
            if self.game_file is None or p["game_file"] != str(self.game_file) or len(p) != 1:
                raise ValueError("game_file names the game an env was made with (gym.make(..., game_file=...)); "
                                 "a task cannot choose files")
        elif p.get("challenge", self.challenge) != self.challenge:
            raise ValueError(f"challenge {p.get('challenge')!r} is not this env's ({self.challenge})")
        return p

    def sample(self, rng: np.random.Generator, level: int | None = None, **_) -> TaskSpec:
        return TaskSpec(self.env_id, _sample_params(self.challenge, rng, level),
                        seed=int(rng.integers(HELDOUT_SEED_BASE)))

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        # A nearby level: same generator options, another game seed, or a level one step away.
        if rng.random() < 0.5:
            return TaskSpec(self.env_id, spec.params, seed=int(rng.integers(HELDOUT_SEED_BASE)))
        params = dict(spec.params)
        for key in ("level", "nb_objects", "quest_length", "take"):
            if key in params:
                params[key] = max(1 if key != "take" else 0, int(params[key]) + int(rng.choice([-1, 1])))
                break
        return TaskSpec(self.env_id, params, seed=spec.seed)

    def solve(self, spec: TaskSpec) -> list[str] | None:
        """TextWorld's own walkthrough of the game."""
        env = self.make_env().unwrapped
        try:
            env.reset(options={"task": spec})
            walkthrough = env._state.get("extra.walkthrough")
            return list(walkthrough) if walkthrough else None
        finally:
            env.close()

    def category(self, spec: TaskSpec) -> str:
        p = spec.params
        if "level" in p:
            return f"{self.challenge}/level{(int(p['level']) - 1) // 5 * 5 + 1}+"
        if "recipe" in p:
            return f"{self.challenge}/recipe{p['recipe']}-go{p['go']}"
        if "quest_length" in p:
            return f"{self.challenge}/quest{p['quest_length']}"
        return f"{self.challenge}/{p.get('rewards', 'file')}-{p.get('goal', '')}"

    def build_splits(self) -> dict[str, list[TaskSpec]]:
        rng = np.random.default_rng(7)
        splits = {}
        for name, size in SPLIT_SIZES.items():
            base = 0 if name == "train" else HELDOUT_SEED_BASE
            splits[name] = [TaskSpec(self.env_id, _sample_params(self.challenge, rng), seed=base + i)
                            for i in range(size)]
        return splits


def write_all_splits() -> None:

    for challenge in ENV_IDS:
        space = TextWorldTaskSpace(challenge)
        for name, tasks in space.build_splits().items():
            save_split(space.split_dir / f"{name}.jsonl", tasks)


if __name__ == "__main__":
    write_all_splits()
