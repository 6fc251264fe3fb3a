"""What the viewer reads: run folders and trajectory JSONL files, turned into plain JSON for the page.

A source is one PATH given to `agentgym view`: a run dir (`agentgym train`), the --out folder of
`agentgym eval`, or a single trajectory JSONL. Files are re-listed on every request (a running
training adds some) and parsed once per (size, mtime).
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
        }

    def overview(self) -> dict:
        groups = []
        for gid, indices in self.groups.items():
            first = self.episodes[indices[0]]
            groups.append({"group_id": gid, "task_id": first.get("task_id"), "instruction": first.get("instruction", ""),
                           "category": self._meta(indices[0]).get("category") or "",
                           "episodes": [self.episode_summary(i) for i in indices]})
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
                "observation": s.get("observation", ""),
                "anchor": s.get("anchor", ""),
                "anchor_group": group,
                "anchor_members": [list(m) for m in members],
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
        })


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
