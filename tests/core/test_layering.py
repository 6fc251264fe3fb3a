"""Modules import only from their own layer or the layers below (docs/architecture.md):

    errors -> task spec -> policy contract -> tasks -> core -> envs -> policies -> evaluation -> trainers -> apps

and no two modules import each other, directly or through others (no import cycles, also within
a layer). Every import is checked, at module level and inside functions; an import under
`if TYPE_CHECKING:` is a type hint, not a dependency, and is skipped. Third-party imports
(torch, ray, vllm) are not part of the graph and may stay lazy. Registries load their entries
from import strings ("module:function"), which are not imports."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"agentgym": "agentgym", "envs": "agentgym.envs", "policies": "agentgym.policies",
           "tasks": "agentgym.tasks", "trainers": "agentgym.trainers"}
LAYERS = ["errors", "task spec", "policy contract", "tasks", "core", "envs", "policies", "evaluation", "trainers", "apps"]
# the longest matching prefix names a module's layer; command-line modules are apps wherever they live
PREFIXES = {
    "agentgym.errors": "errors",
    "agentgym.safe_files": "errors",  # reading files users give: every layer's readers
    "agentgym.tasks.spec": "task spec",  # TaskSpec: plain data, below the Policy contract that names it
    "agentgym.policies.base": "policy contract",
    "agentgym.tasks": "tasks",
    "agentgym": "core",
    "agentgym.envs": "envs",
    "agentgym.policies": "policies",
    "agentgym.evaluation": "evaluation",
    "agentgym.trainers": "trainers",
    "agentgym.cli": "apps",
    "agentgym.integrations": "apps",
    "agentgym.viewer": "apps",
}


def layer_of(module: str) -> str | None:
    if module != "agentgym" and not module.startswith("agentgym."):
        return None
    if module.rsplit(".", 1)[-1].endswith("cli"):  # cli, serve_cli, tasks_cli
        return "apps"
    best = max((p for p in PREFIXES if module == p or module.startswith(p + ".")), key=len)
    return PREFIXES[best]


def modules(root: Path):
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root / folder).with_suffix("")
            name = ".".join([package, *rel.parts]).removesuffix(".__init__")
            yield path, name


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imported(path: Path, module: str, known: set[str]):
    """(line, imported module) for every import in the file; `from a import b` names a.b when
    that is a module (a submodule import), else a."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield node.lineno, sub if sub in known else base


def violations(root: Path) -> list[str]:
    found = list(modules(root))
    known = {name for _, name in found}
    out = []
    for path, module in found:
        here = LAYERS.index(layer_of(module))
        for line, target in imported(path, module, known):
            there = layer_of(target)
            if there is not None and LAYERS.index(there) > here:
                out.append(f"{path.relative_to(root)}:{line} ({layer_of(module)}) imports {target} ({there})")
    return out


def test_no_module_imports_from_a_higher_layer():
    bad = violations(ROOT)
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_the_check_catches_a_planted_upward_import(tmp_path):
    for folder in FOLDERS:
        (tmp_path / folder).mkdir()
    (tmp_path / "tasks" / "spec.py").write_text("from agentgym.trainers.loop import train\n")
    (tmp_path / "agentgym" / "core.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agentgym.envs.x import X\n"
        "def f():\n    from agentgym.policies import hf\n")
    (tmp_path / "policies" / "hf.py").write_text("")
    assert violations(tmp_path) == [
        "agentgym/core.py:5 (core) imports agentgym.policies.hf (policies)",
        "tasks/spec.py:1 (task spec) imports agentgym.trainers.loop (trainers)",
    ]


def test_taskspec_is_the_bottom_layer_and_the_policy_contract_imports_it():
    assert LAYERS.index(layer_of("agentgym.tasks.spec")) < LAYERS.index(layer_of("agentgym.policies.base"))
    assert "agentgym.tasks.spec" in import_graph(ROOT)["agentgym.policies.base"]  # a real import, not a type hint


@pytest.mark.parametrize("module,layer", [("agentgym.errors", "errors"), ("agentgym.tasks.spec", "task spec"), ("agentgym.policies.base", "policy contract"),
                                          ("agentgym.tasks_cli", "apps"), ("agentgym.rollout", "core"),
                                          ("agentgym.evaluation.cli", "apps"), ("agentgym.viewer.data", "apps")])
def test_layer_names(module, layer):
    assert layer_of(module) == layer


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the project modules it imports (a `from pkg import name` of a non-module names pkg)."""
    found = list(modules(root))
    known = {name for _, name in found}
    graph: dict[str, set[str]] = {name: set() for name in known}
    for path, module in found:
        for _, target in imported(path, module, known):
            while target and target not in known:  # `import a.b.c` of a package path: its longest module
                target = target.rpartition(".")[0]
            if target and target != module:
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles():
    graph = import_graph(ROOT)
    found = cycles(graph)
    detail = ["  " + " <-> ".join(c) + ": " + "; ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c)
              for c in found]
    assert not found, "modules that import each other (break the cycle: move the shared piece down):\n" + \
        "\n".join(detail)


def test_the_cycle_check_catches_a_planted_cycle(tmp_path):
    for folder in FOLDERS:
        (tmp_path / folder).mkdir()
    (tmp_path / "trainers" / "a.py").write_text("def f():\n    from agentgym.trainers.b import g\n")
    (tmp_path / "trainers" / "b.py").write_text("from agentgym.trainers import c\n")
    (tmp_path / "trainers" / "c.py").write_text("import agentgym.trainers.a\n")
    (tmp_path / "trainers" / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                "    from agentgym.trainers.a import f\n")
    (tmp_path / "trainers" / "e.py").write_text("from agentgym.trainers import d\n")
    assert cycles(import_graph(tmp_path)) == [["agentgym.trainers.a", "agentgym.trainers.b", "agentgym.trainers.c"]]
