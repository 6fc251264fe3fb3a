"""The alfworld-tiny preset: its config, and the gates of its evolving task source over
ALFWorld-v0 (held-out and test-floor-plan games never trained on, mutations, difficulty, task
counts). Game building (1-3 s a game) is replaced by a stub validator: the gates are under test."""

import numpy as np
import pytest

pytest.importorskip("alfworld", reason="needs the alfworld extra: pip install 'agentgym[alfworld]'")

from agentgym.envs.alfworld import scenes  # noqa: E402
from agentgym.envs.alfworld.tasks import ALFWorldTaskSpace  # noqa: E402
from agentgym.tasks.generator import TaskGenerationError  # noqa: E402
from agentgym.tasks.source import make_task_source_from_config  # noqa: E402
from agentgym.tasks.spec import TaskSpec  # noqa: E402
from agentgym.tasks.validation import heldout_keys  # noqa: E402
from agentgym.trainers.config import load_config  # noqa: E402
from agentgym.trainers.env_requirements import check_env_features  # noqa: E402

ID = "agentgym/ALFWorld-v0"


class _Unbuilt(ALFWorldTaskSpace):
    """ALFWorld's task space with the planner check stubbed: `fails` ids fail it, others pass."""

    def __init__(self, fails=()):
        self.fails = set(fails)

    def validate(self, spec):
        return spec.task_id not in self.fails


def test_the_preset_is_alfworld_gigpo_on_the_evolving_source_with_admissible_decoding():
    cfg = load_config("alfworld-tiny", [])
    assert cfg.env.id == ID and cfg.env.split == "train"
    assert cfg.env.env_kwargs == {"max_episode_steps": 50, "list_help": False}
    assert (cfg.tasks.source, cfg.tasks.curriculum) == ("evolve", "sec")
    assert cfg.rollout.admissible_only and cfg.estimator.name == "gigpo" and cfg.sft.enabled and cfg.tiny.build
    assert cfg.eval.split == "heldout_unseen" and cfg.eval.num_tasks >= 120
    assert cfg.env.chat.memory >= 50 and cfg.env.chat.memory_style == "marks"  # every action of an episode marked
    # the warm start imitates the demonstrator that knows only what it has seen, and the policy sees
    # what that demonstrator decides from: the marks and where the task's things were seen
    assert cfg.sft.expert == "searching" and cfg.env.chat.memory_seen
    assert cfg.env.chat.max_admissible >= 100  # ALFWorld rooms have up to 54 receptacles
    check_env_features(cfg.env, cfg.sft, ALFWorldTaskSpace())  # the env offers all the preset needs


def test_the_presets_source_never_hands_out_a_held_out_or_test_floorplan_game():
    space = _Unbuilt()
    cfg = load_config("alfworld-tiny", ["tasks.seed_tasks=16", "tasks.min_active=16", "tasks.new_per_round=8"])
    train = space.split("train")
    source = make_task_source_from_config(cfg.tasks, space, train, seed=0)
    keys, unseen = heldout_keys(space), set(scenes.unseen_floorplans())
    for _ in range(6):
        for spec in source.next_tasks(8):
            assert spec.task_id not in keys and spec.content_key not in keys
            assert spec.params["floorplan"] not in unseen
    assert all(e.spec.params["floorplan"] not in unseen for e in source.pool.entries.values())
    # a held-out game offered to the generator as a parent's variant is refused
    gen = source.generator
    for spec in space.split("heldout")[:3] + space.split("heldout_unseen")[:3]:
        assert gen.admit(spec, "mutate") == "heldout"
        assert gen.admit(TaskSpec(ID, spec.params, seed=spec.seed + 7), "mutate") in ("admitted", "reserved")
    assert gen.admit(TaskSpec(ID, space.split("heldout_unseen")[0].params, seed=1), "mutate") == "reserved"


def test_mutations_change_room_object_target_type_or_placement_and_stay_on_their_side():
    space, rng = _Unbuilt(), np.random.default_rng(0)
    changed = set()
    for parent in space.split("train")[:60]:
        child = space.mutate(parent, rng)
        assert not space.reserved(child)
        space.check_params(dict(child.params))  # a legal ALFRED goal
        changed |= {k for k in child.params if child.params[k] != parent.params[k]}
        changed |= {"seed"} if child.params == parent.params and child.seed != parent.seed else set()
    assert changed == {"task_type", "floorplan", "object", "target", "seed"}
    for parent in space.split("heldout_unseen")[:20]:
        assert space.reserved(space.mutate(parent, rng))


def test_difficulty_grows_with_receptacles_and_sub_goals():
    space = ALFWorldTaskSpace()
    small = min(scenes.seen_floorplans(), key=lambda n: len(scenes.floorplan(n).receptacles))
    big = max(scenes.seen_floorplans(), key=lambda n: len(scenes.floorplan(n).receptacles))

    def spec(task_type, n):
        return space.sample(np.random.default_rng(0), task_type=task_type, floorplan=n)

    easy_type = [t for t in scenes.TASK_TYPES if t == "pick_and_place_simple"][0]
    assert space.difficulty(spec(easy_type, small)) < space.difficulty(spec(easy_type, big))
    kitchen = [t for t in space.split("train") if t.params["task_type"] == "pick_two_obj_and_place"][0]
    simple = TaskSpec(ID, {**kitchen.params, "task_type": easy_type}, seed=kitchen.seed)
    assert space.difficulty(simple) < space.difficulty(kitchen)


def test_games_failing_the_planner_check_are_counted_and_a_dry_generator_is_one_line():
    train = _Unbuilt().split("train")
    failing = {t.task_id for t in train[:4]}
    space = _Unbuilt(fails=failing)
    cfg = load_config("alfworld-tiny", ["tasks.seed_tasks=8", "tasks.min_active=8", "tasks.new_per_round=0"])
    source = make_task_source_from_config(cfg.tasks, space, train[:8], seed=0)
    source.next_tasks(4)
    metrics = source.metrics()
    assert metrics["gen_admitted_split"] == 4 and metrics["gen_rejected_invalid"] == 4
    assert metrics["pool_tasks"] == 4 + metrics.get("gen_admitted_sample", 0)

    class _Dry(_Unbuilt):  # every new game fails the planner
        def validate(self, spec):
            return False

    dry = make_task_source_from_config(
        {**vars(cfg.tasks), "seed_tasks": 0, "generator": {"weights": {"sample": 1.0}, "max_consecutive_rejects": 5}},
        _Dry(), train[:8], seed=0)
    with pytest.raises(TaskGenerationError, match="no valid new task in 5 proposals") as err:
        dry.next_tasks(4)
    assert "\n" not in str(err.value) and "invalid" in str(err.value)


def test_the_table_counts_per_task_type_with_wilson_intervals():
    import sys
    from pathlib import Path
    from types import SimpleNamespace

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
    from benchmarks.learning.alfworld_table import markdown, per_type, task_type

    generated = {"params": {"task_type": "pick_heat_then_place_in_recep", "floorplan": 3, "object": "Apple",
                            "target": "CounterTop"}}
    official = {"params": {"game": "valid_unseen/pick_two_obj_and_place-Pen-None-Desk-313/trial_T2019/"}}
    assert task_type(generated) == "pick_heat_then_place_in_recep" and task_type(official) == "pick_two_obj_and_place"
    trajs = [SimpleNamespace(task=generated, success=s, infra_error=False) for s in (True, False, False, False)]
    trajs += [SimpleNamespace(task=official, success=True, infra_error=False),
              SimpleNamespace(task=official, success=True, infra_error=True)]  # infra errors are not episodes
    table = per_type(trajs)
    assert (table["Heat"]["successes"], table["Heat"]["episodes"]) == (1, 4)
    assert (table["Pick2"]["successes"], table["Pick2"]["episodes"]) == (1, 1)
    assert (table["All"]["successes"], table["All"]["episodes"]) == (2, 5) and table["Pick"]["episodes"] == 0
    assert 0 < table["Heat"]["lo"] < 0.25 < table["Heat"]["hi"] < 1
    row = {"policy": "random", "split": "heldout", "games": 5, "types": table}
    assert "| random | heldout | 5 | - |" in markdown([row])  # no Pick episodes: a dash, not 0


def test_the_table_keeps_the_games_of_the_asked_types_alone(tmp_path):
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
    from benchmarks.learning.alfworld_table import COLUMNS, games_of_types, task_type

    from agentgym.envs.alfworld.tasks import ALFWorldTaskSpace

    space = ALFWorldTaskSpace()
    path = games_of_types(space, "heldout_unseen", ["Pick", "Look"], tmp_path)
    kept = [json.loads(line) for line in path.read_text().splitlines()]
    every = [t.to_dict() for t in space.split("heldout_unseen")]
    wanted = [t for t in every if COLUMNS[task_type(t)] in ("Pick", "Look")]
    assert kept == wanted and 0 < len(kept) < len(every)


def test_compare_pairs_two_evaluations_game_by_game(tmp_path, capsys):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
    from benchmarks.learning.alfworld_table import main

    from agentgym.trajectory import Trajectory, save_trajectories

    def episode(game, task_type, success):
        return Trajectory(task_id=game, group_id=game, env_id=ID, task={"params": {"task_type": task_type}}, steps=[],
                          success=success, score=float(success))

    games = [(f"g{i}", "pick_and_place_simple" if i < 4 else "pick_cool_then_place_in_recep") for i in range(8)]
    before = [episode(g, kind, False) for g, kind in games for _ in range(2)]
    # after: the four Cool games solved in both episodes, g0 in one of its two
    after = [episode(g, kind, kind.startswith("pick_cool") or (g == "g0" and k == 0))
             for g, kind in games for k in range(2)]
    save_trajectories(tmp_path / "before.jsonl", before)
    save_trajectories(tmp_path / "after.jsonl", after)

    main(["--compare", str(tmp_path / "before.jsonl"), str(tmp_path / "after.jsonl")])

    printed = capsys.readouterr().out
    assert "| 0.12 [" in printed and "| 1.00 [" in printed  # Pick 1/8 episodes, Cool 8/8 after
    assert "+0.562 [" in printed and "paired over 8 games" in printed  # (4 x 1 + 0.5) / 8
