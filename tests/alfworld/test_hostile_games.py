"""Hostile ALFWorld-v0 game folders (issue 52, items 6-10): what a `data_path` or a cache folder
an attacker wrote can do to the process that plays it. Each case must end in one line naming the
file, quickly: never a hang, a MemoryError, a traceback, code run, or the host's argv changed."""

from __future__ import annotations

import gc
import json
import os
import pickle
import re
import shutil
import sys
import zlib

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("alfworld", reason="needs the alfworld extra: pip install 'agentgym-credit[alfworld]'")
pytest.importorskip("fast_downward", reason="needs the alfworld extra: pip install 'agentgym-credit[alfworld]'")

import agentgym  # noqa: E402,F401 - registers the envs
from agentgym.envs.alfworld import engine as engine_module  # noqa: E402
from agentgym.envs.alfworld import games  # noqa: E402
from agentgym.envs.alfworld.env import ALFWorldEnv  # noqa: E402
from agentgym.envs.alfworld.tasks import ALFWorldTaskSpace  # noqa: E402
from agentgym.errors import AgentGymError, HeldoutTaskError  # noqa: E402
from agentgym.tasks.spec import TaskSpec  # noqa: E402

ID = "agentgym/ALFWorld-v0"
SPACE = ALFWorldTaskSpace()
SMALL = TaskSpec(ID, {"task_type": "pick_clean_then_place_in_recep", "floorplan": 401, "object": "SoapBar",
                      "target": "Toilet"}, seed=5)
OTHER = TaskSpec(ID, {"task_type": "pick_and_place_simple", "floorplan": 402, "object": "SoapBar",
                      "target": "Toilet"}, seed=3)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("AGENTGYM_CACHE", str(tmp_path_factory.getbasetemp() / "agentgym-cache"))


def _data(tmp_path, train=(SMALL,), held=(OTHER,)):
    """Games in ALFWorld's download layout: train/<task>/<trial>/ and valid_seen/..."""
    for split, specs in (("train", train), ("valid_seen", held)):
        for i, spec in enumerate(specs):
            shutil.copytree(SPACE.game_dir(spec), tmp_path / split / f"game-{i}" / "trial_0")
    return tmp_path


def _game_path(tmp_path, split="train", i=0):
    return tmp_path / split / f"game-{i}" / "trial_0" / games.GAME_FILE


def _one_line_refusal(env, spec, path, words=""):
    with pytest.raises(AgentGymError, match=words) as err:
        env.reset(options={"task": spec})
    assert str(path) in str(err.value) and "\n" not in str(err.value), str(err.value)


def _with_grammar(game: dict, edit) -> dict:
    return dict(game, grammar=edit(game["grammar"]))


def _add_rules(grammar: str, rules: dict) -> str:
    """New rules at the top of the grammar's JSON (the file's `grammar :: \"\"\" {...} \"\"\"`)."""
    at = grammar.index("{", grammar.index("grammar ::")) + 1
    body = "".join(f'"{k}": [{{"rhs": "{v}"}}],\n' for k, v in rules.items())
    return grammar[:at] + body + grammar[at:]


# --- item 6: grammars that recurse or explode, and expressions that run code ---------------------------
@pytest.mark.parametrize("fast", [True, False])
def test_a_grammar_that_recurses_explodes_or_runs_code_is_refused_at_load(tmp_path, fast):
    data = _data(tmp_path)
    path = _game_path(data)
    original = json.loads(path.read_text())
    pwned = tmp_path / "pwned"
    cases = {
        "expands into itself": _with_grammar(original, lambda g: _add_rules(g, {"loop": "a #loop#"}).replace(
            "\\n\\n#task#", "\\n\\n#task##loop#", 1)),
        "expands to": _with_grammar(original, lambda g: _add_rules(
            g, {f"b{i}": f"#b{i + 1}##b{i + 1}#" for i in range(40)} | {"b40": "x"}).replace(
            "\\n\\n#task#", "\\n\\n#task##b0#", 1)),
        "may not run code": _with_grammar(original, lambda g: g.replace(
            "#look.feedback#", "{__import__('os').system('touch " + str(pwned) + "')}", 1)),
        "may not run code ": _with_grammar(original, lambda g: g.replace(
            "{r.name}", "{().__class__.__base__.__subclasses__()}", 1)),
    }
    env = gym.make(ID, data_path=str(data), fast=fast).unwrapped
    spec = env.task_space.split("train")[0]
    for words, game in cases.items():
        path.write_text(json.dumps(game))
        env.close()
        _one_line_refusal(env, spec, path, words.strip())
        assert not pwned.exists()
    path.write_text(json.dumps(original))
    env.reset(options={"task": spec})  # the original game still plays
    env.close()


def test_shipped_grammar_passes_the_check():
    engine = engine_module.Engine(fast=True)
    engine.load(games.load_game(SPACE.game_dir(SMALL) / games.GAME_FILE))
    assert engine.reset()["admissible_commands"]


# --- item 6: files that are not regular files, too large, or nested too deeply -------------------------
@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs and /dev/zero")
def test_fifos_devices_huge_and_deeply_nested_game_files_are_one_line_errors(tmp_path):
    data = _data(tmp_path, train=(SMALL, OTHER), held=())
    shutil.copytree(SPACE.game_dir(SMALL), tmp_path / "valid_seen" / "x" / "trial_0")
    fifo, zero = _game_path(data, i=0), _game_path(data, i=1)
    fifo.unlink()
    os.mkfifo(fifo)
    zero.unlink()
    os.symlink("/dev/zero", zero)
    env = gym.make(ID, data_path=str(data)).unwrapped  # indexing the folder neither hangs nor reads /dev/zero
    train = env.task_space.split("train")
    assert len(train) == 2
    _one_line_refusal(env, train[0], fifo, "FIFO")
    _one_line_refusal(env, train[1], zero, "device")
    zero.unlink()
    zero.write_text("[" * 200_000)
    _one_line_refusal(env, train[1], zero, "nests")
    with zero.open("wb") as f:
        f.truncate(games.MAX_GAME_BYTES + 1)
    _one_line_refusal(env, train[1], zero, "limit")
    env.close()


@pytest.mark.parametrize("traj", ["[" * 100_000, "[1, 2]", '{"pddl_params": "x", "task_type": 3}',
                                  '{"pddl_params": {"object_target": ["x"]}}', "not json", "/dev/zero", "fifo"])
def test_malformed_traj_data_is_one_line_naming_the_file(tmp_path, traj):
    data = _data(tmp_path)
    path = _game_path(data).with_name(games.TRAJ_FILE)
    path.unlink()
    if traj == "/dev/zero":
        os.symlink("/dev/zero", path)
    elif traj == "fifo":
        os.mkfifo(path)
    else:
        path.write_text(traj)
    env = gym.make(ID, data_path=str(data)).unwrapped
    _one_line_refusal(env, env.task_space.split("train")[0], path, "traj_data")
    path.unlink()  # a game without traj_data.json still plays (progress counts success only)
    _, info = env.reset(options={"task": env.task_space.split("train")[0]})
    assert info["score"] == 0.0
    env.close()


# --- item 7: nothing loaded from the cache is unpickled ------------------------------------------------
class _Payload:
    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_a_pickle_planted_in_the_translation_cache_never_runs(tmp_path):
    game = games.load_game(SPACE.game_dir(SMALL) / games.GAME_FILE)
    pwned = tmp_path / "pwned"
    sas = engine_module.sas_path(game["pddl_domain"], game["pddl_problem"])
    sas.parent.mkdir(parents=True, exist_ok=True)
    bomb = zlib.compress(pickle.dumps(_Payload(pwned)))
    # where this version keeps translations, where the previous one did, and any name beside them
    for name in (sas.name, sas.name.split(".")[0] + ".pkl.z", "x.pkl", "x.pkl.z"):
        (sas.parent / name).write_bytes(bomb)
    engine_module.forget_translations()
    engine = engine_module.Engine(fast=True)
    engine.load(game)
    state = engine.reset()
    assert state["admissible_commands"] and not pwned.exists()
    # and the translation it wrote back is text, which a later process reads without unpickling
    assert zlib.decompress(sas.read_bytes()).startswith(b"begin_version")
    engine_module.forget_translations()
    engine.load(game)
    assert engine.reset()["admissible_commands"] == state["admissible_commands"]


# --- item 8: argv -------------------------------------------------------------------------------------
def test_the_first_reset_of_an_uncached_game_keeps_the_host_argv(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTGYM_CACHE", str(tmp_path / "fresh-cache"))
    monkeypatch.setattr(sys, "argv", ["host-program", "--its-own", "flags"])
    engine_module.forget_translations()
    for fast in (True, False):
        env = ALFWorldEnv(fast=fast)
        env.reset(options={"task": OTHER})
        env.close()
        assert sys.argv == ["host-program", "--its-own", "flags"]


# --- item 9: library copies of envs never closed -------------------------------------------------------
def _library_copies() -> int:
    with open("/proc/self/maps") as f:
        return len({line.split()[4] for line in f if "libdownward" in line and "(deleted)" in line})


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="counts mappings in /proc")
def test_envs_that_are_never_closed_give_their_library_copy_to_the_next_env(monkeypatch):
    """An env garbage-collected without close() returns its engine (and its 34 MB library copy)
    to the process's idle list, so the next env reuses it instead of copying the library again."""
    monkeypatch.setattr(engine_module, "_IDLE", {True: [], False: []})
    for i in range(11):
        env = gym.make(ID)
        env.reset(options={"task": SMALL})
        del env  # never closed
        gc.collect()
        if i == 2:  # the baseline: the first envs' copies (an env is collected a couple of envs later)
            before = _library_copies()
    assert _library_copies() == before  # before the fix: one more copy per env
    alive = [gym.make(ID) for _ in range(3)]  # three at once need three engines
    for env in alive:
        env.reset(options={"task": SMALL})
    assert _library_copies() - before <= 3  # three at once, at most three more
    for env in alive:
        env.close()  # closed envs give theirs back once (the finalizer is detached)
    del alive, env
    gc.collect()
    assert len(engine_module._IDLE[True]) >= 3


# --- item 10: a held-out game linked or copied into train/ --------------------------------------------
def test_a_held_out_game_linked_or_copied_into_train_is_refused_by_the_gate(tmp_path):
    from agentgym.tasks.splits import refuse_heldout
    from agentgym.tasks.validation import heldout_keys

    data = _data(tmp_path)
    held = _game_path(data, "valid_seen")
    space = gym.make(ID, data_path=str(data)).unwrapped.task_space
    refuse_heldout(space.split("train"), heldout_keys(space), reserved=space.reserved)  # honest data passes

    link = data / "train" / "linked" / "trial_0"
    link.mkdir(parents=True)
    os.symlink(held, link / games.GAME_FILE)
    copy = data / "train" / "copied" / "trial_0"
    copy.mkdir(parents=True)
    game = json.loads(held.read_text())
    # the same game with its PDDL re-spaced and the task sentence reworded
    game["pddl_problem"] = re.sub(r"\n", "\n  ", game["pddl_problem"])
    game["grammar"] = game["grammar"].replace("Your task is to: ", "Your task is to: please ")
    (copy / games.GAME_FILE).write_text(json.dumps(game, indent=2))
    space = gym.make(ID, data_path=str(data)).unwrapped.task_space
    train = space.split("train")
    assert len(train) == 3
    for spec in train:
        if spec.params["game"].startswith(("train/linked", "train/copied")):
            assert space.reserved(spec)
            with pytest.raises(HeldoutTaskError):
                refuse_heldout([spec], heldout_keys(space), reserved=space.reserved)
        else:
            assert not space.reserved(spec)
    assert space.reserved(TaskSpec(ID, {"game": "train/../valid_seen/game-0/trial_0"}, 0))
    assert np.isfinite(len(train))
