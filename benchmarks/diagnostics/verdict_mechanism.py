"""What SFT learns that RL does not: the mechanism behind the verdict's arms (docs/verdict.md).

For the models of one seed of the verdict (`warm`, `gigpo`, `grpo`, `rft`, `sft`, or any
`--model LABEL=PATH`), on the first `--tasks` held-out tasks of the preset (household `heldout`
of its categories, in the split's order):

1. **Agreement with the demonstrator on its own states** (teacher-forced, nothing compounds).
   The preset's demonstrator (sft.expert, sft.slip_prob, sft.dawdle_prob; its episodes filtered
   as the warm start's are, sft.filter_success) plays the tasks once (trainers/sft.py's
   `oracle_trajectories`, the very code that makes the SFT arms' data). At each of its steps
   every model answers the step's recorded prompt (the rollout's own chat layout) greedily with
   the preset's reply budget, decoded as the preset's rollouts decode (freely, or within the
   admissible commands in the env's action format under rollout.admissible_only, as household-smol
   does: every answer is then valid), and the answer is tried in the env at that state (ChatEnv
   snapshot and restore: the env's own parser and validity). Scored per step:

       match      the answer is the demonstrator's *target*: its next valid command that is not
                  idle, at this step or after (idle commands and slips change nothing, so the
                  target can be done here); compared as the env reads commands, not as text
       valid      the env accepts the answer
       idle       the answer is a valid idle command (look / inventory / examine)
       same_kind  the answer is a command of the target's kind (below)

   per *kind of step*: `idle` (the demonstrator idled here), `slip` (it typed a command that is not
   admissible; SFT never trains on these, they are context), else the kind of its command: `go`
   (go to), `open` (open / close), `take`, `put` (move X to Y), `use` (a lamp), `treat`
   (heat / cool / clean), `other`. The searching demonstrator picks its next receptacle at random
   among those it has not seen, so on `go` steps an exact match is partly chance.

   Greedy answers hardly ever idle (a model's idle mass is spread over several commands) while its
   sampled episodes do; so each state also gets the probabilities of the reply the policy samples
   there at temperature 1 (its own distribution; household-tiny evaluates at temperature 1):
   P(target), P(idle) (summed over the admissible idle commands) and P(admissible) (summed over
   every admissible command; the rest is on replies the env refuses, or reads through an alias),
   each admissible command in the env's action format and end of reply scored as SFT scores a
   target. Under admissible-only decoding the policy is the model renormalized at each token within
   the admissible replies' trie (policies/hf.py), so these are of that distribution and
   P(admissible) is 1.

2. **The models' own episodes**: the held-out tasks as the preset evaluates them (eval.temperature,
   eval.episodes_per_task or --episodes, reset and sampling seed = the seed: every arm plays the
   same tasks with the same seeds; trainers/training.py's `heldout_result`). Per arm: success,
   invalid-action rate, idle rate, repeat rate (a valid, non-idle command the episode already
   issued, e.g. going back to a receptacle), mean episode length, and each failed episode's
   failure, the first rule that holds of (the 12-step limit ended it):

       invalid          at least half of its steps were invalid
       idle             at least half were idle commands
       looping          at least half repeated one of its own earlier commands
       never_held_goal  it never held a goal object (the task's progress stayed 0)
       held_not_done    it held one but did not finish (not delivered / lamp not used)

   and where each episode first *departs* from the demonstrator: the first valid, non-idle command
   that is not the demonstrator's next command in that state (idle turns and invalid ones leave
   the state as it was and are not departures; the demonstrator idles and slips as well). The
   demonstrator's decision is rebuilt from the layout (envs/household/oracle.py's planner, which
   plans from the initial state with full knowledge of what it has seen): while the episode has
   not departed, its state is one the demonstrator reaches when it searches the receptacles in the
   order the episode visits them, so the planner run with that search order gives the
   demonstrator's next command at every step up to the departure. The oracle demonstrator
   (sft.expert oracle, household-smol's) does not search: its plan from the layout is the reference.
   Limits: where two goal objects or destinations are equally near, the planner takes the first,
   so choosing the other counts as a departure; the departure is that of the idle-free
   demonstrator (its plan, not its dawdling).
   Reported: the share of episodes (and of failed ones) that depart, the success of those that
   never do, the departure step, the kinds at the departure (demonstrator's -> episode's, e.g.
   `take -> go`: it walked away from an object it should have taken; `go -> take`: it took an
   object the task does not need where the demonstrator would search on) and how many departures
   went back to a receptacle already visited.

Writes `--out` (JSON: under seedN the command, code version, settings, per arm the figures above and
its CPU seconds; under `over_seeds` the main figures averaged over the seeds in the file) and prints a
table. One process, one torch thread.

    python benchmarks/diagnostics/verdict_mechanism.py --runs RUNS --seed 0 --out docs/verdict_mechanism.json
    python benchmarks/diagnostics/verdict_mechanism.py --runs RUNS --seed 100 --tasks 20 --out /tmp/m.json
    python benchmarks/diagnostics/verdict_mechanism.py --model warm=RUN/sft_model --model rl=RUN/final_model --tasks 20

RUNS is the verdict's runs folder (runs/verdict_tiny). `--seed` of its tuning seed (100) reads each
arm's tuning run at the rate the verdict chose. The arms' models: warm/seedN (its done-table
record), gigpo|grpo/seedN/final_model, rft|sft/seedN's latest checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.harness import jobs as rr  # noqa: E402
from benchmarks.harness.provenance import code_version, command  # noqa: E402

ARMS = ("warm", "gigpo", "grpo", "rft", "sft")
STEP_KINDS = ("go", "open", "take", "put", "use", "treat", "idle", "slip", "other")
FAILURES = ("invalid", "idle", "looping", "never_held_goal", "held_not_done")
GENERATE_CHUNK = 64  # prompts per greedy batch (bounds the KV cache of a batch)


# --- kinds of commands ----------------------------------------------------------------------------
def command_kind(action: str | None) -> str:
    """The kind of a household command (the module docstring's list), read as the env reads it."""
    from agentgym.envs.household.commands import normalize
    from agentgym.envs.household.oracle import IDLE_COMMANDS

    text = normalize(action or "")
    if text.startswith(IDLE_COMMANDS):
        return "idle"
    verb = text.split(" ", 1)[0]
    return {"go": "go", "open": "open", "close": "open", "take": "take", "move": "put", "use": "use",
            "heat": "treat", "cool": "treat", "clean": "treat"}.get(verb, "other")


def demo_targets(steps) -> list[str | None]:
    """Per step of a demonstrator episode, its next valid non-idle command at or after that step
    (None past its last one: the tail of an episode that ran out of steps)."""
    out: list[str | None] = []
    target = None
    for step in reversed(steps):
        if step.action_valid and command_kind(step.action) != "idle":
            target = step.action
        out.append(target)
    return out[::-1]


def demo_step_kind(step) -> str:
    """What the demonstrator did at this step: slip, idle, or its command's kind."""
    return "slip" if not step.action_valid else command_kind(step.action)


# --- 1. teacher-forced agreement --------------------------------------------------------------------
@dataclass(frozen=True)
class DemoState:
    """A state of a demonstrator episode where it has a target."""
    messages: list  # the prompt the rollout showed there
    target: str  # its next valid, non-idle command (doable here)
    kind: str  # what it did here: slip, idle, or its command's kind
    admissible: tuple[str, ...]  # the env's admissible commands here


def replay(cfg, demos: list):
    """Play each demonstrator episode again in one env of the preset's chat layout, yielding
    (env, info, step, target) before each of its steps that has a target; the env is at the step's
    state (the prompt it shows is checked against the recorded one; `info` is the env's there) and
    must be left there."""
    from agentgym.chat import ChatConfig
    from agentgym.rollout import make_chat_env
    from agentgym.tasks.spec import TaskSpec

    env = make_chat_env(cfg.env.id, cfg.env.env_kwargs, **ChatConfig.of(cfg.env.chat).kwargs())
    try:
        for traj in demos:
            prompt, info = env.reset(seed=traj.seed, options={"task": TaskSpec.from_dict(traj.task)})
            for step, target in zip(traj.steps, demo_targets(traj.steps)):
                if prompt != step.messages:  # the model must see what the demonstrator saw
                    raise RuntimeError(f"replaying task {traj.task_id} gave another prompt than the recorded one")
                if target is not None:
                    yield env, info, step, target
                prompt, _, _, _, info = env.step(step.text)
    finally:
        env.close()


def demonstrator_states(cfg, demos: list) -> list[DemoState]:
    """The states of `demos` that have a target, in order."""
    return [DemoState(step.messages, target, demo_step_kind(step), tuple(info["admissible_actions"]))
            for _, info, step, target in replay(cfg, demos)]


def admissible_replies(policy, state: DemoState, format_action) -> list[list[int]]:
    """The token ids of each admissible command at `state`, in the env's action format and with the
    end of the reply: the replies admissible-only decoding walks (agentgym/continuation.py's
    AdmissibleReplies) and SFT's targets (encode_response)."""
    return [list(policy.encode_response(format_action(command), add_eos=True)) for command in state.admissible]


def greedy_replies(policy, states: list[DemoState], max_new_tokens: int, format_action=None) -> list[str]:
    """The policy's greedy reply at each state, decoded as its rollouts decode: freely, or with
    `format_action` (admissible-only decoding) within the state's admissible commands."""
    from agentgym.policies.base import SamplingParams

    sampling = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens)
    out: list[str] = []
    for first in range(0, len(states), GENERATE_CHUNK):
        chunk = states[first:first + GENERATE_CHUNK]
        if format_action is None:
            out += [c.text for c in policy.generate([s.messages for s in chunk], sampling)]
        else:
            out += [c.text for c in policy.generate_ids([policy.encode_prompt(s.messages) for s in chunk], sampling,
                                                        allowed_replies=[admissible_replies(policy, s, format_action)
                                                                         for s in chunk])]
    return out


def trie_allowed(replies: list[list[int]], max_new_tokens: int) -> list[list[list[int]] | None]:
    """Per reply, per token, the ids admissible-only decoding allows there: the children of the
    reply's prefix in the replies' trie (policies/hf.py's, with its rule for replies that cannot end
    within max_new_tokens); None for a reply the trie left out (decoding never gives it)."""
    from agentgym.policies.hf import _reply_trie

    root = _reply_trie(replies, max_new_tokens)
    out = []
    for reply in replies:
        node, allowed = root, []
        for token in reply:
            if node is None or int(token) not in node:
                allowed = None
                break
            allowed.append(sorted(node))
            node = node[int(token)]
        out.append(allowed if node == {} else None)  # a reply ends at a leaf
    return out


def command_probabilities(policy, states: list[DemoState], chunk: int = GENERATE_CHUNK, format_action=None,
                          admissible_within: int | None = None) -> list[dict]:
    """At each state, the probability that the policy's reply (sampled at temperature 1, its own
    distribution) is exactly the target, an idle command, or any admissible command: each
    admissible command's text in the env's action format (`format_action`; as written when None)
    and end of reply scored as a target. Free decoding: the rest of the mass is on replies the env
    refuses, or reads through an alias. `admissible_within` (the reply budget, max_new_tokens):
    admissible-only decoding, whose policy is the model renormalized within the admissible replies'
    trie at each token, so P(admissible) is 1. `chunk`: sequences per forward pass."""
    import numpy as np
    import torch

    from agentgym.trainers.ppo import token_logprobs
    from agentgym.trainers.samples import collate, sft_sample

    format_action = format_action or (lambda command: command)
    samples, never = [], []  # never: replies admissible-only decoding cannot give (probability 0)
    for state in states:
        prompt, replies = policy.encode_prompt(state.messages), admissible_replies(policy, state, format_action)
        tries = trie_allowed(replies, admissible_within) if admissible_within is not None else [None] * len(replies)
        for reply, allowed in zip(replies, tries):
            sample = sft_sample(prompt, reply)
            if allowed is not None:
                sample.allowed = {len(prompt) + k: ids for k, ids in enumerate(allowed)}
            never.append(admissible_within is not None and allowed is None)
            samples.append(sample)
    logp = np.zeros(len(samples))
    with torch.no_grad():
        for first in range(0, len(samples), chunk):
            batch = collate(samples[first:first + chunk], policy.tokenizer.pad_token_id, device=policy.device)
            mask = batch["loss_mask"]
            token_logp, _ = token_logprobs(policy.model, batch["input_ids"], batch["attention_mask"], positions=mask,
                                           allowed=batch.get("allowed"))
            logp[first:first + len(mask)] = (token_logp * mask).sum(-1).double().cpu().numpy()
    logp[np.array(never, dtype=bool)] = -np.inf
    out = [{"p_target": 0.0, "p_idle": 0.0, "p_admissible": 0.0} for _ in states]
    k = 0
    for i, state in enumerate(states):
        for admissible in state.admissible:
            p = float(np.exp(logp[k]))
            out[i]["p_admissible"] += p
            out[i]["p_idle"] += p if command_kind(admissible) == "idle" else 0.0
            out[i]["p_target"] += p if admissible == state.target else 0.0
            k += 1
    return out


def score_replies(cfg, demos: list, replies: dict[str, list[str]]) -> dict[str, list[dict]]:
    """Try every arm's reply at each demonstrator state with a target (snapshot, step, restore: the
    env's own parser and validity) and score it. replies[arm] holds one reply per such state, in
    order (demonstrator_states). Returns per arm the per-state records."""
    from agentgym.envs.household.commands import entry_for, lookup

    records: dict[str, list[dict]] = {arm: [] for arm in replies}
    for k, (env, _, step, target) in enumerate(replay(cfg, demos)):
        world = env.unwrapped.world
        entry = entry_for(world)
        wanted = lookup(entry, world, target)[0]
        snap = env.snapshot()
        for arm, texts in replies.items():
            _, _, _, _, info = env.step(texts[k])
            env.restore(snap)
            action = info["action"]
            op = lookup(entry, world, action)[0] if action is not None else None
            valid = bool(info["action_valid"])
            records[arm].append({"kind": demo_step_kind(step), "match": op is not None and op == wanted,
                                 "valid": valid, "idle": valid and command_kind(action) == "idle",
                                 "same_kind": command_kind(action) == command_kind(target)})
    return records


RATES = ("valid", "idle", "same_kind", "p_target", "p_idle", "p_admissible")


def agreement_summary(records: list[dict]) -> dict:
    """Rates of the greedy answers' match / valid / idle / same_kind, and the mean reply
    probabilities where the records carry them, over all steps, the steps where the demonstrator
    neither idled nor slipped, and per kind of step; with the Wilson 95% interval of the match rate."""
    from agentgym.evaluation.stats import wilson_interval

    def rates(rows: list[dict]) -> dict:
        n = len(rows)
        matched = sum(r["match"] for r in rows)
        est = wilson_interval(matched, n) if n else None
        return {"steps": n, "match": matched / n if n else None, "match_ci": [est.low, est.high] if est else None,
                **{key: (sum(r[key] for r in rows) / n if n else None) for key in RATES if not rows or key in rows[0]}}

    by_kind = {kind: rates([r for r in records if r["kind"] == kind]) for kind in STEP_KINDS
               if any(r["kind"] == kind for r in records)}
    return {"all": rates(records), "not_idle_or_slip": rates([r for r in records if r["kind"] not in ("idle", "slip")]),
            "by_kind": by_kind}


# --- 2. the models' own episodes --------------------------------------------------------------------
class VisitOrder:
    """A stand-in for the searching planner's random generator: it searches unseen receptacles in
    the order an episode first went to them (the others after, by index)."""

    def __init__(self, visits: list[int]):
        self.rank = {r: i for i, r in enumerate(dict.fromkeys(visits))}

    def permutation(self, items):
        return sorted(items, key=lambda r: (self.rank.get(int(r), len(self.rank)), int(r)))


def departure(layout, steps, search: bool = True) -> dict | None:
    """Where an episode (its steps' action and action_valid) first departs from the demonstrator
    (the module docstring): {"step": 1-based, "expected", "taken", "expected_kind", "taken_kind",
    "revisit": it went back to a receptacle it had been to}, or None when it never departs. During
    a search "expected" is one of the demonstrator's equal choices (the first unseen receptacle by
    index); past the plan's end it is None. `search`: the demonstrator searches (sft.expert
    searching); otherwise it is the oracle, which knows the layout and plans without a search."""
    from agentgym.envs.household.commands import GO, entry_for, execute, lookup
    from agentgym.envs.household.oracle import plan_for
    from agentgym.envs.household.world import World

    world, ops = World(layout), []
    for i, step in enumerate(steps):  # the episode's state-changing commands, as the env read them
        if step.action_valid and command_kind(step.action) != "idle":
            op = lookup(entry_for(world), world, step.action)[0]
            if op is None:
                raise ValueError(f"an episode's valid command {step.action!r} is not admissible on replay")
            ops.append((i, step, op))
            execute(world, op)
    plan = plan_for(layout, search_rng=VisitOrder([op[1] for _, _, op in ops if op[0] == GO]) if search else None)
    world, visited = World(layout), set()
    for j, (i, step, op) in enumerate(ops):
        entry = entry_for(world)
        expected = plan[j] if j < len(plan) else None
        if expected is None or entry.table.get(expected) != op:
            return {"step": i + 1, "expected": expected, "taken": step.action,
                    "expected_kind": command_kind(expected) if expected else "none",
                    "taken_kind": command_kind(step.action), "revisit": op[0] == GO and op[1] in visited}
        execute(world, op)
        if op[0] == GO:
            visited.add(op[1])
    return None


def episode_profile(steps) -> dict:
    """Counts of an episode's steps: invalid, idle, repeat (a valid non-idle command it issued
    before), new (the other valid ones), and the highest task progress it reached."""
    from agentgym.envs.household.commands import normalize

    counts = Counter()
    issued: set[str] = set()
    for step in steps:
        if not step.action_valid:
            counts["invalid"] += 1
        elif command_kind(step.action) == "idle":
            counts["idle"] += 1
        else:
            text = normalize(step.action)
            counts["repeat" if text in issued else "new"] += 1
            issued.add(text)
    progress = max((s.progress or 0.0 for s in steps), default=0.0)
    return {"steps": len(steps), **{k: counts[k] for k in ("invalid", "idle", "repeat", "new")},
            "max_progress": progress}


def failure_kind(profile: dict) -> str:
    """A failed episode's failure: the first rule of the module docstring's list that holds."""
    n = max(profile["steps"], 1)
    for kind, key in (("invalid", "invalid"), ("idle", "idle"), ("looping", "repeat")):
        if profile[key] * 2 >= n:
            return kind
    return "never_held_goal" if profile["max_progress"] <= 0 else "held_not_done"


def step_shares(profiles: list[dict]) -> dict | None:
    """The share of all the episodes' steps that were invalid / idle / repeat / new (None: no episode)."""
    steps = sum(p["steps"] for p in profiles)
    return {key: sum(p[key] for p in profiles) / max(steps, 1) for key in ("invalid", "idle", "repeat", "new")} \
        if profiles else None


def own_episodes_summary(trajectories, search: bool = True) -> dict:
    """The figures of a model's own episodes (infra errors left out); `search` as departure's."""
    from agentgym.envs.household.world import get_layout
    from agentgym.tasks.spec import TaskSpec

    live = [t for t in trajectories if not t.infra_error]
    if not live:
        raise RuntimeError("every episode failed with an infra error: nothing to measure")
    profiles = [episode_profile(t.steps) for t in live]
    departures = [departure(get_layout(TaskSpec.from_dict(t.task)), t.steps, search) for t in live]
    failed = [i for i, t in enumerate(live) if not t.success]
    departed = [d for d in departures if d is not None]
    stayed = [t for t, d in zip(live, departures) if d is None]
    return {
        "episodes": len(live), "success": sum(t.success for t in live) / len(live),
        "mean_steps": sum(p["steps"] for p in profiles) / len(live),
        "step_shares": step_shares(profiles),
        "step_shares_failed": step_shares([profiles[i] for i in failed]),
        "failed": len(failed),
        "failures": {kind: sum(failure_kind(profiles[i]) == kind for i in failed) for kind in FAILURES},
        "departed": len(departed) / len(live),
        "departed_failed": sum(departures[i] is not None for i in failed) / len(failed) if failed else None,
        "success_never_departed": sum(t.success for t in stayed) / len(stayed) if stayed else None,
        "mean_departure_step": sum(d["step"] for d in departed) / len(departed) if departed else None,
        "departure_steps": {str(k): n for k, n in sorted(Counter(d["step"] for d in departed).items())},
        # what the demonstrator would have done -> what the episode did, at its departure
        "departure_kinds": dict(Counter(f"{d['expected_kind']} -> {d['taken_kind']}" for d in departed).most_common()),
        "departure_revisits": sum(d["revisit"] for d in departed),
    }


# --- the models -----------------------------------------------------------------------------------
def arm_keys(runs: Path, seed: int, arms: list[str]) -> dict[str, str]:
    """Each arm's job key in the verdict's done-table: warm/seedN, ARM/seedN, or on the tuning seed
    the arm's tuning run at the rate the verdict chose. One line (SystemExit) for a job not done."""
    table = rr.DoneTable(runs / "done.json")
    settings_file = runs / "settings.json"
    if not table.done or not settings_file.is_file():
        raise SystemExit(f"{runs} is not a verdict runs folder (no done.json and settings.json): give the folder "
                         "benchmarks/learning/verdict.py ran in (--runs)")
    settings = json.loads(settings_file.read_text())
    keys = {}
    for arm in arms:
        if arm == "warm":
            key = f"warm/seed{seed}"
        elif seed == settings["tune_seed"]:
            try:
                key = rr.tune_key(arm, rr.best_rate(table, arm, settings["grids"][arm]))
            except KeyError:
                raise SystemExit(f"{arm}: its rate is not chosen yet (a tuning run of tune/{arm}/ is not done in "
                                 f"{runs}): wait for them, or leave {arm} out of --arms") from None
        else:
            key = f"{arm}/seed{seed}"
        if key not in table:
            raise SystemExit(f"{runs} has no finished job {key} (done.json): wait for it, or leave {arm} out of --arms")
        keys[arm] = key
    return keys


def model_of(runs: Path, key: str) -> Path:
    """The model a finished job left: a warm start's sft_model (its record), an RL run's final_model,
    an imitation run's latest checkpoint (benchmarks/harness/jobs.py:evaluate_trained reads it so)."""
    from benchmarks.learning import verdict
    from agentgym.trainers.checkpoint import latest_checkpoint

    if key.startswith("warm/"):
        path = Path(verdict.local(rr.DoneTable(runs / "done.json")[key], runs)["model"])
    elif (rr.job_dir(runs, key) / "final_model").is_dir():
        path = rr.job_dir(runs, key) / "final_model"
    else:
        checkpoint = latest_checkpoint(rr.job_dir(runs, key))
        path = checkpoint / "model" if checkpoint is not None else rr.job_dir(runs, key) / "checkpoints"
    if not path.is_dir():
        raise SystemExit(f"{key}: its model {path} is missing")
    return path


def shown(path: Path, runs: Path | None) -> str:
    """A model path as the results file shows it: RUNS/... inside the runs folder, else its name."""
    if runs is not None and path.resolve().is_relative_to(runs.resolve()):
        return "RUNS/" + path.resolve().relative_to(runs.resolve()).as_posix()
    return path.as_posix() if not path.is_absolute() else path.name


def settings_of(args):
    """The config the arms ran with: the verdict's overrides from its settings.json (or none with
    --model), the seed, one torch thread, the first --tasks held-out tasks."""
    from agentgym.trainers.config import load_config

    overrides = json.loads((Path(args.runs) / "settings.json").read_text())["overrides"] if args.runs else []
    return load_config(args.preset, [*overrides, f"seed={args.seed}", "torch_threads=1",
                                     f"eval.num_tasks={args.tasks}", *args.overrides])


# --- the run ----------------------------------------------------------------------------------------
def measure(args, models: dict[str, Path], folder: Path, log=print) -> dict:
    """Parts 1 and 2 of the module docstring for each model ({label: folder}) with the settings of
    `args` (runs, preset, seed, tasks, episodes, overrides); `folder` takes the tasks file."""
    from agentgym.chat import ChatConfig
    from agentgym.registration import get_task_space
    from agentgym.rollout import make_chat_env
    from agentgym.tasks.splits import load_split
    from agentgym.trainers.run_setup import make_policy, quiet_transformers
    from agentgym.trainers.sft import oracle_trajectories
    from agentgym.trainers.task_selection import write_eval_tasks
    from agentgym.trainers.training import heldout_result

    cfg = settings_of(args)
    env = make_chat_env(cfg.env.id, cfg.env.env_kwargs, **ChatConfig.of(cfg.env.chat).kwargs())
    format_action = env.format_action  # replies as the rollout writes them (household-smol: <action>...</action>)
    env.close()
    within = cfg.rollout.max_new_tokens if cfg.rollout.admissible_only else None
    search = cfg.sft.expert == "searching"
    if args.episodes:
        cfg.eval.episodes_per_task = args.episodes
    quiet_transformers()
    rr.use_threads(cfg)
    tasks_file = write_eval_tasks(cfg.eval, cfg.env, get_task_space(cfg.env.id), folder)
    tasks = load_split(tasks_file)
    if len(tasks) < args.tasks:
        raise SystemExit(f"--tasks {args.tasks}: the preset has {len(tasks)} held-out tasks of its categories; "
                         f"ask for at most {len(tasks)}")
    demos = oracle_trajectories(cfg.env.id, tasks, cfg.env.chat, cfg.env.env_kwargs, seed=args.seed,
                                slip_prob=cfg.sft.slip_prob, search=search,
                                dawdle_prob=cfg.sft.dawdle_prob, filter_success=cfg.sft.filter_success)
    states = demonstrator_states(cfg, demos)
    log(f"demonstrator: {len(demos)} episodes kept of {len(tasks)} tasks, {len(states)} states with a target")
    replies, probabilities, own, cpu = {}, {}, {}, {}
    for arm, path in models.items():
        start = time.process_time()
        policy = make_policy(cfg.policy, path)
        replies[arm] = greedy_replies(policy, states, cfg.rollout.max_new_tokens,
                                      format_action if within is not None else None)
        probabilities[arm] = command_probabilities(policy, states, format_action=format_action, admissible_within=within)
        result = heldout_result(cfg.eval, cfg.env, policy, tasks_file, cfg.seed, cfg.rollout, session=None)
        own[arm] = own_episodes_summary(result.trajectories, search)
        cpu[arm] = round(time.process_time() - start, 1)
        log(f"{arm}: success {own[arm]['success']:.3f} on {own[arm]['episodes']} episodes ({cpu[arm]} CPU s)")
    scored = score_replies(cfg, demos, replies)
    for arm, rows in scored.items():
        for row, extra in zip(rows, probabilities[arm]):
            row.update(extra)
    demo_kinds = Counter(s.kind for s in states)
    return {
        "preset": args.preset, "seed": args.seed, "heldout_tasks": len(tasks),
        "episodes_per_task": cfg.eval.episodes_per_task, "eval_temperature": cfg.eval.temperature,
        "decoding": "admissible-only" if within is not None else "free",
        "reply_probabilities_temperature": 1.0,
        "demonstrator": {"expert": cfg.sft.expert, "slip_prob": cfg.sft.slip_prob, "dawdle_prob": cfg.sft.dawdle_prob,
                         "filter_success": cfg.sft.filter_success, "episodes": len(demos),
                         "scored_steps": len(states), "steps_by_kind": dict(demo_kinds.most_common())},
        "arms": {arm: {"model": shown(models[arm], Path(args.runs) if args.runs else None),
                       "teacher_forced": agreement_summary(scored[arm]), "own_episodes": own[arm],
                       "cpu_seconds": cpu[arm]} for arm in models},
    }


def print_table(out: dict) -> None:
    arms = out["arms"]
    kinds = [k for k in STEP_KINDS if k in out["demonstrator"]["steps_by_kind"]]
    columns = [("all", None), *[(k, k) for k in kinds]]
    for title, keys in (("greedy answer: match / valid", ("match", "valid")),
                        ("sampled reply: P(target) / P(idle) / P(admissible)", ("p_target", "p_idle", "p_admissible"))):
        print(f"\nteacher-forced on the demonstrator's states, {title}, per kind of step (steps: "
              + ", ".join(f"{k} {n}" for k, n in out["demonstrator"]["steps_by_kind"].items()) + ")")
        print(f"{'arm':8s} " + " ".join(f"{name:>14s}" for name, _ in columns))
        for arm, a in arms.items():
            tf = a["teacher_forced"]
            cells = []
            for _, kind in columns:
                row = tf["all"] if kind is None else tf["by_kind"].get(kind)
                cells.append("/".join(f"{row[k]:.2f}" for k in keys) if row and row["steps"] else "-")
            print(f"{arm:8s} " + " ".join(f"{c:>14s}" for c in cells))
    print(f"\nown episodes ({out['heldout_tasks']} tasks x {out['episodes_per_task']}): success, invalid / idle / "
          "repeat shares of steps, mean length, episodes departing, mean departure step; failures")
    for arm, a in arms.items():
        o = a["own_episodes"]
        sh = o["step_shares"]
        dep = f"{o['mean_departure_step']:.1f}" if o["mean_departure_step"] is not None else "-"
        print(f"{arm:8s} {o['success']:.3f}  {sh['invalid']:.3f} {sh['idle']:.3f} {sh['repeat']:.3f}  "
              f"{o['mean_steps']:5.2f}  {o['departed']:.2f} @ {dep}  {o['failures']}  ({a['cpu_seconds']} CPU s)")
        kinds = ", ".join(f"{k} {n}" for k, n in list(o["departure_kinds"].items())[:4]) or "none"
        print(f"{'':8s} departures (demonstrator's -> episode's): {kinds}; {o['departure_revisits']} went back")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", help="the verdict's runs folder (e.g. runs/verdict_tiny)")
    parser.add_argument("--seed", type=int, default=0, help="the seed whose arms are compared (and the evaluation's)")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--model", action="append", default=[], metavar="LABEL=PATH",
                        help="a model to measure instead of the runs folder's arms (repeatable)")
    parser.add_argument("--tasks", type=int, default=100, help="the first N held-out tasks of the preset")
    parser.add_argument("--episodes", type=int, help="own episodes per task (default: the preset's eval)")
    parser.add_argument("--preset", default="household-tiny", help="with --model: the preset the models ran")
    parser.add_argument("--out", type=Path, help="write the JSON results here")
    parser.add_argument("overrides", nargs="*", help="config overrides after --, as for agentgym train")
    args = parser.parse_args()
    if args.tasks < 1:
        parser.error(f"--tasks must be at least 1, got {args.tasks}")
    if args.episodes is not None and args.episodes < 1:
        parser.error(f"--episodes must be at least 1, got {args.episodes}")
    if bool(args.runs) == bool(args.model):
        parser.error("give either --runs (the verdict's arms of --seed) or --model LABEL=PATH pairs")
    if args.model:
        models = {}
        for item in args.model:
            label, _, path = item.partition("=")
            if not label or not path:
                parser.error(f"--model {item!r}: write LABEL=PATH")
            if label in models:
                parser.error(f"--model: the label {label!r} is given twice")
            if not Path(path).is_dir():
                parser.error(f"--model {item!r}: no model folder at {path}")
            models[label] = Path(path)
    else:
        runs = Path(args.runs)
        from benchmarks.learning import verdict

        settings = json.loads((runs / "settings.json").read_text()) if (runs / "settings.json").is_file() else {}
        args.preset = verdict.SETTINGS[settings["setting"]].preset if "setting" in settings else args.preset
        keys = arm_keys(runs, args.seed, args.arms)
        models = {arm: model_of(runs, key) for arm, key in keys.items()}
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        out = measure(args, models, Path(folder))
    argv = ["--runs", "RUNS", "--seed", str(args.seed), "--arms", *args.arms] if args.runs else \
        ["--seed", str(args.seed), *[f"--model {label}={shown(path, None)}" for label, path in models.items()]]
    argv += ["--tasks", str(args.tasks), *(["--episodes", str(args.episodes)] if args.episodes else [])]
    out = {"command": command(__file__, argv + (["--", *args.overrides] if args.overrides else [])),
           "code_version": code_version(), **out}
    print_table(out)
    if args.out:
        write_seed(args.out, args.seed, out)
        print(f"wrote {args.out} (key seed{args.seed})")


# the figures the summary over seeds averages: name -> the path into an arm's record
SUMMARIZED = {
    "invalid_steps": ("own_episodes", "step_shares", "invalid"),
    "idle_steps": ("own_episodes", "step_shares", "idle"),
    "repeated_steps": ("own_episodes", "step_shares", "repeat"),
    "failed_invalid": ("own_episodes", "failures", "invalid"),
    "failed_looping": ("own_episodes", "failures", "looping"),
    "p_admissible": ("teacher_forced", "all", "p_admissible"),
    "p_target": ("teacher_forced", "all", "p_target"),
    "p_idle": ("teacher_forced", "all", "p_idle"),
}


def over_seeds(whole: dict) -> dict:
    """{"over_seeds": ...}: per arm measured on every seed of the file, each SUMMARIZED figure's mean
    over those seeds and its value on each; a seed measured on other tasks or episodes is refused."""
    seeds = sorted(int(key[4:]) for key in whole if key.startswith("seed") and key[4:].isdigit())
    records = [whole[f"seed{s}"] for s in seeds]
    shapes = {(r["heldout_tasks"], r["episodes_per_task"]) for r in records}
    if len(shapes) > 1:
        raise ValueError(f"the seeds were measured on different tasks x episodes {sorted(shapes)}: "
                         "measure every seed with the same --tasks and --episodes")
    arms = [arm for arm in records[0]["arms"] if all(arm in r["arms"] for r in records)] if records else []
    summary = {}
    for arm in arms:
        summary[arm] = {}
        for name, path in SUMMARIZED.items():
            values = []
            for r in records:
                value = r["arms"][arm]
                for step in path:
                    value = value[step]
                values.append(value)
            summary[arm][name] = {"mean": sum(values) / len(values), "per_seed": values}
    return {"over_seeds": {"seeds": seeds, "arms": summary}}


def write_seed(path: Path, seed: int, results: dict) -> None:
    """`results` under the key seedN of the JSON file at `path`, the other seeds kept, so that one file
    holds every seed measured; `over_seeds` averages them; at the top, the code versions of all."""
    rr.write_results_key(path, f"seed{seed}", results, derived=over_seeds)


if __name__ == "__main__":
    main()
