"""ALFWorld's table, as papers report it: success per task type (Pick, Look, Clean, Heat, Cool,
Pick2, All) on ALFWorld-v0's `heldout` and `heldout_unseen` games at 50 steps, with 95% Wilson
intervals, for any policies side by side (random, the oracle, the searching demonstrator, a warm start, a
trained model).

    python benchmarks/learning/alfworld_table.py --policy random --policy oracle --policy searching --out docs/alfworld_table.json
    python benchmarks/learning/alfworld_table.py --policy hf:runs/alfworld-tiny/sft_model \
        --policy hf:runs/alfworld-tiny/final_model --out docs/alfworld_table.json
    # the same table on the official games (`alfworld-download`; valid_seen / valid_unseen):
    python benchmarks/learning/alfworld_table.py --data-path $ALFWORLD_DATA/json_2.1.1 --policy random \
        --out runs/alfworld_table_official.json
    # a model trained on household's two easy categories, on the ALFWorld types it learned:
    python benchmarks/learning/alfworld_table.py --policy hf:runs/household-smol/final_model --types Pick Look
    # a run's held-out evaluations played already (RUN/evals/iterNNNNN/trajectories.jsonl): per-type rows,
    # and each file's paired gain per game over the first
    python benchmarks/learning/alfworld_table.py --compare BEFORE.jsonl AFTER.jsonl

An hf: model is played with the chat layout, token budget and decoding (admissible-only or free)
of the run that trained it (its config.yaml, as `agentgym eval` does). Each (policy, split) lands
in --out as soon as it is measured, so an interrupted table resumes; --redo measures again.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ENV_ID = "agentgym/ALFWorld-v0"
# ALFWorld's column names for its task types, in the papers' order.
COLUMNS = {"pick_and_place_simple": "Pick", "look_at_obj_in_light": "Look", "pick_clean_then_place_in_recep": "Clean",
           "pick_heat_then_place_in_recep": "Heat", "pick_cool_then_place_in_recep": "Cool",
           "pick_two_obj_and_place": "Pick2"}


def task_type(task: dict) -> str:
    """A game's ALFWorld task type: its params (generated games) or its folder name (official
    games: train/pick_heat_then_place_in_recep-Apple-None-CounterTop-1/trial_...)."""
    params = task["params"]
    return params.get("task_type") or params["game"].split("/")[1].split("-")[0]


def per_type(trajectories) -> dict:
    """Column -> {successes, episodes, value, lo, hi} (95% Wilson), plus All."""
    from agentgym.evaluation.stats import wilson_interval

    counts: dict[str, list[int]] = {name: [0, 0] for name in [*COLUMNS.values(), "All"]}
    for t in trajectories:
        if t.infra_error:
            continue
        for name in (COLUMNS[task_type(t.task)], "All"):
            counts[name][0] += bool(t.success)
            counts[name][1] += 1
    out = {}
    for name, (s, n) in counts.items():
        est = wilson_interval(s, n)
        out[name] = {"successes": s, "episodes": n, "value": est.value, "lo": est.low, "hi": est.high}
    return out


def games_of_types(space, split: str, types: list[str], folder: Path) -> Path:
    """The split's games of these task types (column names), as a task file `evaluate` plays."""
    tasks = [t for t in space.split(split) if COLUMNS[task_type(t.to_dict())] in types]
    path = folder / f"{split}_{'_'.join(types)}.jsonl"
    path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    return path


def measure(policy_spec: str, split: str, args, space) -> dict:
    import tempfile

    from agentgym.evaluation.cli import training_settings
    from agentgym.evaluation.evaluate import evaluate
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.specs import load_policy, parse_policy_spec

    spec = parse_policy_spec(policy_spec)
    trained = training_settings(spec.target) if spec.kind == "hf" else {}
    policy = load_policy(spec, ENV_ID, seed=args.seed, device=args.device, task_space=space)
    sampling = SamplingParams(temperature=args.temperature, seed=args.seed,
                              max_new_tokens=trained.get("max_new_tokens") or 16,
                              admissible_only=bool(trained.get("admissible_only")))
    env_kwargs = {"max_episode_steps": args.steps, "list_help": not args.list_no_help}
    if args.data_path:
        env_kwargs["data_path"] = args.data_path
    start = time.time()
    with tempfile.TemporaryDirectory() as folder:
        games = games_of_types(space, split, args.types, Path(folder)) if args.types else split
        result = evaluate(ENV_ID, policy, games, episodes_per_task=args.episodes, limit=args.limit, sampling=sampling,
                          chat=trained.get("chat"), env_kwargs=env_kwargs, seed=args.seed, task_space=space,
                          max_batch_episodes=args.batch)
    return {"policy": policy_spec, "split": split, "steps": args.steps, "episodes_per_task": args.episodes,
            "limit": args.limit, "only_types": args.types, "games": len(result.per_task), "infra_errors": result.infra_errors,
            "temperature": args.temperature, "admissible_only": sampling.admissible_only,
            "data_path": args.data_path, "seconds": round(time.time() - start, 1),
            "types": per_type(result.trajectories)}


def markdown(rows: list[dict]) -> str:
    cols = [*COLUMNS.values(), "All"]
    lines = ["| policy | split | games | " + " | ".join(cols) + " |", "| --- | --- | ---: |" + " ---: |" * len(cols)]
    for r in rows:
        cells = [f"{r['types'][c]['value']:.2f} [{r['types'][c]['lo']:.2f}, {r['types'][c]['hi']:.2f}]"
                 if r["types"][c]["episodes"] else "-" for c in cols]
        lines.append(f"| {r['policy']} | {r['split']} | {r['games']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compare(paths: list[str]) -> dict:
    """Evaluations played already, side by side: each file's per-type row and, for every file after
    the first, its gain over the first paired per game (each game's success rate over its episodes,
    as the trainer's evaluation records it)."""
    from agentgym.evaluation.evaluate import compute_metrics
    from agentgym.evaluation.stats import paired_gain
    from agentgym.trajectory import load_trajectories

    rows, first = [], {}
    for index, path in enumerate(paths):
        trajectories = load_trajectories(path)
        per_game = {t["task_id"]: t["successes"] / t["episodes"]
                    for t in compute_metrics(trajectories, env_id=ENV_ID).per_task if t["episodes"]}
        row = {"policy": path, "split": "-", "games": len(per_game), "types": per_type(trajectories)}
        if index == 0:
            first = per_game
        else:
            gain = paired_gain(first, per_game)
            row["paired_gain_over_first"] = {"value": gain.value, "lo": gain.low, "hi": gain.high, "games": gain.n}
        rows.append(row)
    return {"rows": rows}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", action="append", help="random | oracle | searching | hf:PATH (repeatable)")
    ap.add_argument("--compare", nargs="+", metavar="TRAJECTORIES",
                    help="evaluations played already (JSONL): print their per-type rows and paired gains, play nothing")
    ap.add_argument("--split", action="append", help="default: heldout and heldout_unseen")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--episodes", type=int, default=1, help="episodes per game")
    ap.add_argument("--temperature", type=float, default=1.0, help="hf: policies sample, as they act in training")
    ap.add_argument("--limit", type=int, default=None, help="first N games of each split (of --types)")
    ap.add_argument("--types", nargs="+", choices=list(COLUMNS.values()),
                    help="only these task types' games, e.g. Pick Look (the types a household-trained model learned)")
    ap.add_argument("--data-path", default=None, help="the official games' folder (train/, valid_seen/, valid_unseen/)")
    ap.add_argument("--list-no-help", action="store_true", help="leave ALFWorld's `help` out of the listed actions")
    ap.add_argument("--batch", type=int, default=16, help="episodes played at once")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="where an hf: model runs (cpu, cuda, auto)")
    ap.add_argument("--out", default="docs/alfworld_table.json")
    ap.add_argument("--redo", action="store_true", help="measure again what --out already holds")
    args = ap.parse_args(argv)
    if args.compare:
        result = compare(args.compare)
        print(markdown(result["rows"]))
        for row in result["rows"][1:]:
            g = row["paired_gain_over_first"]
            print(f"{row['policy']} - {args.compare[0]}: {g['value']:+.3f} [{g['lo']:+.3f}, {g['hi']:+.3f}] "
                  f"paired over {g['games']} games")
        return
    if not args.policy:
        ap.error("give --policy (what to play) or --compare (evaluations played already)")

    from agentgym.envs.alfworld.tasks import ALFWorldTaskSpace, OfficialTaskSpace

    space = OfficialTaskSpace(args.data_path) if args.data_path else ALFWorldTaskSpace()
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.is_file() else {"rows": []}
    for split in args.split or ["heldout", "heldout_unseen"]:
        for policy in args.policy:
            key = dict(policy=policy, split=split, steps=args.steps, episodes_per_task=args.episodes,
                       data_path=args.data_path, limit=args.limit, only_types=args.types)
            done = [r for r in results["rows"] if all(r.get(k) == v for k, v in key.items())]
            if done and not args.redo:
                continue
            row = measure(policy, split, args, space)
            results["rows"] = [r for r in results["rows"] if r not in done] + [row]
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=1) + "\n")  # lands as measured: a rerun resumes
            print(f"{policy} on {split}: All {row['types']['All']['value']:.3f} ({row['games']} games, "
                  f"{row['seconds']} s)", flush=True)
    print(markdown(results["rows"]))


if __name__ == "__main__":
    main()
