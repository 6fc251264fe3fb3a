"""Each function takes the config sections it reads (issue 51): only the validators
(trainers/config.py, trainers/checks.py), `train` and the short list of functions below see the
root `TrainConfig`. A function takes the root config when a parameter is annotated `TrainConfig`,
or, unannotated, is named `cfg` / `config` and reads a field that only the root has (`cfg.seed`,
`cfg.iterations`), or, whatever its name, reads two of the root's sections (`c.env`, `c.ppo`).
Hand a new function its sections (`heldout_result(eval_cfg, env_cfg, ...)`) and explicit values
(`seed`), not the whole config."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from agentgym.trainers.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"agentgym": "agentgym", "envs": "agentgym.envs", "policies": "agentgym.policies",
           "tasks": "agentgym.tasks", "trainers": "agentgym.trainers"}
VALIDATORS = {"agentgym.trainers.config", "agentgym.trainers.checks"}  # they check the config as a whole
# module:function -> why it needs the whole config (at most 8 besides `train`)
ALLOWED = {
    "agentgym.trainers.training:train": "the loop's top: hands every part its sections",
    "agentgym.trainers.training:run_iteration": "the loop body (ppo, estimator, rollout, log, seed); tests call it",
    "agentgym.trainers.batches:BatchProducer.__init__": "the rollout side of the loop (rollout, env, ppo, seed)",
    "agentgym.trainers.distributed:setup": "joins the ranks and pins policy.device to the local rank in place",
    "agentgym.trainers.run_setup:prepare_start_model": "builds the tiny model and SFT warm start (5 sections)",
    "agentgym.trainers.run_setup:run_dir_for": "the run folder: the root's run_dir, else runs/<name>",
    "agentgym.trainers.env_requirements:fit_to_env": "rewrites a config in place for an env (`--env`)",
    "agentgym.trainers.cli:resume_hint": "the command line that continues a run",
    "agentgym.integrations.gateway.training:train_through_gateway": "the gateway's `train`: hands out the sections",
}


def _section_fields(cls) -> set[str]:
    names = set()
    for f in dataclasses.fields(cls):
        names.add(f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            names |= _section_fields(type(default))
    return names


def root_only_fields() -> set[str]:
    """TrainConfig's own fields that no section has: reading one means holding the root config."""
    root = TrainConfig()
    sections = set()
    for f in dataclasses.fields(TrainConfig):
        value = getattr(root, f.name)
        if dataclasses.is_dataclass(value):
            sections |= _section_fields(type(value))
    return {f.name for f in dataclasses.fields(TrainConfig)} - sections


def section_names() -> set[str]:
    root = TrainConfig()
    return {f.name for f in dataclasses.fields(TrainConfig) if dataclasses.is_dataclass(getattr(root, f.name))}


def root_config_params(source: str, root_fields: set[str], sections: set[str] | None = None):
    """(qualified function name, parameter) for every parameter that is the root config."""
    tree = ast.parse(source)
    found = []

    def visit(node, prefix: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                args = child.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                    annotation = ast.unparse(arg.annotation) if arg.annotation else ""
                    reads = _reads(child, arg.arg)
                    if "TrainConfig" in annotation:
                        found.append((name, arg.arg))
                    elif annotation in ("", "Any", "object") and arg.arg not in ("self", "cls") and (
                            (arg.arg in ("cfg", "config") and reads & root_fields)
                            or len(reads & (section_names() if sections is None else sections)) >= 2):
                        found.append((name, arg.arg))
                visit(child, f"{name}.")

    visit(tree, "")
    return found


def _reads(function, param: str) -> set[str]:
    return {n.attr for n in ast.walk(function)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == param}


def package_root_config_params():
    root_fields = root_only_fields()
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            module = ".".join([package, *rel.parts]).removesuffix(".__init__")
            for function, param in root_config_params(path.read_text(encoding="utf-8"), root_fields):
                yield module, function, param


def test_only_the_validators_and_the_loop_top_take_the_root_config():
    outside = sorted({f"{m}:{f}({p})" for m, f, p in package_root_config_params()
                      if m not in VALIDATORS and f"{m}:{f}" not in ALLOWED})
    assert not outside, ("these functions take the whole TrainConfig; pass them the sections they read "
                         f"(and explicit values such as the seed): {outside}")


def test_the_allow_list_is_short_and_every_entry_still_needs_it():
    assert len(ALLOWED) <= 9  # train + at most 8 others
    taking = {f"{m}:{f}" for m, f, _ in package_root_config_params()}
    stale = sorted(set(ALLOWED) - taking)
    assert not stale, f"no longer take the root config: drop them from ALLOWED: {stale}"


def test_the_check_sees_annotations_and_unannotated_use():
    fields = root_only_fields()
    assert {"env", "policy", "seed", "iterations"} <= fields and "lr" not in fields
    source = '''
def annotated(cfg: TrainConfig): ...
def unannotated(config): return config.seed + config.iterations
def section(ppo_cfg): return ppo_cfg.lr
def other(spec): return spec.seed + spec.name
def renamed(c): return c.env.id, c.ppo.lr
class Engine:
    def __init__(self, settings: EngineSettings): self.seed = settings.seed
    def build(self, c): return c.env.id  # one section: could be anything with an `env`
'''
    assert root_config_params(source, fields) == [("annotated", "cfg"), ("unannotated", "config"),
                                                  ("renamed", "c")]
