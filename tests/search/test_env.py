"""SearchQAEnv: the Gymnasium contract, the three actions, rewards, anchors and ChatEnv play."""

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym
from agentgym.envs.search.dataset import InvalidQuestionError
from agentgym.policies.scripted import OraclePolicy
from agentgym.tasks.spec import TaskSpec

ENV_ID = "agentgym/SearchQA-v0"


def test_check_env_passes_on_the_registered_id(source):
    env = gym.make(ENV_ID)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.spec.max_episode_steps >= 9  # a 4-hop oracle needs 9 actions


def test_reset_is_deterministic_and_shows_the_question(env, space):
    task = space.split("train")[3]
    a, b = env.reset(seed=1, options={"task": task}), env.reset(seed=2, options={"task": task})
    assert a == b
    obs, info = a
    assert info["instruction"] in obs and info["task_id"] == task.task_id
    assert info["admissible_actions"] is None and info["progress"] == 0.0
    _, info = env.reset(seed=5)  # no task: one from the train split
    assert info["task_id"] in {t.task_id for t in space.split("train")}


def test_search_lists_documents_and_open_shows_one(env, space, world):
    task = space.split("train")[0]
    env.reset(options={"task": task})
    start = world.get(task.params["start"])
    obs, reward, terminated, _, info = env.step(f"search[{start.title}]")
    assert info["action_valid"] and not terminated and reward == 0.0
    assert f"[{start.id}] {start.title}" in obs
    assert obs.count("\n") <= env.top_k
    obs, _, _, _, info = env.step(f"open[{start.id}]")
    assert obs.startswith(f"[{start.id}] {start.title}") and info["opened_docs"] == [start.id]
    assert info["progress"] > 0
    # by title, in any case, works too
    obs, _, _, _, info = env.step(f"OPEN [ {start.title.upper()} ]")
    assert info["action_valid"] and obs.startswith(f"[{start.id}]")


def test_answer_ends_the_episode_with_f1_reward(env, space, play):
    task = next(t for t in space.split("train") if len(space.question(t).answers[0].split()) == 2)
    gold = space.question(task).answers[0]
    obs, reward, terminated, _, info = play(env, task, [f"answer[{gold.split()[0]}]"])
    assert terminated and not info["success"] and reward == pytest.approx(2 / 3) == info["score"]
    obs, reward, terminated, _, info = play(env, task, [f"answer[  {gold.upper()}. ]"])
    assert terminated and info["success"] and reward == 1.0 == info["score"] and info["progress"] == 1.0
    obs, reward, terminated, _, info = env.step("answer[again]")
    assert terminated and reward == 0.0 and not info["action_valid"] and info["success"]


@pytest.mark.parametrize("action", ["", "look", "search[]", "search[   ]", "open[]", "open[no-such-doc]",
                                    "answer[]", "search[foo", "search(foo)", "[search] foo"])
def test_bad_actions_are_invalid_and_change_nothing(env, space, action):
    _, info0 = env.reset(options={"task": space.split("train")[1]})
    obs, reward, terminated, truncated, info = env.step(action)
    assert not info["action_valid"] and reward == 0.0 and not terminated and not truncated
    assert info["anchor"] == info0["anchor"] and obs


def test_a_search_without_hits_is_valid(env, space):
    env.reset(options={"task": space.split("train")[1]})
    obs, _, _, _, info = env.step("search[zzqqxx the of]")
    assert info["action_valid"] and "No documents match" in obs


def test_anchors_key_the_true_state(env, space):
    task = space.split("train")[2]
    plan = space.solve(task)
    _, first = env.reset(options={"task": task})
    anchors = [first["anchor"]] + [env.step(a)[4]["anchor"] for a in plan[:2]]
    assert len(set(anchors)) == 3
    # the same actions reach the same anchors in a new episode; a different search does not
    env.reset(options={"task": task})
    assert env.step(plan[0])[4]["anchor"] == anchors[1]
    env.reset(options={"task": task})
    assert env.step("search[something else entirely]")[4]["anchor"] != anchors[1]


def test_unplayable_tasks_fail_at_reset_with_a_clear_error(env):
    bad = TaskSpec(ENV_ID, {"kind": "single", "start": "per-99999", "path": [], "attribute": "name"})
    with pytest.raises(InvalidQuestionError, match="cannot be played"):
        env.reset(options={"task": bad})


def test_inline_question_over_the_world_corpus(env, world, play):
    p = world.get("per-00001")
    task = TaskSpec(ENV_ID, {"question": f"When was {p.title} born?", "answers": [str(p.attrs["birth_year"])],
                             "supporting": [p.id]})
    _, _, terminated, _, info = play(env, task, [f"open[{p.id}]", f"answer[{p.attrs['birth_year']}]"])
    assert terminated and info["success"]


def test_oracle_plays_through_chat_env_and_rollout(space):
    tasks = space.split("heldout")[:6]
    trajs = agentgym.collect(ENV_ID, tasks, OraclePolicy(space), group_size=2, seed=0)
    assert len(trajs) == 12 and all(t.success for t in trajs)
    assert all(s.action_valid for t in trajs for s in t.steps)


def test_env_plays_without_torch(source):
    import os
    import subprocess
    import sys

    code = ("import sys, gymnasium as gym, agentgym; env = gym.make('agentgym/SearchQA-v0'); "
            "env.reset(seed=0); env.step('search[harbour]'); assert 'torch' not in sys.modules; print('ok')")
    # the session's cache folder: the child process loads the index instead of building it
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


@pytest.mark.slow
def test_process_workers_build_or_load_the_index_themselves(space):
    tasks = space.split("heldout_unseen")[:3]
    trajs = agentgym.collect(ENV_ID, tasks, OraclePolicy(space), group_size=2, executor="process", num_workers=2)
    assert [t.success for t in trajs] == [True] * 6 and not any(t.infra_error for t in trajs)
