"""Generating TextWorld games on demand, into a cache keyed by their parameters and seed.

Games come from TextWorld's own generators (the `textworld` package ships its Inform 7
compiler and works offline). A TaskSpec always maps to the same game file, so a task id is
enough to replay a game anywhere; generating it costs about a second, once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from agentgym.errors import ConfigError, require
from agentgym.tasks.spec import TaskSpec, canonical_json

CHALLENGES = ("tw-simple", "tw-coin_collector", "tw-treasure_hunter", "tw-cooking", "custom")
# TextWorld's generators cannot build a quest for every (options, seed): treasure hunter at
# levels 9-10 fails for about one seed in ten. A task then takes the first of a few derived
# seeds that works, so every TaskSpec still maps to exactly one game. Derived seeds lie above
# every seed a task space hands out (train < 1e6, held-out 1e6 + i), so they reuse no game.
DERIVED_SEED_BASE = 1_000_000_000
MAX_GENERATION_TRIES = 20


def cache_dir() -> Path:
    root = os.environ.get("AGENTGYM_CACHE") or Path.home() / ".cache" / "agentgym"
    return Path(root) / "textworld"


def game_key(params: dict, seed: int) -> str:
    return hashlib.sha256(canonical_json({"params": params, "seed": seed}).encode()).hexdigest()[:20]


def _challenge_args(params: dict) -> list[str]:
    """Command-line style arguments for TextWorld's challenge argparsers (as tw-make takes them)."""
    args = []
    for key, value in params.items():
        if key == "challenge":
            continue
        flag = "--" + key
        if value is True:
            args.append(flag)
        elif value is not False and value is not None:
            args += [flag, str(value)]
    return args


def generation_seed(seed: int, attempt: int) -> int:
    """The seed TextWorld's generator gets on `attempt` (0: the task's own seed)."""
    return seed if attempt == 0 else DERIVED_SEED_BASE + seed * MAX_GENERATION_TRIES + attempt


@contextlib.contextmanager
def textworld_noise_off():
    """Two warnings that say nothing a user can act on are dropped, and only they: Jericho's on every
    TextWorld game it loads (TextWorld's challenges load one to set the walkthrough, textworld.start
    the game played) that it cannot track the score, which TextWorld tracks itself; and TextWorld's
    generator's when its grammar has few words for a room, which points at its installed files."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Game .* is not fully supported")
        warnings.filterwarnings("ignore", message=r"Not enough variation for ")
        yield


def _make_game(params: dict, seed: int):
    require("textworld", "textworld")
    from textworld.generator.chaining import QuestGenerationError

    for attempt in range(MAX_GENERATION_TRIES):
        try:
            return _generate(params, generation_seed(seed, attempt))
        except QuestGenerationError:
            continue
    raise ConfigError(f"TextWorld cannot generate a game with {params} from seed {seed} "
                      f"({MAX_GENERATION_TRIES} derived seeds tried); lower the difficulty or pick another seed")


def _generate(params: dict, seed: int):
    textworld = require("textworld", "textworld")
    from textworld import GameOptions

    options = GameOptions()
    options.seeds = seed
    challenge = params.get("challenge")
    if challenge == "custom":
        options.nb_rooms = int(params.get("world_size", 5))
        options.nb_objects = int(params.get("nb_objects", 10))
        options.quest_length = int(params.get("quest_length", 5))
        return textworld.generator.make_game(options), options
    if challenge not in CHALLENGES:
        raise ConfigError(f"unknown TextWorld challenge {challenge!r}; choose one of {', '.join(CHALLENGES)}")
    import textworld.challenges

    _, make, build_argparser = textworld.challenges.CHALLENGES[challenge]
    try:
        settings = vars(build_argparser().parse_args(_challenge_args(params)))
    except SystemExit:
        raise ConfigError(f"bad parameters for {challenge}: {params}") from None
    return make(settings, options), options


def game_file(spec: TaskSpec) -> Path:
    """Path of the compiled game for `spec`, generating and compiling it on first use."""
    params = dict(spec.params)
    if "game_file" in params:  # a user's own game: nothing to generate
        path = Path(params["game_file"]).expanduser()
        if not path.is_file():
            raise ConfigError(f"TextWorld game file {path} does not exist")
        return path
    target = cache_dir() / game_key(params, spec.seed) / "game.z8"
    if target.is_file():
        return target
    from textworld.generator import compile_game

    with textworld_noise_off():
        game, options = _make_game(params, spec.seed)
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    # Compile into a private folder and rename it into place: parallel workers asking for the
    # same game never see a half-written file.
    work = Path(tempfile.mkdtemp(dir=target.parent.parent, prefix=".tmp-"))
    try:
        options.path = str(work / "game.z8")
        options.force_recompile = True
        compile_game(game, options)
        try:
            os.rename(work, target.parent)
        except OSError:  # another process finished first
            if not target.is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target
