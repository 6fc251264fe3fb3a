"""Training configuration: nested dataclasses loaded from YAML, every field overridable with
dotted `key=value` pairs (`estimator.name=grpo ppo.lr=1e-4 env.chat.history=full`).

Presets live in trainers/presets/<name>.yaml; `load_config("household-tiny", [...])` takes a
preset name or a YAML path. Values of overrides are parsed as YAML scalars (numbers, bools,
null, lists). Validation errors are ConfigError with one line saying what to change.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.errors import ConfigError
from agentgym.registration import import_modules
from agentgym.safe_files import UnsafeFileError, read_regular

PRESET_DIR = Path(__file__).parent / "presets"


from agentgym.chat import ChatConfig  # noqa: E402  (torch-free)
from agentgym.tasks.source import TasksConfig  # noqa: E402  (torch-free)
from agentgym.executors_ray import RayConfig  # noqa: E402  (ray-free until used)
from agentgym.trainers.estimators import EstimatorConfig  # noqa: E402  (numpy only)
from agentgym.trainers.rollout_correction import RolloutCorrectionConfig  # noqa: E402  (numpy only)
from agentgym.trainers.distill import DistillConfig  # noqa: E402  (torch-free until a teacher loads)
from agentgym.trainers.checks import validate_config  # noqa: E402  (torch-free)
from agentgym.policies.model_files import DTYPES  # noqa: E402  (torch-free)


@dataclass
class VLLMConfig:
    """policy.engine=vllm: the rollout engine's settings, VLLMPolicy's arguments (None: its default).
    vLLM's own engine arguments that agentgym does not name go to vllm.LLM through `engine_args`."""

    max_model_len: int | None = None  # prompt + response tokens (VLLMPolicy's default: 2048)
    dtype: str | None = None  # fp32 | bf16 | fp16; None: the trainer's dtype
    gpu_memory_utilization: float | None = None  # CUDA: share of GPU memory vLLM may take
    kv_cache_gib: float | None = None  # CPU: the KV cache's size
    max_lora_rank: int | None = None  # None: the trainer's LoRA rank
    enforce_eager: bool | None = None
    enable_sleep_mode: bool | None = None
    trust_remote_code: bool | None = None
    engine_args: dict = field(default_factory=dict)  # passed to vllm.LLM unchanged

    unknown_key_hint = " (vLLM's own engine arguments go under policy.vllm.engine_args)"

    def policy_kwargs(self) -> dict:
        """VLLMPolicy's keyword arguments: the fields that are set, then engine_args."""
        named = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "engine_args"}
        clash = sorted(set(self.engine_args) & set(named))
        if clash:
            raise ConfigError(f"policy.vllm.engine_args.{clash[0]} is a setting of its own: set "
                              f"policy.vllm.{clash[0]} instead")
        return {**{k: v for k, v in named.items() if v is not None}, **self.engine_args}

@dataclass
class PolicyConfig:
    model: str = ""  # local HF folder or hub id; empty with tiny.build=true builds one in the run dir
    engine: str = "hf"  # "vllm": rollouts and eval generate on an in-process vLLM engine synced after each update
    # "ray": rollouts generate on HFPolicy replicas in Ray actors (ray.policy_*), synced after each update
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    device: str = "cpu"
    dtype: str | None = None  # None: fp32 on CPU, bf16 on CUDA
    lora: dict | None = None  # LoraConfig kwargs; {} = defaults (r=16, all-linear)
    reference: str | None = None  # "copy": frozen copy for KL when there is no LoRA
    max_prompt_tokens: int | None = None


@dataclass
class TinyModelConfig:
    build: bool = False  # build a tiny model from the env's text when policy.model is empty
    vocab_size: int = 1500
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    arch: str = "llama"
    num_tasks: int = 64  # train tasks whose oracle + random rollouts feed the tokenizer


@dataclass
class EnvConfig:
    id: str = "agentgym/Household-v0"
    split: str = "train"
    tasks_file: str | None = None  # JSONL of TaskSpecs to train on instead of a split
    fresh_tasks: int = 0  # > 0: train on this many tasks newly drawn from the env's generator instead of a split
    task_filter: dict = field(default_factory=dict)  # params key -> value or list of allowed values
    categories: list = field(default_factory=list)  # task_space.category globs, e.g. ["*/easy"]
    max_tasks: int | None = None  # cap on the training pool (after filtering)
    chat: ChatConfig = field(default_factory=ChatConfig)  # what the model sees: prompt layout, parser, memory
    env_kwargs: dict = field(default_factory=dict)
    executor: str = "inprocess"  # inprocess | process | ray (env workers as Ray actors; settings in `ray:`)
    max_turns: int = 1000
    requires: list = field(default_factory=list)  # env features the config needs (trainers/env_requirements.py)
    # a reward over the env's own (agentgym.rewards.hook): a mode name the env takes (SWE-v0:
    # patch_similarity|tests|both) or a mapping {kind: rubric|judge|relative_judge|meta_reasoning, ...}
    reward: Any = None


@dataclass
class RolloutConfig:
    tasks_per_iter: int = 8
    group_size: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 32
    # true: replies are decoded within the env's admissible actions (a trie of their tokens; policy.engine=hf),
    # in training and in the run's evaluations alike, so an inadmissible command cannot be sampled; the
    # trained logprobs stay the raw model's, as with top_p (docs/training.md, "Admissible-only decoding")
    admissible_only: bool = False
    # history=full: a chat template that rewrites earlier turns stops the run ("error") or that turn is
    # re-rendered and trained as a new sequence ("per-turn", counted: rollout/retokenized_turns)
    on_template_mismatch: str = "error"
    # Asynchronous rollouts and long-tail control (trainers/batches.py)
    max_staleness: int = 0  # K > 0: generate the next batches while training, from weights <= K updates old
    partial_rollouts: bool = False  # async: load newer weights between turns (episodes may span an update)
    episode_time_limit_s: float | None = None  # cut episodes still running after this many seconds
    oversample_groups: int = 0  # play tasks_per_iter + this many groups, train on the first to finish


@dataclass
class PPOConfig:
    sample_mode: str = "per-step"  # "per-step" | "full" (one sequence per episode, env tokens masked)
    epochs: int = 1
    minibatch_size: int = 64  # samples per optimizer step
    micro_batch_size: int = 16  # samples per forward/backward (gradient accumulation)
    # > 0: micro-batches cut by tokens instead (rows x longest row at most this, one sample at least),
    # as verl's dynamic batch size: long episodes go alone, short steps many at a time. On a CPU the
    # update is fastest at about 1,000 tokens per pass (main job: 0.87x the CPU of 32 samples).
    micro_batch_tokens: int = 0
    lr: float = 1e-4
    weight_decay: float = 0.0
    warmup_steps: int = 0
    clip_eps: float = 0.2
    asymmetric_clip: bool | None = None  # [1/(1+eps), 1+eps]; None: the estimator's declared default (on for loop)
    max_grad_norm: float = 1.0
    kl_coef: float = 0.0
    entropy_coef: float = 0.0  # bonus on the responses' mean token entropy (verl's entropy_coeff)
    drop_abs_adv_below: float = 0.0  # skip samples with |A| below this (LOOP drops |A| < 0.01)
    loss_agg: str = "token-mean"  # "token-mean" | "seq-mean"
    recompute_old_logprobs: bool = False
    value_coef: float = 0.5
    value_lr: float = 1e-3
    is_cap: float | None = None  # truncation of importance weights; None: 2.0 with async rollouts, off otherwise
    decoupled: bool = False  # decoupled PPO: trust region around the weights at update start (async)
    # A prompt prefix shared by samples of a micro-batch (a task's template and instruction, a group's
    # identical first turns) is computed once, the rest on top of its KV cache (trainers/shared_prefix.py):
    # the same gradient up to float summation order, about half the tokens in the main job.
    share_prefixes: bool = True
    # With LoRA on the top layers only (policy.lora.top_layers), the rollout keeps the frozen layers' outputs
    # and the update starts from them (policies/frozen_states.py): the frozen layers run once per token, in
    # the rollout. The HF engine in this process, one process, no value head.
    reuse_frozen_states: bool = True
    frozen_states_max_gib: float = 4.0  # what those outputs may hold per iteration (beyond it: recomputed)
    # "bf16": the update's forward and backward multiply in bf16 under autocast (weights, optimizer and
    # loss stay fp32; trainers/precision.py): refused where the hardware has no native bf16 matmul
    matmul_dtype: str = "fp32"
    # the engine's and the trainer's probabilities of a sampled token differ (bf16, vLLM, ...): the PPO ratio is
    # then taken against the trainer's own and the advantage weighted by their ratio (trainers/rollout_correction.py)
    rollout_correction: RolloutCorrectionConfig = field(default_factory=RolloutCorrectionConfig)


@dataclass
class DaggerConfig:
    """DAgger after the warm start's SFT (trainers/dagger.py): the clone plays train tasks, the task
    space's stepwise expert (`teacher(spec)`) labels every state it reached, and SFT runs again on
    the demonstrations plus every relabelled step so far; `rounds` times."""
    rounds: int = 0  # 0: plain behaviour cloning
    tasks: int = 100  # train tasks the clone plays per round (a new slice of them each round)
    epochs: int = 1  # SFT epochs over the aggregate per round
    temperature: float = 1.0  # the clone's sampling temperature in its DAgger episodes


@dataclass
class SFTConfig:
    enabled: bool = False
    num_tasks: int = 200  # oracle trajectories on this many train tasks
    # 0 with sft.dagger.rounds: DAgger alone, on a start model (policy.model) that is a clone already
    epochs: int = 3
    lr: float = 1e-3
    batch_size: int = 32  # samples per step: demonstrated steps, or whole episodes with env.chat.history=full
    weight_decay: float = 0.0
    max_steps: int | None = None  # stop after this many optimizer steps
    # Per turn, the chance the oracle first makes an inadmissible move, so SFT also shows how to
    # go on after "Nothing happens." (states the plain oracle never visits); slips are not targets.
    slip_prob: float = 0.0
    # "oracle" knows where everything is; "searching" knows only what it has seen and searches
    # receptacles in a random order (household), so the clone picks its next stop among listed ones.
    expert: str = "oracle"
    # With the searching expert: before each command it idles (look / inventory / examine) with this
    # probability, so the warm start wastes turns the way an imperfect demonstrator does.
    dawdle_prob: float = 0.0
    # Train only on demonstrations that reached the goal (true, the long-standing behaviour). false
    # keeps every demonstration, failed ones too: the clone then inherits the demonstrator's whole
    # habit (its idling), which is the setting where imitation has a low ceiling (issue 35).
    filter_success: bool = True
    # The demonstrator's replies open with an RLVMR meta-reasoning tag picked by rule from what it does
    # (reflection after a slip, explore for a first visit, monitor for idling, planning otherwise), so the
    # warm start tags and RL can change which tags it writes (env.reward kind meta_reasoning). Needs the
    # tag parser (env.chat.parser=tag) and an env whose task space has a tag rule (meta_tag).
    tags: bool = False
    # "bf16": each step's matrix multiplies under bf16 autocast, where the device has them natively
    # (trainers/precision.py): SFT steps of the tiny ALFWorld model ran 1.7x faster on an AVX-512 BF16 CPU
    matmul_dtype: str = "fp32"
    dagger: DaggerConfig = field(default_factory=DaggerConfig)


@dataclass
class EvalConfig:
    every: int = 5  # iterations; 0 = only before and after training
    # evaluate the start model before RL (verl's trainer.val_before_train): the summary's gain is measured
    # against it. false: the final evaluation only, no gain; a real model's evaluation on a CPU takes an hour
    before: bool = True
    split: str = "heldout"
    num_tasks: int = 50
    temperature: float = 0.0  # greedy by default
    episodes_per_task: int = 1  # > 1 with temperature > 0: less noisy success estimates
    max_new_tokens: int | None = None
    # episodes played at once (agentgym.evaluation's max_batch_episodes): a real model keeps each
    # episode's KV cache between turns, about 23 MB per household episode for SmolLM2-135M
    max_batch_episodes: int = 256


@dataclass
class LogConfig:
    tensorboard: bool = True  # when installed
    wandb: bool = False
    plot: bool = True
    # keep the episodes of iteration 1, of every N-th iteration and of each evaluation in the run dir,
    # with the advantages they trained on (trainers/records.py; browse with `agentgym view RUN_DIR`); 0 = never
    save_trajectories_every: int = 5


@dataclass
class TrainConfig:
    name: str = "run"
    seed: int = 0
    iterations: int = 20
    run_dir: str | None = None  # default runs/<name>
    checkpoint_every: int = 5
    time_budget_s: float | None = None  # stop RL early (and still evaluate) past this wall time
    torch_threads: int | str | None = None  # None: torch's default; auto: the cores free now (trainers/threads.py)
    data_parallel: str = "ddp"  # with --nproc/torchrun: ddp (a model replica per rank) | fsdp (sharded, FSDP2)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    estimator: EstimatorConfig = field(default_factory=EstimatorConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)  # task source: split or evolve, and a curriculum
    ray: RayConfig = field(default_factory=RayConfig)  # env workers / policy actors on Ray (docs/scaling.md)
    distill: DistillConfig = field(default_factory=DistillConfig)  # on-policy distillation (trainers/distill.py)
    imports: list = field(default_factory=list)  # modules that register user envs, imported before env.id is checked

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# --- loading ---------------------------------------------------------------------------------
def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


# A config is a few hundred lines: bounds far above any real one, far below what hurts.
MAX_YAML_BYTES = 1 << 20
MAX_YAML_DEPTH = 32
MAX_YAML_NODES = 100_000


def safe_yaml(text: str, where: str):
    """yaml.safe_load for config text, refusing what only a hostile or broken file has: aliases
    (`*name`, whose nesting expands a 1 KB file to 10^9 values, or loops), nesting deeper than
    MAX_YAML_DEPTH, more than MAX_YAML_NODES values, numbers Python will not read. yaml.YAMLError
    for text that is not YAML; ConfigError (one line naming `where`) for the rest."""
    import yaml

    # libyaml's parser when PyYAML has it (the same events, types and errors; the pure-Python one
    # took most of a run's config loading, which parses every override)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = nodes = 0
    for event in _events(yaml, text, loader, where):
        if isinstance(event, yaml.AliasEvent):
            raise ConfigError(f"{where} uses a YAML alias (*{event.anchor}): configs take no aliases; write the "
                              "values out")
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise ConfigError(f"{where} nests deeper than {MAX_YAML_DEPTH} levels: not a config")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
            if nodes > MAX_YAML_NODES:
                raise ConfigError(f"{where} holds more than {MAX_YAML_NODES} values: not a config")
    try:
        return yaml.load(text, Loader=loader)
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. an integer of 5,000 digits
        raise ConfigError(f"{where} holds a value Python cannot read ({str(exc).splitlines()[0][:100]})") from None


def _events(yaml, text: str, loader, where: str):
    """yaml.parse's events; libyaml stops at 1,000 levels of nesting itself, said as the depth check says it."""
    try:
        yield from yaml.parse(text, Loader=loader)
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):
            raise ConfigError(f"{where} nests deeper than {MAX_YAML_DEPTH} levels: not a config") from None
        raise


def _read_yaml(source: str | Path) -> dict:
    import yaml

    path = Path(source)
    if not path.suffix and not path.exists():
        path = PRESET_DIR / f"{source}.yaml"
        if not path.is_file():
            raise ConfigError(f"no config file or preset named {source!r}; presets: {', '.join(list_presets())}")
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    try:  # bounded, and a FIFO or a folder is named as one: a multi-GB file named by mistake is refused before it is read into memory
        raw = read_regular(path, MAX_YAML_BYTES, "config file")
    except UnsafeFileError as exc:
        raise ConfigError(str(exc)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
    # The file may be anything a path or a link names (a key file, a token): its errors name it and say
    # where it breaks, but show none of its text until its keys are a config's.
    try:
        data = safe_yaml(text, str(path)) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        # yaml's own words, without what they quote of the text beyond a character ("found character '\t'")
        problem = re.sub(r"'([^']*)'", lambda m: "'...'" if re.search(r"\w\w\w", m.group(1)) else m.group(0),
                         str(exc.problem).splitlines()[0][:120]) if getattr(exc, "problem", None) else "unreadable"
        raise ConfigError(f"{path} is not valid YAML{where} ({problem}): fix it, or name a preset or another config "
                          "file") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config fields")
    known = [f.name for f in dataclasses.fields(TrainConfig)]
    if data and not any(k in known for k in data if isinstance(k, str)):  # its keys are not named: they are its text
        close = sorted({m for k in data if isinstance(k, str) for m in difflib.get_close_matches(k, known, n=1)})
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise ConfigError(f"{path} is not an agentgym config: none of its {len(data)} top-level keys is a config "
                          f"field ({hint}known: {', '.join(known)}); name a preset or a YAML config file")
    return data


def parse_overrides(pairs: list[str]) -> dict:
    """['a.b=1', 'c=x'] -> {'a': {'b': 1}, 'c': 'x'} with YAML-typed values."""
    import yaml

    tree: dict = {}
    for pair in pairs:
        if "=" not in pair:
            # `train PRESET --resume runs/x` reads the path as an override: --resume takes no value
            path_hint = ("; a run dir is given as --run-dir PATH (--resume and --overwrite take no value)"
                         if "/" in pair or pair.startswith(".") else "")
            raise ConfigError(f"override {pair!r} is not of the form key=value (e.g. estimator.name=grpo){path_hint}")
        key, raw = pair.split("=", 1)
        try:
            value = safe_yaml(raw, f"override {key.strip()}") if raw != "" else ""
        except yaml.YAMLError:
            value = raw
        node = tree
        parts = key.strip().split(".")
        if not all(p.strip() for p in parts):
            raise ConfigError(f"override {pair[:80]!r} has an empty key part: write section.field=value")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {pair!r} conflicts with another override of {part!r}")
        node[parts[-1]] = value
    return tree


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _build(cls, data: dict, prefix: str = ""):
    """Instantiate dataclass `cls` from `data`, refusing unknown keys with their dotted name."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            raise ConfigError(unknown_key(prefix.rstrip("."), key, list(fields)) + getattr(cls, "unknown_key_hint", ""))
        ftype = fields[key].type
        sub = _dataclass_of(fields[key])
        if sub is not None:
            if not isinstance(value, dict):
                raise ConfigError(f"config field {prefix}{key} must be a mapping, got {value!r}")
            kwargs[key] = _build(sub, value, f"{prefix}{key}.")
        else:
            kwargs[key] = _coerce(value, ftype, f"{prefix}{key}")
            _check_value(f"{prefix}{key}", kwargs[key], str(ftype))  # before a section's own checks read it
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError, AttributeError, KeyError) as exc:  # a section's own checks name the field
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: {exc}") from None


def _coerce(value: Any, ftype: Any, name: str) -> Any:
    """YAML 1.1 reads `1e-3` as a string: turn numeric strings into the field's number type."""
    type_name = ftype if isinstance(ftype, str) else getattr(ftype, "__name__", str(ftype))
    kinds = {part.strip() for part in type_name.split("|")}
    if isinstance(value, bool) and kinds & {"float", "int"} and "bool" not in kinds:
        raise ConfigError(f"config field {name} must be a number, got {value!r}")
    if not isinstance(value, str) or value == "" or "str" in kinds:
        return value
    for number_type in ("float", "int"):
        if number_type in kinds:
            try:
                return float(value) if number_type == "float" else int(value)
            except ValueError:
                raise ConfigError(f"config field {name} must be a number, got {value!r}") from None
    return value


def _dataclass_of(field: dataclasses.Field) -> type | None:
    """The dataclass of a section field (its default is an instance of it), None for a plain value:
    read from the dataclasses themselves, so a new section needs no list kept beside them."""
    if field.default_factory is dataclasses.MISSING:
        return None
    default = field.default_factory()
    return type(default) if dataclasses.is_dataclass(default) else None


def unknown_key(section: str, key: str, known: list[str]) -> str:
    """The one-line error for a key no section field or option has, naming the closest valid one."""
    name = f"{section}.{key}" if section else key
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f"unknown key {name}: did you mean {section + '.' if section else ''}{close[0]}?"
    return f"unknown key {name}; known: {', '.join(known)}"


# Keys spelled as the scale-out docs name them: rollout.executor / rollout.ray are where users of
# verl and SkyRL look for the env workers' settings; they live in env.executor and ray.
KEY_ALIASES = {("rollout", "executor"): ("env", "executor"), ("rollout", "ray"): ("ray",)}


def _resolve_key_aliases(data: dict) -> dict:
    for (section, key), target in KEY_ALIASES.items():
        if isinstance(data.get(section), dict) and key in data[section]:
            data = _merge(data, {})  # a copy: the caller's dict stays as given
            value = data[section].pop(key)
            node = data
            for part in target[:-1]:
                node = node.setdefault(part, {})
            old = node.get(target[-1])
            if old is not None and old != value and not (isinstance(old, dict) and isinstance(value, dict)):
                raise ConfigError(f"{section}.{key} and {'.'.join(target)} are the same setting with two values "
                                  f"({value!r}, {old!r}): set one")
            node[target[-1]] = _merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return data


def load_config(source: str | Path | dict | None = None, overrides: list[str] | None = None) -> TrainConfig:
    data = {} if source is None else (dict(source) if isinstance(source, dict) else _read_yaml(source))
    data = _resolve_key_aliases(_merge(data, parse_overrides(overrides or [])))
    imports = data.get("imports")
    if isinstance(imports, list) and all(isinstance(name, str) for name in imports):
        # before the config is built: its modules may register the env, executor, engine, estimator or
        # reward kind it names (any other value is refused below as the field's type)
        import_modules(imports, "imports")
    cfg = _build(TrainConfig, data)
    check_types(cfg)
    check_ranges(cfg)
    validate_config(cfg)  # the rules across sections (trainers/checks.py), e.g. two settings naming the tasks
    check_section_rules(cfg)  # then what the env and its task space say of each setting
    return cfg


# (section.field, lowest, highest, what the value is): checked when the config loads. Bounds are
# inclusive; None is open. Fields with their own rule (estimator options, probabilities in [0, 1))
# are checked where that rule lives.
RANGES = [
    ("iterations", 0, None, "RL iterations"), ("checkpoint_every", 0, None, "iterations (0 = never)"),
    ("time_budget_s", 0, None, "seconds"), ("torch_threads", 1, None, "threads (or auto)"),
    ("rollout.tasks_per_iter", 1, None, "groups per iteration"), ("rollout.group_size", 1, None, "episodes per group"),
    ("rollout.temperature", 0, None, "a sampling temperature"), ("rollout.top_p", 1e-12, 1, "a nucleus mass"),
    ("rollout.max_new_tokens", 1, None, "tokens"),
    ("ppo.lr", 1e-12, None, "a learning rate"), ("ppo.clip_eps", 1e-12, None, "a clip width"),
    ("ppo.max_grad_norm", 1e-12, None, "a gradient-norm cap"), ("ppo.kl_coef", 0, None, "a KL weight"),
    ("ppo.value_lr", 1e-12, None, "a learning rate"), ("ppo.warmup_steps", 0, None, "optimizer steps"),
    ("ppo.weight_decay", 0, None, "a decay"), ("ppo.drop_abs_adv_below", 0, None, "an advantage threshold"),
    ("sft.num_tasks", 0, None, "tasks"), ("sft.epochs", 0, None, "epochs"), ("sft.lr", 1e-12, None, "a learning rate"),
    ("sft.batch_size", 1, None, "samples"),
    ("sft.dagger.rounds", 0, None, "rounds"), ("sft.dagger.tasks", 1, None, "tasks"), ("sft.dagger.epochs", 1, None, "epochs"),
    ("sft.dagger.temperature", 0, None, "a temperature"), ("eval.every", 0, None, "iterations (0 = before and after only)"),
    ("eval.num_tasks", 1, None, "tasks"), ("eval.episodes_per_task", 1, None, "episodes"),
    ("eval.max_batch_episodes", 1, None, "episodes"),
    ("eval.temperature", 0, None, "a sampling temperature"), ("env.max_turns", 1, None, "turns"),
    ("tiny.vocab_size", 16, None, "tokens"), ("tiny.hidden", 1, None, "units"), ("tiny.layers", 1, None, "layers"),
    ("tiny.heads", 1, None, "attention heads"), ("log.save_trajectories_every", 0, None, "iterations (0 = never)"),
    ("tasks.seed_tasks", 1, None, "tasks"), ("tasks.new_per_round", 0, None, "tasks per iteration"),
    ("tasks.min_active", 0, None, "tasks"),
    ("policy.vllm.max_model_len", 16, None, "tokens"), ("policy.vllm.gpu_memory_utilization", 1e-12, 1, "a share"),
    ("policy.vllm.kv_cache_gib", 1e-12, None, "GiB"), ("ppo.frozen_states_max_gib", 1e-12, None, "GiB"), ("policy.vllm.max_lora_rank", 1, None, "a LoRA rank"),
    ("seed", 0, 2**32 - 1, "a random seed"), ("env.max_tasks", 1, None, "tasks"),
    ("policy.max_prompt_tokens", 1, None, "tokens"), ("tiny.num_tasks", 1, None, "tasks"),
    ("env.chat.max_admissible", 0, None, "actions"),
    ("env.chat.memory", 0, None, "episodes"), ("env.chat.memory_max_words", 1, None, "words"),
    ("rollout.oversample_groups", 0, None, "groups"),
    ("rollout.episode_time_limit_s", 1e-12, None, "seconds"),
    ("ppo.value_coef", 0, None, "a loss weight"), ("ppo.entropy_coef", 0, None, "a bonus weight"),
    ("ppo.is_cap", 1e-12, None, "an importance-weight cap"), ("sft.max_steps", 1, None, "optimizer steps"),
    ("sft.weight_decay", 0, None, "a decay"), ("eval.max_new_tokens", 1, None, "tokens"),
    ("ray.num_cpus", 1, None, "CPUs"), ("ray.policy_num_cpus", 0, None, "CPUs"), ("ray.policy_num_gpus", 0, None, "GPUs"),
    ("estimator.gamma", 0, 1, "a discount"), ("estimator.lam", 0, 1, "a GAE lambda"),
    ("estimator.eps", 1e-12, None, "a small constant"),
]
MAX_INT = 2**63 - 1  # what torch, numpy and the JSON records hold
MAX_STR = 1 << 20


def check_ranges(cfg: TrainConfig) -> None:
    for dotted, low, high, what in RANGES:
        value = cfg
        for part in dotted.split("."):
            value = getattr(value, part)
        if value is None or (dotted == "torch_threads" and value == "auto"):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or \
                (low is not None and value < low) or (high is not None and value > high):
            bounds = f">= {low:g}" if high is None else f"in [{low:g}, {high}]"
            if low == 1e-12:  # the stand-in for "strictly positive"
                bounds = "> 0" if high is None else f"in (0, {high:g}]"
            raise ConfigError(f"{dotted}={value!r} is out of range: {what}, {bounds}")


def check_types(cfg: TrainConfig) -> None:
    """Every field against its declared type, one line for the first that is off: numbers
    finite and within int64, booleans true/false, strings without NUL bytes, and mappings and
    lists holding plain data (strings, numbers, booleans, null, lists, mappings)."""
    def walk(obj, prefix):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            name = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(value):
                walk(value, name + ".")
            else:
                _check_value(name, value, str(f.type))

    walk(cfg, "")


def _check_value(name: str, value: Any, type_text: str) -> None:
    kinds = {k.strip() for k in type_text.split("|")}
    if "Any" in kinds or (value is None and "None" in kinds):
        if value is not None:
            _check_plain(name, value)
        return
    ok = False
    if type(value) is bool:
        ok = "bool" in kinds
    elif type(value) is int:
        ok = bool(kinds & {"int", "float"})
        if ok and abs(value) > MAX_INT:
            raise ConfigError(f"{name}={str(value)[:20]}... is out of range: a number of at most 19 digits")
    elif type(value) is float:
        if "float" in kinds:
            ok = True
            if not math.isfinite(value):
                raise ConfigError(f"{name}={value!r} is not a finite number")
    elif type(value) is str:
        ok = "str" in kinds
        if ok and ("\x00" in value or len(value) > MAX_STR):
            raise ConfigError(f"{name} holds a NUL byte or more than {MAX_STR} characters")
    elif type(value) is dict:
        ok = "dict" in kinds
        if ok:
            _check_plain(name, value)
            bad = next((k for k in value if not isinstance(k, str)), None)
            if bad is not None:
                raise ConfigError(f"{name} has a key {bad!r} that is not a string: write it in quotes")
    elif type(value) is list:
        ok = "list" in kinds
        if ok:
            _check_plain(name, value)
    if not ok:
        want = " or ".join(sorted(k for k in kinds if k != "None")) + (" or null" if "None" in kinds else "")
        want = want.replace("dict", "a mapping").replace("list", "a list").replace("str", "text")
        raise ConfigError(f"{name} must be {want}, got {type(value).__name__} {_short(value)}")


def _check_plain(name: str, value: Any, depth: int = 0, budget: list | None = None) -> None:
    """Plain data only, bounded (a mapping of kwargs, a list of globs)."""
    budget = budget if budget is not None else [10_000]
    budget[0] -= 1
    if depth > MAX_YAML_DEPTH or budget[0] < 0:
        raise ConfigError(f"{name} is nested too deeply or too large for a config value")
    if value is None or type(value) in (bool, str):
        return
    if type(value) is int:
        if abs(value) > MAX_INT:
            raise ConfigError(f"{name} holds a number of more than 19 digits")
        return
    if type(value) is float:
        if not math.isfinite(value):
            raise ConfigError(f"{name} holds {value!r}: numbers must be finite")
        return
    if type(value) in (list, tuple):
        for item in value:
            _check_plain(name, item, depth + 1, budget)
        return
    if type(value) is dict:
        for k, v in value.items():
            _check_plain(name, k, depth + 1, budget)
            _check_plain(f"{name}.{k}" if isinstance(k, str) else name, v, depth + 1, budget)
        return
    raise ConfigError(f"{name} holds a {type(value).__name__}: config values are text, numbers, booleans, null, "
                      "lists and mappings")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


DEVICE_RE = __import__("re").compile(r"(cpu|mps|meta|(cuda|xpu)(:\d{1,3})?)")
LORA_TYPES = {"r": int, "lora_alpha": (int, float), "lora_dropout": (int, float), "target_modules": (str, list),
              "bias": str, "use_rslora": bool, "modules_to_save": (list, type(None)), "top_layers": int,
              "layers_to_transform": (int, list)}


def check_section_rules(cfg: TrainConfig) -> None:
    """Rules within one section that would otherwise fail when the run starts (a device name,
    attention heads that do not divide the width, LoRA settings, the env's keyword arguments,
    categories the task space does not have), one line each."""
    if not cfg.name.strip() or "/" in cfg.name or "\\" in cfg.name or cfg.name.strip(".") == "":
        raise ConfigError(f"name={cfg.name!r} must be a plain name (it names the run dir runs/<name>): e.g. "
                          "name=household-grpo")
    if cfg.policy.model:
        _check_model_name(cfg.policy.model)
    if not DEVICE_RE.fullmatch(cfg.policy.device):
        raise ConfigError(f"policy.device={cfg.policy.device!r} is not a device: use cpu, cuda, cuda:N or mps")
    if cfg.policy.dtype is not None and cfg.policy.dtype not in DTYPES:
        raise ConfigError(f"policy.dtype={cfg.policy.dtype!r} is unknown; choose fp32, bf16 or fp16 (or null)")
    if cfg.policy.reference not in (None, "copy"):
        raise ConfigError(f"policy.reference={cfg.policy.reference!r}: the only reference is copy (or null)")
    if cfg.tiny.arch not in ("llama", "qwen2"):
        raise ConfigError(f"tiny.arch={cfg.tiny.arch!r} is unknown; choose llama or qwen2")
    if cfg.tiny.hidden % cfg.tiny.heads:
        raise ConfigError(f"tiny.heads={cfg.tiny.heads} does not divide tiny.hidden={cfg.tiny.hidden}: attention "
                          "heads split the width evenly (e.g. tiny.heads=4 or 8)")
    if cfg.policy.lora is not None:
        _check_lora(cfg.policy.lora)
    _check_env_kwargs(cfg)
    _check_reward_mode(cfg.env)
    _check_tasks_file(cfg)
    _check_categories(cfg)


def _check_tasks_file(cfg: TrainConfig) -> None:
    """env.tasks_file: a JSONL of this env's tasks whose params its task space accepts."""
    if not cfg.env.tasks_file:
        return
    from agentgym.tasks.splits import load_split

    tasks = load_split(cfg.env.tasks_file)  # SplitFileError: one line naming file:line
    try:
        from agentgym.registration import get_task_space
        from agentgym.tasks.validation import check_params

        space = get_task_space(cfg.env.id)
    except Exception:  # noqa: BLE001 - an env registered later (imports): checked when loaded
        return
    for i, spec in enumerate(tasks, 1):
        if spec.env_id != space.env_id:
            raise ConfigError(f"env.tasks_file {cfg.env.tasks_file}: task {i} is for {spec.env_id}, not {cfg.env.id}: "
                              "train on a file of this env's tasks (or set env.id)")
        try:
            check_params(space, spec.params)
        except (ValueError, TypeError, KeyError) as exc:
            first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"env.tasks_file {cfg.env.tasks_file}: task {i} has params {cfg.env.id} cannot play "
                              f"({first})") from None


def _check_model_name(model: str) -> None:
    """policy.model that is not a local path must at least be spelled like a hub id."""
    from agentgym.policies.model_files import looks_local

    if looks_local(model):
        return
    try:
        from huggingface_hub.utils import validate_repo_id
    except ImportError:
        return
    try:
        validate_repo_id(model)
    except Exception:  # noqa: BLE001 - HFValidationError and friends
        raise ConfigError(f"policy.model={_short(model)} is neither a local folder nor a hub id (org/name of letters, "
                          "digits, '-', '_', '.')") from None


def _check_lora(lora: dict) -> None:
    for key, value in lora.items():
        want = LORA_TYPES.get(key)
        if want is not None and (type(value) is bool and want is not bool or not isinstance(value, want)):
            raise ConfigError(f"policy.lora.{key}={_short(value)} has the wrong type for LoRA's {key}")
    if "r" in lora and lora["r"] < 1:
        raise ConfigError(f"policy.lora.r={lora['r']} is out of range: a LoRA rank, >= 1")
    if "lora_alpha" in lora and not lora["lora_alpha"] > 0:
        raise ConfigError(f"policy.lora.lora_alpha={lora['lora_alpha']} is out of range: > 0")
    if "top_layers" in lora and lora["top_layers"] < 1:
        raise ConfigError(f"policy.lora.top_layers={lora['top_layers']} is out of range: the number of top decoder "
                          "layers that get adapters, >= 1")
    if "lora_dropout" in lora and not 0 <= lora["lora_dropout"] < 1:
        raise ConfigError(f"policy.lora.lora_dropout={lora['lora_dropout']} is out of range: in [0, 1)")
    unknown = sorted(set(lora) - set(LORA_TYPES))
    if unknown:
        try:
            from peft import LoraConfig
        except ImportError:
            return  # peft says it when the policy is built
        known = [f.name for f in dataclasses.fields(LoraConfig)]
        for key in unknown:
            if key not in known:
                raise ConfigError(unknown_key("policy.lora", key, known))


GYM_MAKE_KWARGS = ("max_episode_steps", "autoreset", "apply_api_compatibility", "disable_env_checker",
                   "render_mode")  # gym.make's own, besides the env's


def _env_class(env_id: str):
    """The registered env's class, None when it is not registered yet (a user env whose
    `imports` run when training starts)."""
    try:
        import gymnasium

        entry = gymnasium.spec(env_id).entry_point
    except Exception:  # noqa: BLE001 - unknown ids are refused, in one line, when the run starts
        return None
    if callable(entry):
        return entry
    try:
        import importlib

        module, _, attr = str(entry).partition(":")
        return getattr(importlib.import_module(module), attr)
    except Exception:  # noqa: BLE001
        return None


def _check_env_kwargs(cfg: TrainConfig) -> None:
    if not cfg.env.env_kwargs:
        return
    import inspect

    cls = _env_class(cfg.env.id)
    if cls is None:
        return
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    known = [n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    known += [k for k in GYM_MAKE_KWARGS if k not in known]
    for key in cfg.env.env_kwargs:
        if key not in known:
            raise ConfigError(unknown_key("env.env_kwargs", key, known) + f" ({cfg.env.id} takes no {key!r})")


def _check_reward_mode(env_cfg: EnvConfig) -> None:
    """env.reward as a name is the env's own reward mode (its `reward` keyword): an env without
    one would fail at gym.make with a traceback."""
    if not isinstance(env_cfg.reward, str):
        return
    import inspect

    cls = _env_class(env_cfg.id)
    try:
        params = inspect.signature(cls).parameters if cls is not None else None
    except (TypeError, ValueError):
        return
    if params is not None and "reward" not in params and not any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        raise ConfigError(f"env.reward={_short(env_cfg.reward)} names a reward mode of the env, but {env_cfg.id} has "
                          "none: use a mapping (env.reward={kind: rubric|judge|relative_judge|meta_reasoning, ...}) "
                          "or leave env.reward out")


def _check_categories(cfg: TrainConfig) -> None:
    """Each env.categories glob must match a category of the env's training tasks (else the
    task filter draws forever before failing)."""
    if not cfg.env.categories:
        return
    bad = [c for c in cfg.env.categories if not isinstance(c, str)]  # (a None entry is bad too)
    if bad:
        raise ConfigError(f"env.categories holds {_short(bad[0])}: each entry is a glob of task categories (text)")
    try:
        from agentgym.registration import get_task_space

        space = get_task_space(cfg.env.id)
        if cfg.env.tasks_file:
            from agentgym.tasks.splits import load_split

            tasks, where = load_split(cfg.env.tasks_file), f"tasks in {cfg.env.tasks_file}"
        elif cfg.env.fresh_tasks:  # drawn fresh: the categories the family's splits show (else the draw never ends)
            tasks, where = [t for name in space.split_names for t in space.split(name)], "tasks in any split"
        else:
            tasks, where = space.split(cfg.env.split), f"{cfg.env.split} tasks"
        have = {space.category(t) for t in tasks}
    except Exception:  # noqa: BLE001 - an env registered later (imports) or without categories
        return
    if not have:
        return
    import fnmatch

    for glob in cfg.env.categories:
        if not any(fnmatch.fnmatchcase(c, glob) for c in have):
            sample = ", ".join(sorted(have)[:6]) + (", ..." if len(have) > 6 else "")
            raise ConfigError(f"env.categories={glob!r} matches no category of {cfg.env.id}'s {where} ({sample})")


def save_config(cfg: TrainConfig, path: str | Path) -> None:
    import yaml

    Path(path).write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False), encoding="utf-8")
