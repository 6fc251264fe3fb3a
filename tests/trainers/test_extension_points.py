"""An executor and a policy engine registered from outside the package (this test module is not
part of agentgym) are found by name everywhere: collect, config checks and the trainer."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agentgym.executors import InProcessExecutor, executor_names, register_executor
from agentgym.policies.engines import RolloutEngine, engine_names, register_engine


class CountingExecutor(InProcessExecutor):
    """In-process slots that count the steps they run."""

    steps = 0

    def step(self, requests):
        CountingExecutor.steps += len(requests)
        return super().step(requests)


class CountingEngine:
    """Generates with the trainer's own policy; counts generate and sync calls."""

    made: list["CountingEngine"] = []

    def __init__(self, trainer_policy, model_path: str, settings):
        self.policy, self.model_path, self.seed = trainer_policy, model_path, settings.seed
        self.prompts = self.syncs = 0
        self.closed = False
        CountingEngine.made.append(self)

    def generate(self, prompts, sampling=None, contexts=None):
        self.sync()
        self.prompts += len(prompts)
        return self.policy.generate(prompts, sampling, contexts)

    def sync(self, force: bool = False) -> float:
        self.syncs += 1
        return 0.0

    def sleep(self, level: int = 1) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def registered():
    register_executor("counting", lambda factory, n, _workers, _options: CountingExecutor(factory, n))
    register_engine("counting", CountingEngine)
    yield
    from agentgym import executors
    from agentgym.policies import engines

    executors._EXECUTORS.pop("counting", None)
    engines._ENGINES.pop("counting", None)


def test_registered_names_are_listed_and_the_engine_meets_the_protocol(tiny_policy_factory):
    assert "counting" in executor_names() and "counting" in engine_names()
    assert isinstance(CountingEngine(tiny_policy_factory(), "m", type("C", (), {"seed": 0})()), RolloutEngine)


def test_the_trainer_policy_protocol_holds_what_the_trainer_calls(tiny_policy_factory):
    """HFPolicy meets TrainablePolicy, and a policy without the checkpointed sampler state does not:
    the trainer reads that state through the protocol, never through HFPolicy's private fields."""
    from agentgym.policies.engines import TrainablePolicy

    policy = tiny_policy_factory()
    assert isinstance(policy, TrainablePolicy)
    assert isinstance(policy.rollout_copy(3), TrainablePolicy) and policy.rollout_copy(3).synced_version == 3

    sampler = ("sampling_state", "load_sampling_state")
    rest = {name: getattr(policy, name) for name in dir(policy) if not name.startswith("__") and name not in sampler}
    assert not isinstance(SimpleNamespace(**rest), TrainablePolicy)
    assert isinstance(SimpleNamespace(**rest, **{name: getattr(policy, name) for name in sampler}), TrainablePolicy)


def test_collect_plays_on_a_registered_executor():
    import agentgym
    from agentgym.policies import RandomPolicy

    CountingExecutor.steps = 0
    tasks = agentgym.get_task_space("agentgym/Household-v0").split("train")[:2]
    trajectories = agentgym.collect("agentgym/Household-v0", tasks, RandomPolicy(), 2, executor="counting", max_turns=3)
    assert CountingExecutor.steps == sum(len(t.steps) for t in trajectories) == 12


def test_the_trainer_uses_a_registered_engine_and_executor(toy_config, tmp_path, tiny_model_dir):
    from agentgym.trainers.training import train

    CountingEngine.made.clear()
    CountingExecutor.steps = 0
    cfg = toy_config(tmp_path, tiny_model_dir, "policy.engine=counting", "env.executor=counting", "iterations=1",
                     "checkpoint_every=0")
    train(cfg, log=lambda _: None)
    [engine] = CountingEngine.made
    # rollouts and both evaluations generated on the engine; the env steps ran on the executor
    assert engine.prompts > 0 and engine.syncs > 0 and engine.closed
    assert CountingExecutor.steps > 0


def test_unknown_names_are_one_line(toy_config, tmp_path, tiny_model_dir):
    from agentgym.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown executor 'nope'; choose one of .*counting.*register_executor"):
        toy_config(tmp_path, tiny_model_dir, "env.executor=nope")
    with pytest.raises(ConfigError, match="policy.engine='nope' is unknown; choose one of .*counting"):
        toy_config(tmp_path, tiny_model_dir, "policy.engine=nope")


def test_an_engine_that_is_the_trainer_policy_is_allowed_where_hf_is(toy_config, tmp_path, tiny_model_dir):
    """The checks ask the registry what an engine is, never its name: an engine declared as the
    trainer's own policy (as "hf" is) may be sharded by FSDP and copied by the async producer;
    an engine with weights of its own (the counting one) may not."""
    from agentgym.errors import ConfigError
    from agentgym.policies import engines

    register_engine("own", lambda trainer_policy, _path, _settings: trainer_policy, trainer_model=True)
    try:
        assert engines.generates_with_trainer_model("own") and engines.generates_with_trainer_model("hf")
        assert not engines.generates_with_trainer_model("counting")
        toy_config(tmp_path, tiny_model_dir, "policy.engine=own", "data_parallel=fsdp")
        toy_config(tmp_path, tiny_model_dir, "policy.engine=own", "rollout.max_staleness=1")
        with pytest.raises(ConfigError, match="data_parallel=fsdp shards the trainer's own model"):
            toy_config(tmp_path, tiny_model_dir, "policy.engine=counting", "data_parallel=fsdp")
        with pytest.raises(ConfigError, match="policy.engine='counting' is not supported with it"):
            toy_config(tmp_path, tiny_model_dir, "policy.engine=counting", "rollout.max_staleness=1")
    finally:
        engines._ENGINES.pop("own", None)
        engines._TRAINER_MODEL.discard("own")


def test_ray_cluster_needs_are_declared_not_named(toy_config, tmp_path, tiny_model_dir, monkeypatch):
    """An executor and an engine that run on the Ray cluster say so at registration; the trainer's
    resource check, its run-wide env pool and the ray.policy_engine rule ask that, never the name."""
    from agentgym import executors, executors_ray
    from agentgym.errors import ConfigError
    from agentgym.policies import engines
    from agentgym.trainers import distributed

    class Pool:
        def __init__(self, rc):
            self.rc = rc

    register_executor("on-cluster", lambda factory, n, _w, _o: CountingExecutor(factory, n), needs_ray_cluster=True,
                      run_pool=Pool)
    register_engine("replicas", CountingEngine, needs_ray_cluster=True)
    checked: list = []
    monkeypatch.setattr(executors_ray, "check_resources", lambda rc, with_policy=False: checked.append(
        (rc.num_workers, with_policy)) or {"cpus": 8.0, "cpus_requested": 1.0})
    try:
        assert executors.needs_ray_cluster("ray") and engines.needs_ray_cluster("ray")
        assert not executors.needs_ray_cluster("counting") and not engines.needs_ray_cluster("counting")
        def pool_of(cfg):
            return distributed.ray_env_pool(cfg.env.executor, cfg.policy.engine, cfg.ray, distributed.DataParallel(),
                                            log=lambda _: None)

        cfg = toy_config(tmp_path, tiny_model_dir, "env.executor=on-cluster", "policy.engine=replicas", "ray.num_workers=3")
        pool = pool_of(cfg)
        assert isinstance(pool, Pool) and pool.rc is cfg.ray and checked == [(3, True)]
        checked.clear()
        cfg = toy_config(tmp_path, tiny_model_dir, "env.executor=counting", "policy.engine=replicas")
        assert pool_of(cfg) is None
        assert checked == [(0, True)]  # the replicas alone are placed on the cluster
        cfg = toy_config(tmp_path, tiny_model_dir, "env.executor=counting", "policy.engine=counting")
        assert pool_of(cfg) is None
        assert checked == [(0, True)]  # nothing on Ray: no cluster asked for
        with pytest.raises(ConfigError, match="ray.policy_engine=vllm sets what Ray policy replicas run: add "
                                              "policy.engine=ray or policy.engine=replicas"):
            toy_config(tmp_path, tiny_model_dir, "policy.engine=counting", "ray.policy_engine=vllm")
    finally:
        register_executor("on-cluster", "x:y")
        register_engine("replicas", "x:y")
        executors._EXECUTORS.pop("on-cluster", None)
        engines._ENGINES.pop("replicas", None)


def test_a_reward_kind_registered_from_outside_rewrites_the_trainers_outcomes():
    """One call, `register_reward(kind, factory)`, and `env.reward: {kind: ...}` in a config scores
    the trainer's episodes with it (agentgym.rewards.hook.reward_hook, the trainer's hook)."""
    from agentgym.rewards import FunctionReward, REWARD_KINDS, register_reward
    from agentgym.rewards.hook import reward_hook
    from agentgym.trajectory import Step, Trajectory

    register_reward("short_episodes", lambda spec, judge: FunctionReward(lambda t: float(len(t.steps) <= 1)))
    try:
        short = Trajectory(task_id="t", group_id="g", steps=[Step(observation="", anchor="s", action="a")], score=0.0)
        long = Trajectory(task_id="t", group_id="g", steps=[Step(observation="", anchor="s", action="a")] * 3, score=1.0,
                          success=True)
        stats = reward_hook({"kind": "short_episodes"})([short, long])
        assert (short.score, long.score) == (1.0, 0.0) and stats
    finally:
        REWARD_KINDS.pop("short_episodes", None)


def docs_block(first_line: str) -> str:
    """The ```python block of docs/architecture.md that starts with `first_line`."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    return next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if b.startswith(first_line))


def test_the_docs_executor_and_engine_train_as_written(toy_config, tmp_path, tiny_model_dir, monkeypatch):
    """docs/architecture.md's two examples, copied verbatim into modules of the user's own and named
    in the config's imports, train an iteration: a reader who copies them gets a working extension."""
    from agentgym import executors
    from agentgym.policies import engines
    from agentgym.trainers.training import train

    (tmp_path / "my_executors.py").write_text(docs_block("# my_executors.py"))
    (tmp_path / "my_engines.py").write_text(docs_block("# my_engines.py"))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        cfg = toy_config(tmp_path, tiny_model_dir, "imports=[my_executors,my_engines]", "env.executor=serial",
                         "policy.engine=copy", "iterations=1", "checkpoint_every=0")
        summary = train(cfg, log=lambda _: None)
        assert summary["iterations"] == 1
        assert "serial" in executors.executor_names() and "copy" in engines.engine_names()

        class Broken:  # an env whose step raises: that slot answers with an error, as the protocol asks
            def step(self, text):
                raise RuntimeError("backend gone")

        pool = __import__("my_executors").SerialExecutor(Broken, 2)
        pool.envs = [Broken(), Broken()]
        assert [r.error for r in pool.step([(0, "look"), (1, "look")])] == ["RuntimeError('backend gone')"] * 2
    finally:
        executors._EXECUTORS.pop("serial", None)
        engines._ENGINES.pop("copy", None)
        for name in ("my_executors", "my_engines"):
            __import__("sys").modules.pop(name, None)


def test_a_config_files_imports_register_what_it_names_before_it_is_checked(tmp_path, monkeypatch):
    """`imports: [my_module]` in a config file, with the estimator that module registers: the config
    loads (it failed as an unknown estimator when the imports ran after the checks)."""
    from agentgym.trainers import estimators
    from agentgym.trainers.config import load_config

    (tmp_path / "my_sign_estimator.py").write_text(
        "import numpy as np\n"
        "from agentgym.trainers.estimators import register_estimator\n\n"
        "register_estimator('sign_of_outcome', lambda batch, cfg, values=None, progress=None: "
        "np.zeros(len(batch.reward)), group_relative=True)\n")
    (tmp_path / "config.yaml").write_text(
        "imports: [my_sign_estimator]\nestimator:\n  name: sign_of_outcome\ntiny:\n  build: true\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert load_config(tmp_path / "config.yaml").estimator.name == "sign_of_outcome"
    finally:
        estimators.ESTIMATORS.pop("sign_of_outcome", None)
        __import__("sys").modules.pop("my_sign_estimator", None)
