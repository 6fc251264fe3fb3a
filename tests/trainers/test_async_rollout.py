"""Asynchronous rollouts: the engine at staleness 0 is the synchronous loop bit for bit, batches
never come from weights older than the bound, importance weights and the off-policy losses on
hand-made numbers, partial-rollout flags, long-tail control, and the one-line config errors."""

import functools
import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentgym.errors import ConfigError  # noqa: E402
from agentgym.trajectory import Step, Trajectory  # noqa: E402


# --- importance weights and losses on a hand-made batch -------------------------------------------
def test_importance_weights_equal_exp_of_new_minus_behaviour():
    from agentgym.trainers.ppo import importance_weights

    new = torch.tensor([[-1.0, -0.5, -2.0, -0.1]])
    behaviour = torch.tensor([[-1.0, -1.5, -0.5, -3.0]])
    w, truncated, over = importance_weights(new, behaviour, cap=2.0)
    expected = [1.0, np.e, np.exp(-1.5), np.exp(2.9)]
    assert torch.allclose(w[0], torch.tensor(expected, dtype=torch.float32), rtol=1e-6)
    assert torch.allclose(truncated[0], torch.tensor([1.0, 2.0, np.exp(-1.5), 2.0], dtype=torch.float32), rtol=1e-6)
    assert over[0].tolist() == [False, True, False, True]


def test_truncated_and_decoupled_losses_by_hand():
    from agentgym.trainers.ppo import ImportanceStats, ppo_clip_loss

    logp = torch.tensor([[-0.5, -0.5, -2.0]], requires_grad=True)
    behaviour = torch.tensor([[-1.5, -1.5, -1.0]])  # w = e, e, e^-1
    adv = torch.tensor([[1.0, -1.0, 1.0]])
    mask = torch.ones(1, 3)
    e = float(np.e)
    # truncated IS, cap 2, clip [0.8, 1.2]: token 1 min(2*1, 1.2*1)=1.2; token 2 min(2*-1, 1.2*-1)=-2;
    # token 3 min(e^-1, 0.8) = e^-1  -> loss = -(1.2 - 2 + e^-1) / 3
    loss, st = ppo_clip_loss(logp, behaviour, adv, mask, 0.8, 1.2, is_cap=2.0)
    assert float(loss.detach()) == pytest.approx(-(1.2 - 2.0 + 1 / e) / 3, rel=1e-6)
    loss.backward()
    assert float(logp.grad[0, 1]) == 0.0  # the truncated negative-advantage token gives no gradient
    acc = ImportanceStats()
    acc.add(st)
    summary = acc.summary()
    assert summary["is_weight_mean"] == pytest.approx((2 * e + 1 / e) / 3, rel=1e-6)
    assert summary["is_weight_max"] == pytest.approx(e, rel=1e-6)
    assert summary["is_truncated_frac"] == pytest.approx(2 / 3)

    # decoupled: proximal = behaviour + 0.5 on every token -> behaviour weight e^0.5 (under the cap of 2)
    prox = behaviour + 0.5
    loss_d, st_d = ppo_clip_loss(logp.detach(), behaviour, adv, mask, 0.8, 1.2, is_cap=2.0, prox_logp=prox)
    r = torch.exp(logp.detach() - prox)[0]  # e^0.5, e^0.5, e^-1.5
    per = [min(float(r[0]), 1.2) * 1, min(-float(r[1]), -1.2 * 1.0) * 1, min(float(r[2]), 0.8)]
    assert float(loss_d) == pytest.approx(-np.exp(0.5) * sum(per) / 3, rel=1e-6)
    assert st_d.is_truncated == 0 and st_d.is_max == pytest.approx(np.exp(0.5), rel=1e-6)
    # with the proximal policy equal to the behaviour one, decoupled PPO is plain PPO
    plain, _ = ppo_clip_loss(logp.detach(), behaviour, adv, mask, 0.8, 1.2)
    same, _ = ppo_clip_loss(logp.detach(), behaviour, adv, mask, 0.8, 1.2, prox_logp=behaviour)
    assert float(plain) == pytest.approx(float(same), rel=1e-7)


# --- config ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, words", [
    (["rollout.max_staleness=-1"], "rollout.max_staleness must be >= 0"),
    (["ppo.is_cap=0"], "ppo.is_cap"),
    (["ppo.is_cap=-1.5"], "ppo.is_cap"),
    (["rollout.max_staleness=1", "estimator.name=ppo"], "fits a head"),
    (["rollout.max_staleness=2", "estimator.name=spa"], "fits a head"),
    (["rollout.partial_rollouts=true"], "rollout.max_staleness >= 1"),
    (["rollout.max_staleness=1", "ppo.recompute_old_logprobs=true"], "ppo.decoupled"),
    (["rollout.oversample_groups=-1"], "oversample_groups"),
    (["rollout.episode_time_limit_s=0"], "episode_time_limit_s"),
])
def test_bad_async_settings_are_one_line_config_errors(overrides, words):
    from agentgym.trainers.config import load_config

    with pytest.raises(ConfigError) as info:
        load_config({}, ["tiny.build=true", *overrides])
    assert words in str(info.value) and "\n" not in str(info.value)


def test_step_version_and_partial_flag_roundtrip_and_old_records_load():
    t = Trajectory(task_id="t", group_id="g", steps=[Step("o", "a", policy_version=3, partial=True)])
    back = Trajectory.from_dict(t.to_dict())
    assert back.steps[0].policy_version == 3 and back.steps[0].partial is True
    old = {"observation": "o", "anchor": "a", "text": "x"}  # a record written before the fields existed
    assert Step.from_dict(old).policy_version is None and Step.from_dict(old).partial is False


# --- the engine -----------------------------------------------------------------------------------
def _setup(cfg, model_dir):
    from agentgym.policies.hf import HFPolicy
    from agentgym.registration import get_task_space
    from agentgym.tasks.source import make_task_source_from_config
    from agentgym.trainers.task_selection import select_train_tasks

    space = get_task_space(cfg.env.id)
    source = make_task_source_from_config(cfg.tasks, space, select_train_tasks(cfg.env, space, cfg.seed), seed=cfg.seed)
    return HFPolicy(model_dir), source


def _final_weights(run_dir):
    from safetensors.torch import load_file

    return load_file(str(run_dir / "final_model" / "model.safetensors"))


def test_staleness_zero_through_the_engine_reproduces_the_synchronous_run(toy_config, tmp_path, sft_model_dir,
                                                                           monkeypatch):
    """The producer thread, its weight copy, the version wait and the seed hand-over, at K = 0,
    give exactly the inline batches' run: same rollouts, losses and final weights."""
    from agentgym.trainers import training
    from agentgym.trainers.batches import BatchProducer
    from agentgym.trainers.training import train

    overrides = ("iterations=3", "checkpoint_every=0", "estimator.name=rloo", "rollout.group_size=3")
    sync_cfg = toy_config(tmp_path / "sync", sft_model_dir, *overrides)
    sync_metrics: list = []
    train(sync_cfg, log=lambda _: None, on_iteration=sync_metrics.append)

    monkeypatch.setattr(training, "BatchProducer", functools.partial(BatchProducer, background=True))
    eng_cfg = toy_config(tmp_path / "engine", sft_model_dir, *overrides)
    eng_metrics: list = []
    train(eng_cfg, log=lambda _: None, on_iteration=eng_metrics.append)

    assert [m["async"]["staleness"] for m in eng_metrics] == [{"0": m["train"]["samples"]} for m in eng_metrics]
    assert any(m["train"].get("pg_loss") for m in sync_metrics)  # the run trained on something
    for a, b in zip(sync_metrics, eng_metrics):
        assert a["rollout"] == b["rollout"] and a["adv"] == b["adv"]
        assert {k: a["train"][k] for k in a["train"]} == {k: b["train"][k] for k in a["train"]}
    w_sync, w_eng = _final_weights(tmp_path / "sync" / "run"), _final_weights(tmp_path / "engine" / "run")
    assert w_sync.keys() == w_eng.keys() and all(torch.equal(w_sync[k], w_eng[k]) for k in w_sync)


def test_batches_never_come_from_weights_older_than_the_bound(toy_config, tmp_path, tiny_model_dir):
    from agentgym.trainers.async_rollout import AsyncRollouts

    cfg = toy_config(tmp_path, tiny_model_dir, "rollout.max_staleness=2", "iterations=5")
    policy, source = _setup(cfg, tiny_model_dir)
    engine = AsyncRollouts(cfg, policy, source)
    try:
        batches = [engine.get(j) for j in range(3)]  # the trainer has published nothing: all from version 0
        for j, b in enumerate(batches):
            versions = {s.policy_version for t in b.trajectories for s in t.steps}
            assert versions == {0}, (j, versions)
        time.sleep(1.0)
        assert 3 not in engine._ready  # batch 3 would be 3 versions old: the producer waits
        with torch.no_grad():
            for p in policy.model.parameters():
                p.add_(0.01)
        engine.finish(0, policy, batches[0], [])  # version 1 published
        b3 = engine.get(3)
        assert {s.policy_version for t in b3.trajectories for s in t.steps} == {1}
        assert b3.wait_on_trainer_s > 0.5  # the producer waited for the trainer
        # the producer sampled from the published weights, not its stale copy
        for a, b in zip(engine.rollout_policy.model.parameters(), policy.model.parameters()):
            assert torch.equal(a, b)
        from agentgym.trainers.async_rollout import check_staleness

        with pytest.raises(RuntimeError, match="exceeds"):
            check_staleness(batches[0].trajectories, 3, 2)
    finally:
        engine.close()


class _PublishAfterFirstTurn:
    """Wraps the producer's policy: after the first batched turn the trainer publishes version 1."""

    def __init__(self, inner, publish):
        self.inner, self.publish, self.calls = inner, publish, 0
        self.model = inner.model  # the engine loads published weights into it

    def generate(self, prompts, sampling=None, contexts=None):
        return self._after(self.inner.generate(prompts, sampling, contexts))

    def generate_ids(self, prompt_ids, sampling=None, cache_keys=None):  # the engine's token-level path
        return self._after(self.inner.generate_ids(prompt_ids, sampling, cache_keys=cache_keys))

    def _after(self, out):
        self.calls += 1
        if self.calls == 1:
            self.publish()
        return out


@pytest.mark.parametrize("partial", [True, False])
def test_partial_rollout_flags(toy_config, tmp_path, tiny_model_dir, partial):
    from agentgym.trainers.async_rollout import AsyncRollouts, RolloutBatch

    cfg = toy_config(tmp_path, tiny_model_dir, "rollout.max_staleness=1", f"rollout.partial_rollouts={partial}",
                     "iterations=0", "rollout.group_size=3")
    policy, source = _setup(cfg, tiny_model_dir)
    engine = AsyncRollouts(cfg, policy, source)  # iterations=0: the thread makes nothing, the test drives it
    try:
        engine.rollout_policy = _PublishAfterFirstTurn(
            engine.rollout_policy, lambda: engine.finish(0, policy, RolloutBatch(0, None, []), []))
        batch = engine._produce(0)
        multi = [t for t in batch.trajectories if len(t.steps) > 1]
        assert multi, "every episode ended after one step: nothing spans the update"
        for t in batch.trajectories:
            assert t.steps[0].policy_version == 0 and not t.steps[0].partial
            for s in t.steps[1:]:
                assert s.policy_version == (1 if partial else 0)
                assert s.partial is partial
    finally:
        engine.close()


def test_async_training_end_to_end(toy_config, tmp_path, sft_model_dir):
    from agentgym.trainers.training import train

    cfg = toy_config(tmp_path, sft_model_dir, "rollout.max_staleness=1", "iterations=3", "checkpoint_every=0",
                     "estimator.name=rloo", "rollout.group_size=3", "ppo.decoupled=true", "rollout.oversample_groups=1")
    metrics: list = []
    summary = train(cfg, log=lambda _: None, on_iteration=metrics.append)
    assert summary["iterations"] == 3
    for m in metrics:
        a = m["async"]
        assert a["staleness_max"] <= 1 and set(a["staleness"]) <= {"0", "1"}
        assert a["dropped_groups"] == 1 and m["rollout"]["episodes"] == 2 * 3  # the over-sampled group, counted
        if m["train"]["samples"]:
            assert m["train"]["is_weight_max"] >= m["train"]["is_weight_mean"] > 0
    assert metrics[-1]["async"]["dropped_groups_total"] == 3


# --- long-tail control in collect -----------------------------------------------------------------
def test_oversampling_keeps_the_first_groups_to_finish(toy_env_id):
    from agentgym.policies.scripted import OraclePolicy
    from agentgym.registration import get_task_space
    from agentgym.rollout import collect
    from agentgym.tasks.spec import TaskSpec

    tasks = [TaskSpec(toy_env_id, {"length": 4, "goal": g}, seed=0) for g in (3, 1, 2)]
    trajs = collect(toy_env_id, tasks, OraclePolicy(get_task_space(toy_env_id)), 2, keep_groups=2,
                    chat={"history": 1})
    dropped = {t.task["params"]["goal"] for t in trajs if t.metadata.get("dropped")}
    kept = [t for t in trajs if not t.metadata.get("dropped")]
    assert dropped == {3} and len(trajs) == 6  # the slowest group is returned, marked, not lost
    assert all(t.success for t in kept) and {t.task["params"]["goal"] for t in kept} == {1, 2}


class _SlowPolicy:
    def generate(self, prompts, sampling=None, contexts=None):
        from agentgym.policies.base import Completion

        time.sleep(0.05)
        return [Completion(text="go left") for _ in prompts]


def test_episode_wall_clock_limit_cuts_the_long_tail(toy_env_id):
    from agentgym.rollout import collect
    from agentgym.tasks.spec import TaskSpec

    tasks = [TaskSpec(toy_env_id, {"length": 4, "goal": 2}, seed=0)]
    trajs = collect(toy_env_id, tasks, _SlowPolicy(), 2, episode_time_limit=0.12, chat={"history": 1})
    for t in trajs:
        assert t.metadata.get("time_limit") and t.truncated and not t.success
        assert 1 <= len(t.steps) < 8  # the env's own limit is 8 steps


# --- the task source shared by producer thread and trainer ---------------------------------------
class _RecordingSource:
    def __init__(self):
        self.calls = []

    def next_tasks(self, n):
        self.calls.append(("next_tasks", n))
        return list(range(n))

    def update(self, trajectories, advantages):
        self.calls.append(("update",))
        return {}

    def metrics(self):
        return {"m": 1.0}

    def state_dict(self):
        return {"s": 1}

    def curriculum(self):  # not part of what the trainer shares: must not be reachable through the wrapper
        raise AssertionError("reached through the wrapper")


def test_the_shared_task_source_waits_for_the_lock_and_exposes_only_what_the_trainer_uses():
    from agentgym.trainers.batches import _LockedSource

    lock = threading.RLock()
    source = _LockedSource(_RecordingSource(), lock)
    got = []
    with lock:  # the trainer holds it (recording a batch): the producer's draw has to wait
        worker = threading.Thread(target=lambda: got.append(source.next_tasks(3)))
        worker.start()
        worker.join(0.2)
        assert worker.is_alive() and not got
    worker.join(5)
    assert got == [[0, 1, 2]]
    assert source.update([], []) == {} and source.metrics() == {"m": 1.0} and source.state_dict() == {"s": 1}
    with pytest.raises(AttributeError):
        source.curriculum  # no delegation: an attribute the trainer does not use is not forwarded
