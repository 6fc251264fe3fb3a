"""Household -> ALFWorld transfer (issue 37): does what the main job learns on household carry over
to ALFWorld's real engine?

For each household-tiny run (`agentgym train household-tiny seed=S`), its warm start (sft_model)
and its final model are evaluated three ways, each with the run's chat layout, sampling
temperature and seed:

* household: the run's own held-out tasks in household, the trainer's final evaluation reproduced;
* converted: the same tasks written as ALFWorld games (envs/alfworld/household.py,
  export_household) and played in ALFWorld's engine at the same step limit: the engine and its
  texts change, the task does not;
* converted_without_help: the same with ALFWorld's always-admissible "help" left out of the
  admissible list the policy sees (`list_help=False`; household never lists it);
* alfworld: ALFWorld-v0's generated games of the task types the run trained on (heldout and
  heldout_unseen: real floor plans, 6-54 receptacles, closed containers, distractors) at
  --alfworld-steps: the task distribution changes too;
* household_harder: household's own held-out tasks of those types at its medium and hard levels
  (6-13 receptacles, most containers closed, 3-9 distractors, the goal object out of sight) at
  --alfworld-steps: the distribution shift without the engine, to tell which of the two a drop
  on ALFWorld's games comes from.

Writes --out (docs/alfworld_transfer.json): per run and model the success on each, RL's gain
(final - warm start) on each, paired per task and pooled over runs, and converted - household
(the engine's own effect on the same tasks and the same model). Evaluations are cached per run
and model in <run>/transfer/, so an interrupted benchmark resumes.

    python benchmarks/learning/alfworld_transfer.py runs/household-tiny runs/transfer/household-seed1 ... \
        --out docs/alfworld_transfer.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.harness import jobs as rr  # noqa: E402

MODELS = ("sft_model", "final_model")
SETS = ("household", "converted", "converted_without_help", "alfworld", "household_harder")


def trained_alfworld_types(categories: list[str]) -> list[str]:
    """ALFRED task types of the household categories a run trained on ("pick_and_place/easy")."""
    from agentgym.envs.alfworld.household import TASK_TYPE

    return sorted({TASK_TYPE[c.split("/")[0]] for c in categories})


def alfworld_tasks(types: list[str]) -> list:
    from agentgym.registration import get_task_space

    space = get_task_space("agentgym/ALFWorld-v0")
    return [t for split in ("heldout", "heldout_unseen") for t in space.split(split)
            if t.params["task_type"] in types]


def evaluate_set(run: Path, model: str, which: str, args, log) -> dict:
    """{task key: success rate} of one model on one set, cached in <run>/transfer/."""
    cache = run / "transfer" / (f"first{args.limit}" if args.limit else "all") / f"{model}.{which}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    import yaml

    from agentgym.evaluation.cli import run_settings
    from agentgym.evaluation.evaluate import EvalRequest, run_eval
    from agentgym.envs.alfworld.household import export_household
    from agentgym.envs.alfworld.tasks import OfficialTaskSpace
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.hf import HFPolicy
    from agentgym.tasks.splits import load_split, save_split

    settings = run_settings(run)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    household = load_split(settings["tasks"])[:args.limit]
    sampling = SamplingParams(temperature=settings["temperature"], max_new_tokens=settings["max_new_tokens"],
                              seed=settings["seed"])
    steps = settings["env_kwargs"].get("max_episode_steps")
    # the run's own held-out tasks as the trainer evaluated them; the other sets change env, tasks, env settings
    household_request = EvalRequest("agentgym/Household-v0", settings["tasks"], args.episodes or settings["episodes"],
                                    args.limit, sampling=sampling, chat=settings["chat"],
                                    env_kwargs=settings["env_kwargs"], seed=settings["seed"])
    policy = HFPolicy(str(run / model))
    started = time.time()
    if which == "household":
        result = run_eval(household_request, policy)
        keys = {t: t for t in (r["task_id"] for r in result.per_task)}
    elif which in ("converted", "converted_without_help"):
        folder = cache.parent / "household_as_alfworld"
        rel = export_household(household, folder)
        space = OfficialTaskSpace(folder)
        by_game = {g: spec.task_id for g, spec in zip(rel, household)}
        result = run_eval(dataclasses.replace(
            household_request, env="agentgym/ALFWorld-v0", split="heldout", task_space=space,
            env_kwargs={"data_path": str(folder), "max_episode_steps": steps, "list_help": which == "converted"}),
            policy)
        keys = {spec.task_id: by_game[spec.params["game"]] for spec in space.split("heldout")}
    elif which == "household_harder":
        from agentgym.registration import get_task_space

        space = get_task_space("agentgym/Household-v0")
        types = {c.split("/")[0] for c in cfg["env"]["categories"]}
        tasks = [t for t in space.split("heldout")
                 if (kind := space.category(t).split("/"))[0] in types and kind[1] != "easy"]
        path = cache.parent / "household_harder_tasks.jsonl"
        save_split(path, tasks)
        result = run_eval(dataclasses.replace(household_request, split=str(path), env_kwargs={
            **settings["env_kwargs"], "max_episode_steps": args.alfworld_steps}), policy)
        keys = {t.task_id: t.task_id for t in tasks}
    else:
        tasks = alfworld_tasks(trained_alfworld_types(cfg["env"]["categories"]))
        path = cache.parent / "alfworld_tasks.jsonl"
        save_split(path, tasks)
        result = run_eval(dataclasses.replace(household_request, env="agentgym/ALFWorld-v0", split=str(path),
                                              env_kwargs={"max_episode_steps": args.alfworld_steps}), policy)
        keys = {t.task_id: t.task_id for t in tasks}
    rates = {keys[r["task_id"]]: r["successes"] / r["episodes"] for r in result.per_task if r["episodes"]}
    record = {"success": result.success_rate, "tasks": len(rates), "episodes": result.overall.episodes,
              "seconds": round(time.time() - started, 1), "infra_errors": result.infra_errors,
              "infra_error_messages": result.infra_error_messages[:3], "per_task": rates,
              "by_category": {k: m.success_rate.value for k, m in result.categories.items()}}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(record))
    log(f"{run.name} {model} {which}: {record['success']:.3f} ({record['tasks']} tasks, {record['seconds']:.0f} s)")
    return record


def report(runs: list[Path], results: dict, args) -> dict:
    per = {str(r): results[str(r)] for r in runs}
    out = {"runs": [str(r) for r in runs], "episodes_per_task": args.episodes, "limit": args.limit,
           "alfworld_steps": args.alfworld_steps, "results": {}, "rl_gain": {}, "engine_effect": {}}
    for r in runs:
        out["results"][str(r)] = {m: {s: {k: v for k, v in per[str(r)][m][s].items() if k != "per_task"}
                                      for s in SETS} for m in MODELS}
    for s in SETS:
        out["rl_gain"][s] = rr.paired_diff([per[str(r)]["final_model"][s]["per_task"] for r in runs],
                                           [per[str(r)]["sft_model"][s]["per_task"] for r in runs])
        out["rl_gain"][s]["per_run"] = [per[str(r)]["final_model"][s]["success"]
                                        - per[str(r)]["sft_model"][s]["success"] for r in runs]
    for m in MODELS:
        for converted in ("converted", "converted_without_help"):
            out["engine_effect"][f"{m}/{converted}"] = rr.paired_diff(
                [per[str(r)][m][converted]["per_task"] for r in runs], [per[str(r)][m]["household"]["per_task"] for r in runs])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="household-tiny run folders (sft_model and final_model)")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per task (default: the run's)")
    parser.add_argument("--alfworld-steps", type=int, default=50,
                        help="step limit on ALFWorld-v0's own games (50, as in the ALFWorld literature)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks of each set (a smoke test)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "alfworld_transfer.json")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from agentgym.trainers.run_setup import quiet_transformers

    quiet_transformers()
    for run in args.runs:
        for model in MODELS:
            if not (run / model / "config.json").is_file():
                raise SystemExit(f"{run} has no {model}: pass finished household-tiny runs")
    results = {}
    for run in args.runs:
        results[str(run)] = {m: {s: evaluate_set(run, m, s, args, print) for s in SETS} for m in MODELS}
    out = report(args.runs, results, args)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    for s in SETS:
        g = out["rl_gain"][s]
        print(f"RL gain on {s}: {g['diff']:+.3f} [{g['ci'][0]:+.3f}, {g['ci'][1]:+.3f}]")
    for key, e in out["engine_effect"].items():
        print(f"converted - household, {key}: {e['diff']:+.3f} [{e['ci'][0]:+.3f}, {e['ci'][1]:+.3f}]")


if __name__ == "__main__":
    main()
