"""What the viewer reads: run folders and trajectory JSONL files, turned into plain JSON for the page.

A source is one PATH given to `agentgym view`: a run dir (`agentgym train`), the --out folder of
`agentgym eval`, or a single trajectory JSONL. Files are re-listed on every request (a running
training adds some) and parsed once per (size, mtime).

Tree rollouts (agentgym.rollout's `branch=`) write episodes whose metadata["tree"] names their
parent episode and branch step: a file's episodes are then a tree, each branch listed under its
parent and shown hanging off the parent's step where it starts, its steps numbered from there.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.errors import ConfigError
from agentgym.safe_files import MiB, UnsafeFileError, is_regular, open_regular, read_json, read_regular

# What the viewer reads of one file. A run's trajectory file of a few thousand episodes is tens of
# MB; a larger one is refused in one line (a 251 MB file took 13 s to parse). A single line over
# MAX_LINE_BYTES is skipped and counted as unreadable, without being held in memory.
MAX_FILE_BYTES = 192 * MiB
MAX_LINE_BYTES = 16 * MiB
MAX_SMALL_FILE_BYTES = 16 * MiB  # report.json, config.yaml


def clean(value: Any) -> Any:
    """JSON-safe copy: NaN and infinities become null (the page's JSON.parse has no spelling for them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


@dataclass
class TrajFile:
    path: Path
    kind: str  # train | eval | file
    iteration: int | None
    label: str


@dataclass
class Report:
    path: Path
    iteration: int | None
    label: str


_ITER = re.compile(r"iter0*(\d+)")


def _iteration(name: str) -> int | None:
    match = _ITER.search(name)
    return int(match.group(1)) if match else None


class Source:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise ConfigError(f"{self.path} does not exist: pass a run dir (runs/NAME) or a trajectory JSONL file")
        if not self.path.is_dir() and not is_regular(self.path):
            raise ConfigError(f"{self.path} is not a regular file or a folder: pass a run dir or a trajectory JSONL file")
        if self.path.is_file() and not self.path.name.endswith(".jsonl"):
            raise ConfigError(f"{self.path} is not a .jsonl file: pass a run dir or a trajectory JSONL file")
        self.name = self.path.stem if self.path.is_file() else (self.path.resolve().name or str(self.path))

    # --- discovery ------------------------------------------------------------------------------
    def files(self) -> list[TrajFile]:
        if self.path.is_file():
            return [TrajFile(self.path, "file", None, self.path.name)]
        out = []
        # only regular files: a FIFO or a device named *.jsonl is not a trajectory file
        for p in sorted(p for p in (self.path / "trajectories").glob("*.jsonl") if is_regular(p)):
            it = _iteration(p.stem)
            kind = "eval" if p.stem.startswith("eval") else "train"
            out.append(TrajFile(p, kind, it, f"{kind} iteration {it}" if it is not None else p.stem))
        for p in sorted(p for p in (self.path / "evals").glob("*/trajectories.jsonl") if is_regular(p)):
            it = _iteration(p.parent.name)
            out.append(TrajFile(p, "eval", it, f"eval iteration {it}" if it is not None else p.parent.name))
        if is_regular(self.path / "trajectories.jsonl"):  # an `agentgym eval --out` folder
            out.append(TrajFile(self.path / "trajectories.jsonl", "eval", None, "trajectories.jsonl"))
        return out

    def reports(self) -> list[Report]:
        if self.path.is_file():
            return []
        out = []
        for p in sorted(p for p in (self.path / "evals").glob("*/report.json") if is_regular(p)):
            it = _iteration(p.parent.name)
            out.append(Report(p, it, f"iteration {it}" if it is not None else p.parent.name))
        if is_regular(self.path / "report.json"):
            out.append(Report(self.path / "report.json", None, "report.json"))
        return out

    def metrics_path(self) -> Path | None:
        p = self.path / "metrics.jsonl" if self.path.is_dir() else None
        return p if p is not None and is_regular(p) else None

    def config(self) -> dict:
        p = self.path / "config.yaml" if self.path.is_dir() else None
        if p is None or not is_regular(p):
            return {}
        try:
            import yaml

            data = yaml.safe_load(read_regular(p, MAX_SMALL_FILE_BYTES, "config").decode("utf-8", "replace")) or {}
            return data if isinstance(data, dict) else {}
        except Exception:
            return {}

    def summary(self) -> dict:
        cfg = self.config()
        return {
            "name": self.name,
            "path": str(self.path),
            "estimator": (cfg.get("estimator") or {}).get("name") if isinstance(cfg.get("estimator"), dict) else None,
            "env": (cfg.get("env") or {}).get("id") if isinstance(cfg.get("env"), dict) else None,
            "files": [{"index": i, "kind": f.kind, "iteration": f.iteration, "label": f.label,
                       "bytes": f.path.stat().st_size} for i, f in enumerate(self.files())],
            "reports": [{"index": i, "iteration": r.iteration, "label": r.label} for i, r in enumerate(self.reports())],
            "has_metrics": self.metrics_path() is not None,
        }

    def metrics(self) -> list[dict]:
        path = self.metrics_path()
        if path is None:
            return []
        from agentgym.trainers.logging_utils import read_metrics  # lazy: `agentgym --help` stays fast

        return clean(read_metrics(path))

    def report(self, index: int) -> dict:
        reports = self.reports()
        if not 0 <= index < len(reports):
            raise KeyError(index)
        try:
            data = read_json(reports[index].path, MAX_SMALL_FILE_BYTES, "report")
        except UnsafeFileError as exc:
            if "nests" not in str(exc) and "not valid JSON" not in str(exc):
                raise
            data = None
        if not isinstance(data, dict):
            raise ValueError(f"{reports[index].path} is not a JSON object")
        data["_label"] = f"{self.name} · {reports[index].label}"
        return clean(data)

    def episodes(self, index: int) -> "EpisodeFile":
        files = self.files()
        if not 0 <= index < len(files):
            raise KeyError(index)
        return load_file(files[index].path)


# --- one trajectory file ---------------------------------------------------------------------------
class EpisodeFile:
    """The episodes of one JSONL file with their groups and anchor groups."""

    def __init__(self, path: Path):
        self.path = path
        self.episodes: list[dict] = []
        self.bad_lines = 0
        with open_regular(path, "trajectory file") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise UnsafeFileError(f"trajectory file {path} is {size / MiB:,.0f} MB, over the viewer's "
                                      f"{MAX_FILE_BYTES // MiB} MB: view a run with fewer episodes per file")
            lines, read = _lines(f), 0
            for line in lines:
                read += len(line)
                if read > MAX_FILE_BYTES:  # the file grew while read
                    raise UnsafeFileError(f"trajectory file {path} grew past the viewer's {MAX_FILE_BYTES // MiB} MB")
                if line is _TOO_LONG:
                    self.bad_lines += 1
                    continue
                if not line.strip():
                    continue
                try:
                    d = json.loads(line.decode("utf-8", "replace"))
                except (ValueError, RecursionError):
                    self.bad_lines += 1  # a torn last line of a file being written, or not JSON at all
                    continue
                if _readable_episode(d):
                    self.episodes.append(d)
                else:
                    self.bad_lines += 1  # JSON, but not an episode this viewer can show: counted, skipped
        _fill_categories(self.episodes)
        self.branch_of, self.branches = _tree_links(self.episodes)
        self.groups: dict[str, list[int]] = {}
        for i, ep in enumerate(self.episodes):
            self.groups.setdefault(str(ep.get("group_id", "")), []).append(i)
        self.anchor_of: dict[tuple[int, int], int] = {}  # (episode, step) -> anchor group, numbered per file
        self.members: list[list[tuple[int, int]]] = []
        for indices in self.groups.values():
            # as GiGPO groups them: steps of one episode group whose anchor is equal
            seen: dict[str, int] = {}
            for i in indices:
                for t, step in enumerate(self.episodes[i].get("steps") or []):
                    key = str(step.get("anchor", ""))
                    if key not in seen:
                        seen[key] = len(self.members)
                        self.members.append([])
                    self.anchor_of[(i, t)] = seen[key]
                    self.members[seen[key]].append((i, t))

    def _meta(self, i: int) -> dict:
        meta = self.episodes[i].get("metadata")
        return meta if isinstance(meta, dict) else {}

    def episode_summary(self, i: int) -> dict:
        ep = self.episodes[i]
        steps = ep.get("steps") or []
        meta = self._meta(i)
        adv = (meta.get("advantage") or {}).get("total") if isinstance(meta.get("advantage"), dict) else None
        # a step without an advantage is null in the file (NaN written by another tool, a dropped step)
        adv = [x for x in adv if isinstance(x, (int, float)) and math.isfinite(x)] if isinstance(adv, list) else None
        rewards = [s.get("reward") or 0.0 for s in steps if isinstance(s.get("reward"), (int, float))]
        return {
            "index": i,
            "success": bool(ep.get("success")),
            "score": ep.get("score"),
            "steps": len(steps),
            "invalid": sum(not s.get("action_valid") for s in steps),
            "infra_error": bool(ep.get("infra_error")),
            "error": ep.get("error"),
            "return": float(sum(rewards)),
            "mean_adv": (sum(adv) / len(adv)) if adv else None,
            "category": meta.get("category") or "",
            **self._tree_summary(i),
        }

    def _offset(self, i: int) -> int:
        """The number, in its tree, of episode i's first step: a branch starts at its branch step."""
        return self.branch_of[i][1] if i in self.branch_of else 0

    def _tree_summary(self, i: int) -> dict:
        """Where episode i sits in its tree: parent (its file index; None for a root, or when the
        parent is not in this file), the branch step, and the offset of its steps (a branch's first
        step is its parent's step `branch_step`)."""
        parent, step = self.branch_of.get(i, (None, None))
        return {"parent": parent, "branch_step": step, "offset": self._offset(i),
                "branch_count": len(self.branches.get(i, ()))}

    def _branch_points(self, i: int) -> list[dict]:
        """The branches hanging off episode i's steps: per branch step, each branch's summary and its
        steps (action, reward, advantage), with the mean return of the branches and of episode i
        from that step on (what the tree estimator compares)."""
        ep_steps = self.episodes[i].get("steps") or []
        offset = self._offset(i)
        points: dict[int, list[int]] = {}
        for j in self.branches.get(i, ()):
            points.setdefault(self.branch_of[j][1], []).append(j)
        out = []
        for step in sorted(points):
            t = step - offset  # the parent's own index of that step
            here = [s.get("reward") for s in ep_steps[t:]] if 0 <= t < len(ep_steps) else []
            branches = []
            for j in points[step]:
                adv = (self._meta(j).get("advantage") or {}).get("total")
                steps = [{"t": u, "turn": step + u, "action": s.get("action"), "action_valid": bool(s.get("action_valid")),
                          "reward": s.get("reward"),
                          "advantage": adv[u] if isinstance(adv, list) and u < len(adv) else None}
                         for u, s in enumerate(self.episodes[j].get("steps") or [])]
                branches.append({**self.episode_summary(j), "steps": steps})
            returns = [b["return"] for b in branches]
            out.append({"step": step, "t": t if 0 <= t < len(ep_steps) else None,
                        "return_from_here": float(sum(r for r in here if isinstance(r, (int, float)))) if here else None,
                        "mean_return": sum(returns) / len(returns), "branches": branches})
        return out

    def overview(self) -> dict:
        groups = []
        for gid, indices in self.groups.items():
            first = self.episodes[indices[0]]
            order = _tree_order(indices, self.branches, self.branch_of)
            groups.append({"group_id": gid, "task_id": first.get("task_id"), "instruction": first.get("instruction", ""),
                           "category": self._meta(indices[0]).get("category") or "",
                           "episodes": [{**self.episode_summary(i), "depth": depth} for i, depth in order]})
        meta0 = self._meta(0) if self.episodes else {}
        return clean({"groups": groups, "episodes": len(self.episodes), "bad_lines": self.bad_lines,
                      "estimator": meta0.get("estimator"), "iteration": meta0.get("iteration"),
                      "categories": sorted({g["category"] for g in groups if g["category"]})})

    def episode(self, i: int) -> dict:
        if not 0 <= i < len(self.episodes):
            raise KeyError(i)
        ep = self.episodes[i]
        meta = self._meta(i)
        adv = meta.get("advantage") if isinstance(meta.get("advantage"), dict) else {}
        tokens = meta.get("tokens") if isinstance(meta.get("tokens"), list) else []
        tags = _meta_tags(meta.get("meta_reasoning"), ep.get("steps") or [])
        steps = []
        for t, s in enumerate(ep.get("steps") or []):
            group = self.anchor_of.get((i, t))
            members = self.members[group] if group is not None else []
            steps.append({
                "t": t,
                "turn": self._offset(i) + t,
                "observation": s.get("observation", ""),
                "anchor": s.get("anchor", ""),
                "anchor_group": group,
                "anchor_members": [[e, u, self._offset(e) + u] for e, u in members],
                "text": s.get("text", ""),
                "action": s.get("action"),
                "action_valid": bool(s.get("action_valid")),
                "reward": s.get("reward"),
                "progress": s.get("progress"),
                "advantage": {k: v[t] for k, v in adv.items() if isinstance(v, list) and t < len(v)},
                "messages": s.get("messages") or [],
                "tokens": tokens[t] if t < len(tokens) and isinstance(tokens[t], list) else None,
                "response_ids": s.get("response_ids") or [],
                "logprobs": s.get("response_logprobs") or [],
                "prompt_tokens": len(s.get("prompt_ids") or []),
                **tags[t],
            })
        gid = str(ep.get("group_id", ""))
        return clean({
            **self.episode_summary(i),
            "num_steps": len(steps),
            "group_id": gid, "task_id": ep.get("task_id"), "env_id": ep.get("env_id"), "seed": ep.get("seed"),
            "instruction": ep.get("instruction", ""), "terminated": ep.get("terminated"),
            "truncated": ep.get("truncated"), "final_observation": ep.get("final_observation", ""),
            "task": ep.get("task"), "estimator": meta.get("estimator"), "iteration": meta.get("iteration"),
            "drop_abs_adv_below": meta.get("drop_abs_adv_below"),
            "group_episodes": self.groups.get(gid, [i]), "steps": steps,
            "branch_points": self._branch_points(i),
        })


def _tree_links(episodes: list[dict]) -> tuple[dict[int, tuple[int | None, int]], dict[int, list[int]]]:
    """(branch -> (parent's index or None, branch step), parent -> its branches in file order) from
    the episodes' metadata["tree"] ({"id", "parent", "step"}, agentgym.rollout). A tree record of
    another shape, or a parent id not in the file, leaves the episode a root or an orphan branch."""
    ids: dict[str, int] = {}
    for i, ep in enumerate(episodes):
        tree = _tree_record(ep)
        if tree is not None and isinstance(tree.get("id"), str):
            ids.setdefault(tree["id"], i)
    branch_of: dict[int, tuple[int | None, int]] = {}
    branches: dict[int, list[int]] = {}
    for i, ep in enumerate(episodes):
        tree = _tree_record(ep)
        if tree is None or tree.get("parent") is None:
            continue
        step = tree.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            continue
        parent = ids.get(tree["parent"]) if isinstance(tree["parent"], str) else None
        parent = None if parent == i else parent
        branch_of[i] = (parent, step)
        if parent is not None:
            branches.setdefault(parent, []).append(i)
    for kids in branches.values():
        kids.sort(key=lambda j: (branch_of[j][1], j))
    return branch_of, branches


def _tree_record(ep: dict) -> dict | None:
    meta = ep.get("metadata")
    tree = meta.get("tree") if isinstance(meta, dict) else None
    return tree if isinstance(tree, dict) else None


def _tree_order(indices: list[int], branches: dict[int, list[int]],
                branch_of: dict[int, tuple[int | None, int]]) -> list[tuple[int, int]]:
    """(episode, depth) of a group's episodes: each root followed by its branches (depth-first, by
    branch step), branches whose parent is elsewhere where they are; a hand-made cycle is listed flat."""
    members = set(indices)
    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    for top in indices:
        parent = branch_of.get(top, (None, 0))[0]
        if parent is not None and parent in members:
            continue  # listed under its parent
        stack = [(top, 0)]
        while stack:
            i, depth = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            out.append((i, depth))
            stack.extend((j, depth + 1) for j in reversed(branches.get(i, ())) if j in members)
    out += [(i, 0) for i in indices if i not in seen]
    return out


_META_OPEN = re.compile(r"<(planning|explore|reflection|monitor)>", re.I)


def _meta_tags(record: Any, steps: list) -> list[dict]:
    """Per step, RLVMR's meta-reasoning tag (agentgym.rewards.meta_reasoning): meta_tag, meta_ok (the
    reply follows the format), meta_problem, and meta_reward when the reward hook scored the episode
    (its record in metadata["meta_reasoning"]). Without a record, a reply that opens a meta tag is
    parsed here (reward unknown); an untagged reply shows nothing."""
    out: list[dict] = [{} for _ in steps]
    if isinstance(record, dict) and isinstance(record.get("tags"), list):
        rewards, problems = record.get("rewards"), record.get("problems")
        for t, tag in enumerate(record["tags"][: len(steps)]):
            problem = problems[t] if isinstance(problems, list) and t < len(problems) else ""
            reward = rewards[t] if isinstance(rewards, list) and t < len(rewards) else None
            out[t] = {"meta_tag": tag if isinstance(tag, str) else None, "meta_ok": not problem,
                      "meta_problem": str(problem or ""),
                      "meta_reward": reward if isinstance(reward, (int, float)) else None}
        return out
    for t, s in enumerate(steps):
        text = s.get("text")
        if isinstance(text, str) and _META_OPEN.search(text):
            from agentgym.rewards.meta_reasoning import parse_tags  # lazy: `agentgym --help` stays fast

            parsed = parse_tags(text)
            out[t] = {"meta_tag": parsed.tag, "meta_ok": parsed.well_formed,
                      "meta_problem": parsed.problem, "meta_reward": None}
    return out


def _readable_episode(d: Any) -> bool:
    """An episode record whose parts have the shapes the views read (a file written by hand or
    by another tool may hold anything): steps a list of mappings, metadata a mapping whose
    advantages are lists of numbers and whose tokens are a list."""
    if not isinstance(d, dict):
        return False
    steps = d.get("steps")
    if steps is not None and not (isinstance(steps, list) and all(isinstance(s, dict) for s in steps)):
        return False
    meta = d.get("metadata")
    if meta is None:
        return True
    if not isinstance(meta, dict):
        return False
    adv = meta.get("advantage")
    if adv is not None and not (isinstance(adv, dict) and all(
            isinstance(v, list) and all(isinstance(x, (int, float)) or x is None for x in v) for v in adv.values())):
        return False
    return meta.get("tokens") is None or isinstance(meta.get("tokens"), list)


def _fill_categories(episodes: list[dict]) -> None:
    """Files the trainer did not write (`agentgym rollout --out`) have no category: ask the env's task space."""
    spaces: dict[str, object] = {}
    for ep in episodes:
        meta = ep.setdefault("metadata", {}) if isinstance(ep.get("metadata", {}), dict) else None
        env_id, task = ep.get("env_id"), ep.get("task")
        if meta is None or meta.get("category") or not env_id or not isinstance(task, dict):
            continue
        try:
            if env_id not in spaces:
                import agentgym  # noqa: F401  registers the built-in envs
                from agentgym.registration import get_task_space  # lazy: `agentgym --help` stays fast

                spaces[env_id] = get_task_space(env_id)
            from agentgym.tasks.spec import TaskSpec  # lazy: `agentgym --help` stays fast

            meta["category"] = str(spaces[env_id].category(TaskSpec.from_dict(task)))
        except Exception:  # an env this install does not know, or one without categories
            spaces.setdefault(env_id, None)


_CACHE: dict[Path, tuple[tuple[int, int], EpisodeFile]] = {}
_LOCK = threading.Lock()


_TOO_LONG = b"\0too long"


def _lines(f):
    """The lines of a binary file, each at most MAX_LINE_BYTES (a longer one is skipped and
    yielded as _TOO_LONG, read past in bounded pieces)."""
    while True:
        line = f.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = f.readline(MAX_LINE_BYTES)
            yield _TOO_LONG
            continue
        yield line


def load_file(path: Path) -> EpisodeFile:
    stat = path.stat()
    key = (stat.st_size, stat.st_mtime_ns)
    with _LOCK:
        hit = _CACHE.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
    loaded = EpisodeFile(path)
    with _LOCK:
        if len(_CACHE) > 16:  # a few iterations' worth; the rest re-read on demand
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[path] = (key, loaded)
    return loaded
