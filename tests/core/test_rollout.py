import functools

import pytest

import agentgym
from agentgym.policies import Completion, OraclePolicy, RandomPolicy
from agentgym.rollout import make_chat_env
from agentgym.toy import COUNTER_ID, CounterTaskSpace, register_counter
from agentgym.trajectory import load_trajectories, save_trajectories

register_counter()
SPACE = CounterTaskSpace()
TASKS = SPACE.split("train")


class RecordingPolicy:
    """Wraps a policy and records every batch it was asked to complete."""

    def __init__(self, inner):
        self.inner, self.batches = inner, []

    def generate(self, prompts, sampling=None, contexts=None):
        self.batches.append([c.episode for c in contexts])
        return self.inner.generate(prompts, sampling, contexts)


def test_oracle_solves_and_groups_share_initial_state():
    tasks = [TASKS[0], TASKS[5], TASKS[10]]
    trajs = agentgym.collect(COUNTER_ID, tasks, OraclePolicy(SPACE), group_size=3, seed=5)
    assert len(trajs) == 9 and all(t.success for t in trajs)
    for g in range(3):
        group = trajs[3 * g: 3 * g + 3]
        assert len({t.group_id for t in group}) == 1
        assert len({(t.steps[0].observation, t.steps[0].anchor, t.seed, t.task_id) for t in group}) == 1
    assert trajs[0].steps[0].text == "<action>inc</action>"


def test_one_batched_call_per_turn_and_finished_episodes_get_no_generation():
    tasks = [TASKS[0], TASKS[10]]  # targets 1 and 3: the first group finishes after one turn
    policy = RecordingPolicy(OraclePolicy(SPACE))
    trajs = agentgym.collect(COUNTER_ID, tasks, policy, group_size=2)
    assert [len(b) for b in policy.batches] == [4, 2, 2]
    assert set(policy.batches[1]) == {"2", "3"}
    assert [len(t.steps) for t in trajs] == [1, 1, 3, 3]


def test_same_task_and_seed_give_byte_identical_trajectories(tmp_path):
    runs = []
    for i in range(2):
        trajs = agentgym.collect(COUNTER_ID, TASKS[:4], RandomPolicy(seed=1), group_size=2, seed=3)
        save_trajectories(tmp_path / f"{i}.jsonl", trajs)
        runs.append((tmp_path / f"{i}.jsonl").read_bytes())
    assert runs[0] == runs[1]


def test_trajectories_round_trip_through_jsonl(tmp_path):
    class TokenPolicy:
        def generate(self, prompts, sampling=None, contexts=None):
            return [Completion("<action>inc</action>", [1, 2, 3], [4, 5], [-0.5, -0.25]) for _ in prompts]

    trajs = agentgym.collect(COUNTER_ID, TASKS[:2], TokenPolicy(), group_size=2)
    save_trajectories(tmp_path / "t.jsonl", trajs)
    back = load_trajectories(tmp_path / "t.jsonl")
    assert back == trajs
    assert back[0].steps[0].response_logprobs == [-0.5, -0.25]


def test_policy_error_marks_only_that_episode_infra_error():
    class FlakyPolicy:
        def generate(self, prompts, sampling=None, contexts=None):
            return [Completion("", error="HTTP 503") if c.episode == "1" else Completion("<action>inc</action>")
                    for c in contexts]

    trajs = agentgym.collect(COUNTER_ID, TASKS[:1], FlakyPolicy(), group_size=3)
    assert [t.infra_error for t in trajs] == [False, True, False]
    assert "HTTP 503" in trajs[1].error and trajs[0].success


@pytest.mark.parametrize("executor,mode", [("inprocess", "raise"), ("process", "raise"), ("process", "exit")])
def test_crashing_env_marks_its_trajectories_infra_error_and_the_rest_go_on(executor, mode):
    factory_ok = functools.partial(make_chat_env, COUNTER_ID)
    crashing = functools.partial(make_chat_env, COUNTER_ID, {"crash_at": 2, "crash_mode": mode})
    # Slot 0 (worker 0) crashes at its second step; slot 1 (worker 1) solves a target-1 task first.
    tasks = [TASKS[10], TASKS[0]]

    def factory_by_slot(counter=iter(range(10**6))):
        return crashing() if next(counter) % 2 == 0 else factory_ok()

    if executor == "process":
        factory = _SlotFactory(crash_kwargs={"crash_at": 2, "crash_mode": mode})
    else:
        factory = factory_by_slot
    trajs = agentgym.collect(factory, tasks, OraclePolicy(SPACE), group_size=1, executor=executor, num_workers=2)
    assert trajs[0].infra_error and "failed" in trajs[0].error
    assert not trajs[1].infra_error and trajs[1].success


class _SlotFactory:
    """Picklable factory: envs built in a process whose first slot is even crash (process executor:
    worker 0 hosts the even slots)."""

    def __init__(self, crash_kwargs):
        self.crash_kwargs = crash_kwargs

    def __call__(self):
        import multiprocessing
        name = multiprocessing.current_process().name
        worker_index = int(name.rsplit("-", 1)[-1]) if name != "MainProcess" else 1
        kwargs = self.crash_kwargs if worker_index % 2 == 1 else {}
        return make_chat_env(COUNTER_ID, kwargs)


def test_process_executor_matches_inprocess():
    a = agentgym.collect(COUNTER_ID, TASKS[:6], RandomPolicy(seed=2), group_size=2, executor="inprocess")
    b = agentgym.collect(COUNTER_ID, TASKS[:6], RandomPolicy(seed=2), group_size=2, executor="process")
    assert [t.to_dict() for t in a] == [t.to_dict() for t in b]


def test_bad_arguments():
    with pytest.raises(ValueError):
        agentgym.collect(COUNTER_ID, TASKS[:1], RandomPolicy(), group_size=0)
    from agentgym.errors import ConfigError
    with pytest.raises(ConfigError):
        agentgym.collect(COUNTER_ID, TASKS[:1], RandomPolicy(), executor="ray-someday")


def test_tasks_given_by_id_or_dict_play_as_their_taskspec():
    """collect took TaskSpecs only: a task id (what env.reset's options["task"] takes, and what
    `agentgym tasks list` prints) failed with "'str' object has no attribute 'task_id'"."""
    by_spec = agentgym.collect(COUNTER_ID, TASKS[:2], OraclePolicy(SPACE), seed=3)
    by_id = agentgym.collect(COUNTER_ID, [TASKS[0].task_id, TASKS[1].to_dict()], OraclePolicy(SPACE), seed=3)
    assert [t.to_dict() for t in by_id] == [t.to_dict() for t in by_spec]


@pytest.mark.parametrize("tasks, policy, words", [
    (["no-such-id"], RandomPolicy(), "unknown task id 'no-such-id'"),
    ([3], RandomPolicy(), "tasks must be TaskSpecs, task ids or task dicts"),
    (TASKS[0], RandomPolicy(), "got one TaskSpec: wrap it in a list"),
    (TASKS[:1], "random", "policy must be an agentgym Policy"),
])
def test_a_task_or_policy_of_the_wrong_kind_is_one_line(tasks, policy, words):
    from agentgym.errors import AgentGymError

    with pytest.raises(AgentGymError, match=words):
        agentgym.collect(COUNTER_ID, tasks, policy)


def test_a_caller_composed_stop_rule_and_watcher_wrap_play():
    """Stopping early and watching progress are monitors the caller hands to `play`: a rule stops
    episode 1 before its third turn (truncated, marked with its reason), the others play on, and the
    watcher sees every turn until the progress bound meets the turns played."""
    from agentgym.rollout import RolloutRequest, play
    from agentgym.turn_monitors import TurnMonitor

    class StopSecondEpisode(TurnMonitor):
        def __init__(self):
            self.seen = []

        def stop(self, episodes):
            return {e.index: {"stopped_by": "test"} for e in episodes if e.index == 1 and e.turns >= 2}

        def turn_done(self, progress):
            self.seen.append(progress)

    monitor = StopSecondEpisode()
    tasks = [t for t in TASKS if t.params["target"] >= 3][:2]  # the oracle needs at least 3 turns
    trajs = play(RolloutRequest(COUNTER_ID, tasks, 2, seed=1), OraclePolicy(SPACE), monitors=[monitor])
    assert len(trajs[1].steps) == 2 and trajs[1].truncated and trajs[1].metadata["stopped_by"] == "test"
    others = [t for i, t in enumerate(trajs) if i != 1]
    assert not trajs[1].success and all(t.success and "stopped_by" not in t.metadata for t in others)
    assert [p.turns_done for p in monitor.seen] == sorted(p.turns_done for p in monitor.seen)
    last = monitor.seen[-1]
    assert last.episodes_done == last.episodes == 4
    assert last.turns_done == last.turns_bound == sum(len(t.steps) for t in trajs)


def test_over_sampling_composed_by_hand_equals_collects_option():
    from agentgym.rollout import RolloutRequest, play
    from agentgym.turn_monitors import KeepFirstGroups

    tasks = TASKS[:5]
    by_option = agentgym.collect(COUNTER_ID, tasks, RandomPolicy(seed=4), 2, seed=2, keep_groups=2)
    by_hand = play(RolloutRequest(COUNTER_ID, tasks, 2, seed=2), RandomPolicy(seed=4), monitors=[KeepFirstGroups(2)])
    assert [t.to_dict() for t in by_hand] == [t.to_dict() for t in by_option]
    assert sum(not t.metadata.get("dropped") for t in by_hand) == 4
