"""benchmarks/diagnostics/verdict_mechanism.py: the demonstrator's targets, the teacher-forced
scoring in the env, where an episode departs from the demonstrator, the failure classes, and
which model each arm of the verdict's runs folder is."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.diagnostics import verdict_mechanism as vm  # noqa: E402
from benchmarks.harness import jobs as rr  # noqa: E402

from agentgym.trajectory import Step  # noqa: E402

HOUSEHOLD = "agentgym/Household-v0"


def step(action: str, valid: bool = True, progress: float = 0.0) -> Step:
    return Step(observation="", anchor="", text=action, action=action, action_valid=valid, progress=progress)


def heldout_tasks(n: int):
    from agentgym.registration import get_task_space
    from agentgym.trainers.config import load_config
    from agentgym.trainers.task_selection import filter_tasks

    cfg = load_config("household-tiny", [])
    space = get_task_space(HOUSEHOLD)
    return filter_tasks(space.split("heldout"), cfg.env.task_filter, cfg.env.categories, space)[:n]


def searching_demo_states(n_tasks: int, dawdle_prob: float = 0.0):
    """The states with a target of the searching demonstrator's episodes on the first held-out tasks."""
    from agentgym.trainers.config import load_config
    from agentgym.trainers.sft import oracle_trajectories

    cfg = load_config("household-tiny", [])
    demos = oracle_trajectories(HOUSEHOLD, heldout_tasks(n_tasks), cfg.env.chat, cfg.env.env_kwargs, seed=0,
                                search=True, dawdle_prob=dawdle_prob, session=None)
    return vm.demonstrator_states(cfg, demos)


def test_the_target_is_the_next_valid_command_that_is_not_idle():
    steps = [step("look"), step("take apple 1 from fridge 1", valid=False), step("go to fridge 1"),
             step("examine fridge 1"), step("take apple 1 from fridge 1"), step("inventory")]
    assert vm.demo_targets(steps) == ["go to fridge 1", "go to fridge 1", "go to fridge 1",
                                      "take apple 1 from fridge 1", "take apple 1 from fridge 1", None]
    assert [vm.demo_step_kind(s) for s in steps] == ["idle", "slip", "go", "idle", "take", "idle"]
    assert [vm.command_kind(a) for a in ("put apple 1 in fridge 1", "Heat apple 1 with microwave 1", "use desklamp 1",
                                         "close drawer 2", "fly", None)] == ["put", "treat", "use", "open", "other",
                                                                             "other"]


def test_failures_follow_the_documented_order():
    def profile(**counts):
        p = {"invalid": 0, "idle": 0, "repeat": 0, "new": 0, "max_progress": 0.0, **counts}
        p["steps"] = p["invalid"] + p["idle"] + p["repeat"] + p["new"]
        return p

    assert vm.failure_kind(profile(invalid=6, idle=6)) == "invalid"  # the first rule that holds
    assert vm.failure_kind(profile(invalid=5, idle=6, new=1)) == "idle"
    assert vm.failure_kind(profile(invalid=3, repeat=6, new=3)) == "looping"
    assert vm.failure_kind(profile(invalid=5, idle=2, repeat=2, new=3)) == "never_held_goal"
    assert vm.failure_kind(profile(invalid=5, idle=2, repeat=2, new=3, max_progress=0.5)) == "held_not_done"
    steps = [step("go to shelf 1"), step("go to shelf 2"), step("go to shelf 1"), step("Go to  shelf 2."),
             step("look"), step("jump", valid=False), step("take pen 1 from shelf 2", progress=0.5)]
    assert vm.episode_profile(steps) == {"steps": 7, "invalid": 1, "idle": 1, "repeat": 2, "new": 3,
                                         "max_progress": 0.5}


def test_the_demonstrators_own_episodes_never_depart_and_leaving_its_plan_does():
    from agentgym.envs.household.oracle import IDLE_COMMANDS, plan_for
    from agentgym.envs.household.world import get_layout

    idles = returns = walkaways = 0
    for task in heldout_tasks(12):
        layout = get_layout(task)
        for seed in range(3):  # any search order is the demonstrator's, idling and slipping as it does
            plan = plan_for(layout, search_rng=np.random.default_rng(seed), dawdle_prob=0.3)
            steps = []
            for command in plan:  # slips: commands that are not admissible leave the state as it is
                steps += [step("take the moon from nowhere", valid=False), step(command)]
            assert vm.departure(layout, steps) is None
            idles += sum(c.startswith(IDLE_COMMANDS) for c in plan)
        # at the second receptacle visited, going back to the first instead of the plan's next command
        plan = plan_for(layout, search_rng=np.random.default_rng(0))
        goes = [i for i, c in enumerate(plan) if c.startswith("go to ")]
        if len(goes) >= 2 and goes[1] + 1 < len(plan) and plan[goes[1] + 1] != plan[goes[0]]:
            cut = goes[1] + 1
            steps = [step(c) for c in plan[:cut]] + [step("look"), step(plan[goes[0]])]
            left = vm.departure(layout, steps)
            assert left.pop("expected").startswith("go to " if plan[cut].startswith("go to ") else plan[cut])
            assert left == {"step": cut + 2, "taken": plan[goes[0]], "expected_kind": vm.command_kind(plan[cut]),
                            "taken_kind": "go", "revisit": True}  # during a search: one unseen receptacle it could pick
            returns += 1
        # walking on from where the goal object lies, to a receptacle not visited yet, instead of taking it
        first = goes[0]
        elsewhere = [c for c in layout.rec_names if "go to " + c not in plan[:first + 1]]
        if plan[first + 1].startswith("take ") and elsewhere:
            steps = [step(c) for c in plan[:first + 1]] + [step("go to " + elsewhere[0])]
            left = vm.departure(layout, steps)
            assert (left["step"], left["expected"], left["revisit"]) == (first + 2, plan[first + 1], False)
            assert (left["expected_kind"], left["taken_kind"]) == ("take", "go")
            walkaways += 1
    assert idles > 0 and returns >= 3 and walkaways >= 3


def test_teacher_forced_replies_are_scored_by_the_env_at_the_demonstrators_states():
    from agentgym.trainers.config import load_config
    from agentgym.trainers.sft import oracle_trajectories

    cfg = load_config("household-tiny", [])
    demos = oracle_trajectories(HOUSEHOLD, heldout_tasks(3), cfg.env.chat, cfg.env.env_kwargs, seed=0,
                                slip_prob=0.2, search=True, dawdle_prob=0.4, session=None)
    targets = [t for d in demos for t in vm.demo_targets(d.steps) if t is not None]
    kinds = [vm.demo_step_kind(s) for d in demos for s, t in zip(d.steps, vm.demo_targets(d.steps)) if t is not None]
    assert "idle" in kinds and len(targets) >= 6
    replies = {"teacher": [t.upper() + " " for t in targets],  # the env reads commands case- and space-blind
               "idler": ["look"] * len(targets), "nonsense": ["fly to the moon"] * len(targets),
               "one_off": targets[1:] + targets[:1]}
    scored = vm.score_replies(cfg, demos, replies)
    teacher, idler, nonsense = (vm.agreement_summary(scored[a])["all"] for a in ("teacher", "idler", "nonsense"))
    assert (teacher["match"], teacher["valid"], teacher["idle"], teacher["same_kind"]) == (1.0, 1.0, 0.0, 1.0)
    assert (idler["match"], idler["valid"], idler["idle"]) == (0.0, 1.0, 1.0)
    assert (nonsense["match"], nonsense["valid"], nonsense["idle"]) == (0.0, 0.0, 0.0)
    one_off = vm.agreement_summary(scored["one_off"])
    assert one_off["all"]["match"] < 1.0 and one_off["all"]["valid"] < 1.0  # scored where it is asked
    assert [r["kind"] for r in scored["teacher"]] == kinds
    assert set(one_off["by_kind"]) == set(kinds)


def make_runs(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    (runs / "warm/seed0/sft_model").mkdir(parents=True)
    (runs / "gigpo/seed0/final_model").mkdir(parents=True)
    (runs / "tune/rft/lr0.0001/final_model").mkdir(parents=True)
    table = rr.DoneTable(runs / "done.json")
    table.mark("warm/seed0", {"model": "RUNS/warm/seed0/sft_model"})
    table.mark("gigpo/seed0", {})
    table.mark("sft/seed0", {})
    for lr, score in ((3e-5, 0.39), (1e-4, 0.40), (3e-4, 0.40)):  # ties go to the first in the grid
        table.mark(rr.tune_key("rft", lr), {"validation": {"success_rate": score}})
    (runs / "settings.json").write_text(json.dumps({"setting": "tiny", "overrides": [], "tune_seed": 100,
                                                    "grids": {"rft": [3e-5, 1e-4, 3e-4], "sft": [3e-4, 1e-3]}}))
    return runs


def test_each_arm_is_its_jobs_model_and_a_job_not_done_is_refused_in_one_line(tmp_path):
    runs = make_runs(tmp_path)
    keys = vm.arm_keys(runs, 0, ["warm", "gigpo", "sft"])
    assert keys == {"warm": "warm/seed0", "gigpo": "gigpo/seed0", "sft": "sft/seed0"}
    assert vm.model_of(runs, "warm/seed0") == (runs / "warm/seed0/sft_model").resolve()
    assert vm.model_of(runs, "gigpo/seed0") == runs / "gigpo/seed0/final_model"
    assert vm.shown(runs / "gigpo/seed0/final_model", runs) == "RUNS/gigpo/seed0/final_model"
    with pytest.raises(SystemExit, match="no finished job grpo/seed0"):
        vm.arm_keys(runs, 0, ["gigpo", "grpo"])
    assert vm.arm_keys(runs, 100, ["rft"]) == {"rft": "tune/rft/lr0.0001"}  # the verdict's choice
    with pytest.raises(SystemExit, match="sft: its rate is not chosen yet"):
        vm.arm_keys(runs, 100, ["sft"])
    with pytest.raises(SystemExit, match="not a verdict runs folder"):
        vm.arm_keys(tmp_path / "elsewhere", 0, ["warm"])
    (runs / "gigpo/seed0/final_model").rmdir()
    with pytest.raises(SystemExit, match="gigpo/seed0: its model .* is missing"):
        vm.model_of(runs, "gigpo/seed0")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    import torch

    from agentgym.policies.tiny import build_tiny_model
    from agentgym.trainers.config import load_config
    from agentgym.trainers.run_setup import collect_env_texts

    torch.set_num_threads(1)
    texts = collect_env_texts(HOUSEHOLD, num_tasks=4, chat=load_config("household-tiny", []).env.chat, session=None)
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), env_id=HOUSEHOLD, texts=texts, vocab_size=400,
                            hidden=32, layers=1, heads=2)


def test_reply_probabilities_are_the_models_own_over_each_admissible_command(tiny_model):
    import torch

    from agentgym.policies.hf import HFPolicy

    states = searching_demo_states(1, dawdle_prob=0.4)[:3]
    policy = HFPolicy(tiny_model)
    got = vm.command_probabilities(policy, states, chunk=4)  # passes that cut across states
    for state, row in zip(states, got):
        assert state.target in state.admissible and any(vm.command_kind(c) == "idle" for c in state.admissible)
        p = {}
        for command in state.admissible:  # the whole sequence's logits, reply tokens and end of reply scored
            prompt, reply = policy.encode_prompt(state.messages), policy.encode_response(command)
            ids = torch.tensor([prompt + reply])
            with torch.no_grad():
                logp = torch.log_softmax(policy.model(input_ids=ids).logits[0, :-1].double(), -1)
            p[command] = float(logp[torch.arange(len(prompt) - 1, ids.shape[1] - 1), ids[0, len(prompt):]].sum().exp())
        assert row["p_target"] == pytest.approx(p[state.target], rel=1e-4)
        assert row["p_idle"] == pytest.approx(sum(v for c, v in p.items() if vm.command_kind(c) == "idle"), rel=1e-4)
        assert row["p_admissible"] == pytest.approx(sum(p.values()), rel=1e-4) and row["p_admissible"] < 1


def test_the_oracles_own_episodes_never_depart_and_walking_away_from_the_goal_does():
    """household-smol's demonstrator is the oracle, which knows the layout: no search to replay."""
    from agentgym.envs.household.oracle import plan_for
    from agentgym.envs.household.world import get_layout

    walkaways = 0
    for task in heldout_tasks(12):
        layout = get_layout(task)
        plan = plan_for(layout)
        assert vm.departure(layout, [step(c) for c in plan], search=False) is None
        # the searching replay reads the oracle's straight walk as a search in that order: also no departure
        assert vm.departure(layout, [step(c) for c in plan]) is None
        first = next(i for i, c in enumerate(plan) if c.startswith("go to "))
        elsewhere = [c for c in layout.rec_names if "go to " + c not in plan[:first + 1]]
        if plan[first + 1].startswith("take ") and elsewhere:
            left = vm.departure(layout, [step(c) for c in plan[:first + 1]] + [step("go to " + elsewhere[0])],
                                search=False)
            assert (left["step"], left["expected"], left["expected_kind"], left["taken_kind"]) == \
                (first + 2, plan[first + 1], "take", "go")
            walkaways += 1
    assert walkaways >= 3


def renormalized_logp(policy, prompt: list[int], reply: list[int], allowed: list[list[int]]) -> float:
    """log pi(reply) with pi the model renormalized over `allowed` ids at each reply token, from the
    whole sequence's logits (an independent reading of admissible-only decoding's policy)."""
    import torch

    ids = torch.tensor([prompt + reply])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0].double()
    total = 0.0
    for k, (token, ids_here) in enumerate(zip(reply, allowed)):
        row = logits[len(prompt) - 1 + k]
        total += float(row[token] - torch.logsumexp(row[ids_here], 0))
    return total


def test_admissible_only_probabilities_are_the_renormalized_policys_and_sum_to_one(tiny_model):
    from agentgym.policies.hf import HFPolicy

    states = searching_demo_states(1, dawdle_prob=0.4)[:3]
    policy = HFPolicy(tiny_model)
    got = vm.command_probabilities(policy, states, chunk=4, admissible_within=24)
    free = vm.command_probabilities(policy, states, chunk=4)
    for state, row, free_row in zip(states, got, free):
        prompt = policy.encode_prompt(state.messages)
        replies = vm.admissible_replies(policy, state, lambda c: c)
        allowed = vm.trie_allowed(replies, 24)
        p = {c: float(np.exp(renormalized_logp(policy, prompt, r, a))) for c, r, a in zip(state.admissible, replies,
                                                                                          allowed)}
        assert row["p_admissible"] == pytest.approx(1.0, abs=1e-5) and free_row["p_admissible"] < 1
        assert row["p_target"] == pytest.approx(p[state.target], rel=1e-4)
        assert row["p_idle"] == pytest.approx(sum(v for c, v in p.items() if vm.command_kind(c) == "idle"), rel=1e-4)
        assert row["p_target"] > free_row["p_target"]  # the mass off the admissible replies moved onto them


def test_replies_the_reply_budget_cuts_off_are_never_given():
    replies = [[5, 7, 2], [5, 8, 9, 9, 2], [6, 2]]
    assert vm.trie_allowed(replies, 4) == [[[5, 6], [7], [2]], None, [[5, 6], [2]]]
    assert vm.trie_allowed(replies, 5) == [[[5, 6], [7, 8], [2]], [[5, 6], [7, 8], [9], [9], [2]], [[5, 6], [2]]]
    assert vm.trie_allowed([[1, 2, 3, 2]], 2) == [[[1], [2], [3], [2]]]  # none fits: decoding keeps them all


def test_greedy_answers_under_admissible_only_decoding_are_admissible_commands(tiny_model):
    from agentgym.policies.hf import HFPolicy

    states = searching_demo_states(2)
    policy = HFPolicy(tiny_model)
    within = vm.greedy_replies(policy, states, 24, format_action=lambda c: c)
    assert all(reply in state.admissible for reply, state in zip(within, states))
    free = vm.greedy_replies(policy, states, 24)
    assert any(reply not in state.admissible for reply, state in zip(free, states))  # an untrained model's


def test_a_tiny_model_is_measured_end_to_end_under_admissible_only_decoding(tmp_path, tiny_model):
    args = argparse.Namespace(runs=None, preset="household-tiny", seed=3, tasks=2, episodes=1,
                              overrides=["rollout.admissible_only=true"])
    out = vm.measure(args, {"a": tiny_model}, tmp_path, log=lambda line: None)
    a = out["arms"]["a"]
    assert out["decoding"] == "admissible-only" and a["own_episodes"]["episodes"] == 2
    assert a["teacher_forced"]["all"]["valid"] == 1.0 and a["own_episodes"]["step_shares"]["invalid"] == 0.0
    assert a["teacher_forced"]["all"]["p_admissible"] == pytest.approx(1.0, abs=1e-5)


def test_a_tiny_model_is_measured_end_to_end(tmp_path, tiny_model):
    args = argparse.Namespace(runs=None, preset="household-tiny", seed=3, tasks=2, episodes=1, overrides=[])
    out = vm.measure(args, {"a": tiny_model, "b": tiny_model}, tmp_path, log=lambda line: None)
    a, b = out["arms"]["a"], out["arms"]["b"]
    assert out["decoding"] == "free" and out["heldout_tasks"] == 2 and a["own_episodes"]["episodes"] == 2
    assert a["teacher_forced"]["all"]["steps"] == out["demonstrator"]["scored_steps"] > 0
    assert a["teacher_forced"] == b["teacher_forced"]  # greedy: the same model answers alike
    assert a["own_episodes"]["success"] == b["own_episodes"]["success"]  # the same tasks and seeds
    own = a["own_episodes"]
    assert own["failed"] == sum(own["failures"].values())


def _seed_record(code: str, invalid: float, tasks: int = 100) -> dict:
    arm = {"own_episodes": {"step_shares": {"invalid": invalid, "idle": 0.1, "repeat": 0.05},
                            "failures": {"invalid": 30, "looping": 2}},
           "teacher_forced": {"all": {"p_admissible": 0.8, "p_target": 0.4, "p_idle": 0.2}}}
    return {"code_version": code, "heldout_tasks": tasks, "episodes_per_task": 4, "arms": {"sft": arm}}


def test_each_seed_is_kept_under_its_own_key_with_every_code_version_at_the_top(tmp_path):
    path = tmp_path / "mechanism.json"
    vm.write_seed(path, 0, _seed_record("aaa", 0.6))
    vm.write_seed(path, 3, _seed_record("bbb", 0.5))
    vm.write_seed(path, 0, _seed_record("ccc", 0.7))  # a seed measured again replaces itself
    whole = json.loads(path.read_text())
    assert set(whole) == {"seed0", "seed3", "over_seeds", "code_version"}
    assert whole["seed0"]["arms"]["sft"]["own_episodes"]["step_shares"]["invalid"] == 0.7
    assert whole["code_version"] == "bbb, ccc"


def test_the_summary_over_seeds_follows_every_write_and_refuses_mixed_task_counts(tmp_path):
    path = tmp_path / "mechanism.json"
    vm.write_seed(path, 0, _seed_record("aaa", 0.6))
    vm.write_seed(path, 1, _seed_record("aaa", 0.2))
    summary = json.loads(path.read_text())["over_seeds"]
    assert summary["seeds"] == [0, 1]
    assert summary["arms"]["sft"]["invalid_steps"] == {"mean": pytest.approx(0.4), "per_seed": [0.6, 0.2]}
    assert summary["arms"]["sft"]["failed_invalid"]["mean"] == 30
    vm.write_seed(path, 1, _seed_record("aaa", 0.4))  # measured again: the mean follows
    assert json.loads(path.read_text())["over_seeds"]["arms"]["sft"]["invalid_steps"]["mean"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="same --tasks"):
        vm.write_seed(path, 2, _seed_record("aaa", 0.4, tasks=20))
