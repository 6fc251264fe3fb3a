"""ALFWorld's text engine, as alfworld runs it: TextWorld's PDDL backend (PddlEnv, Fast
Downward underneath) wrapped in alfworld's AlfredDemangler (ALFRED ids -> "apple 1") and
AlfredInfos. `Engine(game, fast=False)` is exactly that stock stack.

`fast=True` (the default) keeps every text identical and removes repeated work:

- TextWorld parses the same grammar templates with TatSu again on every derivation: each step
  derives the command template of every applicable action (dozens per step) and the feedback
  text, and evaluates each rule's condition after parsing it anew. Parses are pure functions
  of the template string, so they are cached (a fresh copy of the parsed symbols per use,
  since derivation writes a context into them).
- Every symbol derived gets a deep copy of the context's variables (TextWorld's copy_context);
  derivation only reads them, so fresh dicts over the same values do.
- Rule matching sorts the facts of a predicate on every query; they are kept sorted until they
  change.
- Each step lists all PDDL facts once per applicable action (dozens of times); once is enough.
- TextWorld interns every Proposition ever made in a global dict: each new game's facts stayed
  in memory for good (~1.1 MB a game). Loading a game drops them (equality is by value).
- A reset rebuilds the PDDL state, translating domain + problem to SAS twice with Fast
  Downward's Python translator (0.5-1.5 s). The translation depends on the problem text only: it
  is kept in memory and on disk (`$AGENTGYM_CACHE/alfworld/sas/`, ~30 kB a game), and the
  planner's second translation is made only when a plan is asked for. The grammar file is
  parsed once, not once per game (games differ only in the task sentence).

tests/alfworld/test_alfworld_env.py replays games in both modes and compares every observation,
admissible-command list and fact set.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import re
import threading
from typing import Any

from agentgym.errors import require

# The predicates an action can change. The anchor hashes these (plus the game, once): the others
# are constant within a game, and `checked` / `examined` only record what the agent has looked at
# (no precondition or goal reads them), so states that differ only there are one state.
_DYNAMIC = frozenset(("atlocation", "inreceptacle", "objectatlocation", "opened", "holds", "holdsany",
                      "holdsanyreceptacleobject", "isclean", "ishot", "iscool", "ison", "istoggled", "issliced",
                      "inreceptacleobject", "isreceptacleobjectfull", "wasinreceptacle", "full"))


@functools.lru_cache(maxsize=4096)
def _parsed_symbols(text: str):
    from textworld.envs.pddl import textgen

    return textgen._parse_and_convert(text, rule_name="symbols")


@functools.lru_cache(maxsize=4096)
def _parsed_query(expression: str):
    from textworld.logic import Rule

    return Rule.parse_conjunctive_query(expression)


# A translated task is several MB of Python objects; the disk cache reloads one in ~2 ms, so a
# few in memory (a GRPO group's game, the planner's) are enough.
@functools.lru_cache(maxsize=8)
def _translated(domain: str, problem: str, optimize: bool = False):
    if optimize:  # only the planner reads this one
        return _pddl2sas(domain, problem, optimize=True)
    return _disk_cached_translation(domain, problem)


class UnreachableGoal(ValueError):
    """A game whose goal no sequence of actions reaches."""


def cache_dir():
    """Where generated games and their translations are kept (AGENTGYM_CACHE or ~/.cache/agentgym)."""
    from pathlib import Path

    root = os.environ.get("AGENTGYM_CACHE") or Path.home() / ".cache" / "agentgym"
    return Path(root) / "alfworld"


def sas_path(domain: str, problem: str):
    """Where the translation of a problem is kept on disk (SAS text, zlib: never a pickle)."""
    from importlib.metadata import version

    key = hashlib.sha256(f"{version('fast-downward-textworld')}\n{domain}\n{problem}".encode()).hexdigest()[:24]
    return cache_dir() / "sas" / f"{key}.sas.z"


def forget_translations() -> None:
    """Empty the in-memory caches of translations and grammars (benchmarks measure cold loads)."""
    _translated.cache_clear()
    _game_logic.cache_clear()


# A translation is ~2 MB of SAS text (~30 kB compressed); more than this is not ours.
MAX_SAS_BYTES = 256 << 20


def _argv_kept(fn):
    """Fast Downward's translator sets `sys.argv` for its options module (pddl2sas's "HACK"):
    the host program's argv is put back afterwards."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        import sys

        argv = sys.argv
        try:
            return fn(*args, **kwargs)
        finally:
            sys.argv = argv
    return run


@_argv_kept
def _pddl2sas(domain: str, problem: str, optimize: bool = False):
    import fast_downward

    return fast_downward.pddl2sas(domain, problem, verbose=False, optimize=optimize)


@_argv_kept
def _parsed_task(domain: str, problem: str):
    """The normalized PDDL task, as pddl2sas returns it next to the SAS text (~10 ms: the
    translation to SAS is the 0.5-2 s part, and the part the disk cache keeps)."""
    import sys

    sys.argv = ["translate.py", "domain", "task"]  # what the translator's options module parses
    from fast_downward.translate import normalize
    from fast_downward.translate.pddl_parser import lisp_parser, parsing_functions

    task = parsing_functions.parse_task(lisp_parser.parse_nested_list(domain.split("\n")),
                                        lisp_parser.parse_nested_list(problem.split("\n")))
    normalize.normalize(task)
    return task


def _disk_cached_translation(domain: str, problem: str):
    """Fast Downward's translation of a problem, kept on disk next to the game cache: 0.5-2 s
    to compute, ~30 kB compressed and a few ms to load, so the first reset of a game in a new
    process is cheap too. Only the SAS text is kept (zlib), never Python objects: a pickle
    planted in the cache would run code at reset. The PDDL task is parsed again (~10 ms)."""
    import zlib

    from agentgym.safe_files import UnsafeFileError, read_regular

    path = sas_path(domain, problem)
    key = path.name.split(".")[0]
    try:
        inflate = zlib.decompressobj()
        sas = inflate.decompress(read_regular(path, MAX_SAS_BYTES, "ALFWorld translation"), MAX_SAS_BYTES)
        if inflate.unconsumed_tail or not inflate.eof:
            raise ValueError("over the size limit or truncated")
        return _parsed_task(domain, problem), sas.decode("utf-8")
    except (UnsafeFileError, OSError, ValueError, zlib.error):  # missing or unreadable: translate again
        pass
    result = _pddl2sas(domain, problem)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{key}.{os.getpid()}.tmp")
        tmp.write_bytes(zlib.compress(result[1].encode("utf-8"), 6))
        os.replace(tmp, path)
    except OSError:  # a read-only cache only costs speed
        pass
    return result


@functools.lru_cache(maxsize=4)
def _game_logic(domain: str, grammar: str):
    from textworld.envs.pddl import logic

    return logic.GameLogic(domain=domain, grammar=grammar)


# ALFWorld games share one grammar file and differ only in the task sentence put in place of
# "UNKNOWN GOAL" (alfworld's add_task_to_grammar). The grammar is parsed once with the
# placeholder and only the one-line "task" rule per game (0.25 s -> ~1 ms); sentences holding a
# character the grammar treats specially are parsed the stock way.
_TASK_RULE = re.compile(r'("rhs": "Your task is to: )([^"\\#{}\[\]|]*)(\.")')


def _game_rules(domain: str, grammar: str):
    """(GameLogic, grammar rules) of a game file's domain and grammar text."""
    from textworld.envs.pddl import textgen

    match = _TASK_RULE.search(grammar)
    if match is None or _TASK_RULE.search(grammar, match.end()) is not None:
        base = _game_logic(domain, grammar)
        return base, base.grammar._rules
    base = _game_logic(domain, grammar[:match.start(2)] + "UNKNOWN GOAL" + grammar[match.end(2):])
    task = textgen.ContextSensitiveGrammar.parse(
        json.dumps({"task": [{"rhs": f"Your task is to: {match.group(2)}."}]}))
    rules = dict(base.grammar._rules)
    rules["task"] = task._rules["task"]
    return base, rules


class UnsafeGame(ValueError):
    """A game file whose grammar is not plain text generation (a rule that recurses or expands
    without bound, an expression that is more than reading a name)."""


# The largest text a grammar symbol may expand to, in symbols (ALFWorld's own: under 100).
MAX_EXPANSION = 10_000
_EXPRESSION_NODES = ("Expression", "Name", "Load", "Attribute", "Constant", "BinOp", "Add", "BoolOp", "Or", "And")


@functools.lru_cache(maxsize=1024)
def check_expression(expression: str) -> None:
    """TextWorld evaluates a grammar's `{...}` with Python's eval. A game file may only read its
    variables there: names, their public attributes, string constants, `+`, `or`, `and`
    (ALFWorld's grammar uses `o.name`, `o.indefinite + ' ' + o.name`, `r.name or r.id`)."""
    import ast

    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise UnsafeGame(f"the grammar expression {expression[:60]!r} is not an expression") from None
    for node in ast.walk(tree):
        name = type(node).__name__
        if name not in _EXPRESSION_NODES or (name == "Attribute" and node.attr.startswith("_")) \
                or (name == "Name" and node.id.startswith("_")) \
                or (name == "Constant" and not isinstance(node.value, str)):
            raise UnsafeGame(f"the grammar expression {expression[:60]!r} does more than read names "
                             f"({name}): a game file's grammar may not run code")


def _safe_eval_derive(self, context=None):
    """textgen.EvalSymbol.derive, evaluating only what check_expression allows, without builtins."""
    from textworld.envs.pddl import textgen

    context = context or self.context
    check_expression(self.expression)
    value = eval(self.expression.strip(), {"__builtins__": {}}, dict(context["variables"]))  # noqa: S307 - checked
    return [textgen.TerminalSymbol(value)]


# The restricted evaluation applies only while one of our engines works (load, reset, step, plan) in
# this thread: TextWorld's EvalSymbol is one class for every user of the library, and a process that
# played an ALFWorld game also runs its own TextWorld grammars, whose expressions (len(x), x.upper())
# keep TextWorld's own evaluation.
_OURS = threading.local()
_STOCK_DERIVE: list = []  # TextWorld's own EvalSymbol.derive, once replaced


def _scoped_derive(self, context=None):
    if getattr(_OURS, "depth", 0):
        return _safe_eval_derive(self, context)
    return _STOCK_DERIVE[0](self, context)


def _install_safe_eval() -> None:
    from textworld.envs.pddl import textgen

    if textgen.EvalSymbol.derive is not _scoped_derive:
        _STOCK_DERIVE[:] = [textgen.EvalSymbol.derive]
        textgen.EvalSymbol.derive = _scoped_derive


def _our_derivations(method):
    """An Engine method during which TextWorld's grammar expressions are evaluated the restricted way."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        _OURS.depth = getattr(_OURS, "depth", 0) + 1
        try:
            return method(self, *args, **kwargs)
        finally:
            _OURS.depth -= 1

    return run


def check_grammar(rules: dict, templates=()) -> None:
    """UnsafeGame unless every rule expands to a bounded text: no rule reaches itself again, no
    symbol expands to more than MAX_EXPANSION symbols, and every expression only reads names.
    `templates` are the texts derived with the grammar besides its rules (the actions' command
    templates). Run on every game loaded, in both engines, before a derivation can hang or run code."""
    from textworld.envs.pddl import textgen

    size: dict[str, int] = {}
    active: set[str] = set()

    def symbols_size(symbols) -> int:
        return sum(symbol_size(s) for s in (symbols if isinstance(symbols, list) else [symbols]))

    def symbol_size(s) -> int:
        if isinstance(s, textgen.NonterminalSymbol):
            return rule_size(str(s.symbol))
        if isinstance(s, textgen.ConditionalSymbol):
            if isinstance(s.given, str) and s.given:
                _parsed_query(s.given)
            return 1 + symbols_size(s.expression)
        if isinstance(s, textgen.ListSymbol):
            return 1 + symbols_size(s.symbol)
        if isinstance(s, textgen.EvalSymbol):
            check_expression(s.expression)
        return 1

    def rule_size(name: str) -> int:
        if name in size:
            return size[name]
        if name not in rules:
            return 1  # derivation names the unknown symbol itself
        if name in active:
            raise UnsafeGame(f"the grammar rule {name[:60]!r} expands into itself: a derivation would never end")
        active.add(name)
        got = max((1 + symbols_size(rule.rhs) for rule in rules[name]), default=1)
        active.discard(name)
        if got > MAX_EXPANSION:
            raise UnsafeGame(f"the grammar rule {name[:60]!r} expands to {got:,} symbols "
                             f"(more than {MAX_EXPANSION:,})")
        size[name] = got
        return got

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * len(rules) + 1000))  # a chain of rules as long as the file
    try:
        for name in list(rules):
            rule_size(str(name))
        for template in templates:
            try:
                parsed = _parsed_symbols(template)
            except Exception:  # noqa: BLE001 - a template TatSu cannot parse fails the stock way, at derive
                continue
            if symbols_size(list(parsed)) > MAX_EXPANSION:
                raise UnsafeGame(f"the command template {template[:60]!r} expands to more than {MAX_EXPANSION:,} symbols")
    finally:
        sys.setrecursionlimit(limit)


def _forget_propositions() -> None:
    """Drop the Propositions TextWorld has interned. textworld.logic.Proposition memoizes every
    instance ever made in a global, unbounded dict (the `mementos` package), so each new game's
    ~1,250 facts stayed in memory for good: ~1.1 MB per game, 390 MB after 240 games. Equality
    and hashing are by value, so states that hold their Propositions are unaffected and new ones
    compare equal; only the memo is lost."""
    from mementos import core
    from textworld.logic import Proposition

    cache = core._memento_cache
    for key in [k for k in cache if type(k) is tuple and k and k[0] is Proposition]:
        del cache[key]


_PDDL_WORDS = frozenset(("and", "not", "forall", "when", "exists", "or", "increase", "decrease", "assign",
                         "total-cost", "imply"))


@functools.lru_cache(maxsize=64)
def _changeable_predicates(domain: str) -> frozenset:
    """Every predicate named in an action's `:effect` of a PDDL domain (lower case), comments
    stripped: a superset of the facts an action can change, which is all the cache of command
    texts needs (a predicate wrongly counted only makes fewer texts cached)."""
    text = re.sub(r";[^\n]*", "", domain).lower()
    names: set[str] = set()
    for block in re.split(r"\(:action\b", text)[1:]:
        effect = block.split(":effect", 1)[1] if ":effect" in block else ""
        names |= set(re.findall(r"\(\s*([a-z_][\w-]*)", effect))
    return frozenset(names - _PDDL_WORDS)


def _copy_context(context):
    """textgen.copy_context without deep copies: it deep-copies `variables` (EntityInfo objects)
    and `mapping` for every symbol derived, yet derivation only adds keys to those dicts and
    reads the values (names, articles), so fresh dicts over the same values give the same text."""
    return {"state": context["state"], "facts": context["facts"], "variables": dict(context["variables"]),
            "mapping": dict(context["mapping"]), "entity_infos": context["entity_infos"]}


def _classes():
    """The fast subclasses, built on first use (textworld is an optional dependency)."""
    if "_CLASSES" in globals():
        return globals()["_CLASSES"]
    import fast_downward
    import textworld.logic
    from textworld.envs.pddl import logic, pddl, textgen

    class FastConditional(textgen.ConditionalSymbol):
        def derive(self):
            if len(self.context) == 0:
                raise ValueError("Empty context")
            context = _copy_context(self.context)
            contexts = [context]
            if self.given:
                contexts = _query(self.given, context)
            return [_fresh(self.expression, c) for c in contexts]

    def _query(expression, context):
        rule = _parsed_query(expression)
        contexts = []
        for mapping in context["state"].all_assignments(rule, context["mapping"]):
            context_ = _copy_context(context)
            context_["variables"].update({ph.name: context_["entity_infos"][var.name] for ph, var in mapping.items()})
            context_["mapping"].update(mapping)
            contexts.append(context_)
        return contexts

    def _fresh(symbol, context):
        # Symbol.copy deep-copies the symbol *and* its old context, then replaces the context;
        # copying without the context first gives the same symbol for less work.
        old, symbol.context = symbol.context, {}
        try:
            out = copy.deepcopy(symbol)
        finally:
            symbol.context = old
        _upgrade(out)
        out.context = _copy_context(context)
        return out

    def _upgrade(symbols):
        for s in symbols if isinstance(symbols, list) else (symbols,):
            if type(s) is textgen.ConditionalSymbol:
                s.__class__ = FastConditional
            if isinstance(s, textgen.ListSymbol):
                _upgrade(s.symbol)
            if isinstance(s, textgen.ConditionalSymbol):
                _upgrade(s.expression)

    class FastGrammar(textgen.ContextSensitiveGrammar):
        def replace(self, start):
            rules = self._rules.get(str(start))
            if not rules:
                raise textgen.CSGUnknownSymbolError(start)
            for rule in rules:
                if not rule.condition or any(
                        True for _ in start.context["state"].all_assignments(_parsed_query(rule.condition),
                                                                           start.context["mapping"])):
                    break
            else:
                raise IndexError("list index out of range")  # what the stock rules[0] raises
            symbols = copy.deepcopy(rule.rhs)
            _upgrade(symbols)
            for symbol in symbols:
                symbol.context = _copy_context(start.context)
            return symbols

        # A command's text (`go to [{r.name | receptacleatlocation(r, lend)}]` -> "go to cabinet 3") is
        # derived for every admissible action at every step, about 30 times a step, each a deep copy
        # of parsed symbols. Where no symbol of the derivation reads a fact that an action can change
        # (`changeable`: the predicates in the domain's effects), the text depends on the action's
        # mapping alone: derived once per game and mapping. Without `changeable` nothing is cached
        # but what reads no fact at all.
        changeable: frozenset | None = None

        def derive(self, start: str, context={}) -> str:
            key = None
            if context and self._reads_no_changeable_fact(start):
                key = (start, tuple(sorted((ph.name, var.name) for ph, var in context["mapping"].items())))
                derived = self.__dict__.setdefault("_derived", {})
                if key in derived:
                    return derived[key]
            text = self._derive(start, context)
            if key is not None:
                self._derived[key] = text
            return text

        def _reads_no_changeable_fact(self, start: str) -> bool:
            memo = self.__dict__.setdefault("_static_starts", {})
            if start not in memo:
                memo[start] = self._static(_parsed_symbols(start), frozenset())
            return memo[start]

        def _static(self, symbols, expanding: frozenset) -> bool:
            def reads_changeable(query: str) -> bool:
                names = {p.name.lower() for p in _parsed_query(query).preconditions}
                return self.changeable is None or bool(names & self.changeable)

            for s in symbols if isinstance(symbols, list) else [symbols]:
                if isinstance(s, (textgen.TerminalSymbol, textgen.EvalSymbol)):
                    continue  # text, or an expression over the mapping's entities (check_expression)
                if isinstance(s, textgen.ListSymbol):
                    if not self._static(s.symbol, expanding):
                        return False
                elif isinstance(s, textgen.ConditionalSymbol):
                    if (s.given and reads_changeable(s.given)) or not self._static(s.expression, expanding):
                        return False
                elif isinstance(s, textgen.NonterminalSymbol):
                    name = str(s)
                    if name in expanding:
                        return False
                    for rule in self._rules.get(name, []):
                        if (rule.condition and reads_changeable(rule.condition)) or \
                                not self._static(rule.rhs, expanding | {name}):
                            return False
                else:
                    return False
            return True

        def _derive(self, start: str, context) -> str:
            derivation = copy.deepcopy(_parsed_symbols(start))[::-1]
            _upgrade(derivation)
            for symbol in derivation:
                symbol.context = _copy_context(context)
            derived = []
            while derivation:
                symbol = derivation.pop()
                if isinstance(symbol, textgen.TerminalSymbol):
                    derived.append(symbol)
                elif isinstance(symbol, textgen.NonterminalSymbol):
                    derivation += self.replace(symbol)[::-1]
                elif isinstance(symbol, (textgen.ConditionalSymbol, textgen.EvalSymbol, textgen.ListSymbol)):
                    derivation += symbol.derive()[::-1]
                else:
                    raise NotImplementedError("Unknown symbol: {}".format(type(symbol)))
            return "".join(map(str, derived))

    class FastPddlState(logic.PddlState):
        """PddlState.__init__ with the SAS translation cached (the rest is the same code)."""

        def __init__(self, downward_lib, pddl_problem, game_logic):
            from collections import Counter, defaultdict

            self._facts = defaultdict(set)
            self._vars_by_name = {}
            self._vars_by_type = defaultdict(set)
            self._var_counts = Counter()
            self._logic = game_logic
            self.downward_lib = downward_lib
            self.pddl_problem = pddl_problem
            self.task, self.sas = _translated(game_logic.domain, pddl_problem)
            if "Atom dummy(val1)" in self.sas:
                # The translator proved the goal unreachable and returned its stand-in task (the
                # stock PddlState then fails with KeyError: 'val1').
                raise UnreachableGoal("the goal cannot be reached (Fast Downward's translator proves it)")
            # The planner's translation (optimize=True) is only read by replan(): made on demand.
            self._replan_loaded = False
            self._actions = {a.name: a for a in self.task.actions}
            for type_ in self.task.types:
                try:
                    self._logic.types.add(textworld.logic.Type(type_.name, type_.supertype_names))
                except ValueError:
                    pass
            self.downward_lib.load_sas(self.sas.encode("utf-8"))
            self.name2type = {o.name: o.type_name for o in self.task.objects}
            facts = [_atom2proposition(atom, self.name2type) for atom in self.task.init]
            self.add_facts([f for f in facts if f is not None])
            atoms = (logic.Atom * self.downward_lib.get_state_size())()
            self.downward_lib.get_state(atoms)
            facts = [atom.get_fact(self.name2type) for atom in atoms]
            self.add_facts([f for f in facts if not f.is_negation])

        # Rule matching (textworld.logic State._all_applicable_assignments) sorts the facts of a
        # signature on every query, thousands of times a step; kept sorted per signature here
        # until a fact of that signature changes, the sort is a linear pass over sorted input.
        def facts_with_signature(self, sig):
            cache = self.__dict__.setdefault("_sorted_facts", {})
            got = cache.get(sig)
            if got is None:
                got = cache[sig] = tuple(sorted(self._facts.get(sig, frozenset())))
            return got

        def add_fact(self, prop):
            self.__dict__.get("_sorted_facts", {}).pop(prop.signature, None)
            super().add_fact(prop)

        def remove_fact(self, prop):
            self.__dict__.get("_sorted_facts", {}).pop(prop.signature, None)
            super().remove_fact(prop)

        @property
        def sas_replan(self):
            return _translated(self._logic.domain, self.pddl_problem, optimize=True)[1]

        def replan(self, infos):
            if not self._replan_loaded:
                self.downward_lib.load_sas_replan(self.sas_replan.encode("utf-8"))
                self._replan_loaded = True
            return super().replan(infos)

    def _atom2proposition(atom, name2type):
        from textworld.logic import Proposition, Variable

        if isinstance(atom, fast_downward.translate.pddl.conditions.Atom):
            if atom.predicate == "=":
                return None
            return Proposition(atom.predicate, [Variable(arg, name2type[arg]) for arg in atom.args])
        if isinstance(atom, fast_downward.translate.pddl.f_expression.Assign):
            if atom.fluent.symbol == "total-cost":
                return None
            name = "{}".format(atom.expression.value)
            if str.isdigit(name):
                return None
            return Proposition(name, [Variable(arg, name2type[arg]) for arg in atom.fluent.args])
        return None

    class FastPddlEnv(pddl.PddlEnv):
        def load(self, filename_or_data):
            import json

            try:
                data = json.load(open(filename_or_data))
                self._game_file = filename_or_data
            except TypeError:
                data = filename_or_data
                self._game_file = None
            self._game_data = data
            self.walkthrough = data.get("walkthrough", None)
            _forget_propositions()
            base, rules = _game_rules(data["pddl_domain"], data["grammar"])
            # A private GameLogic sharing the parsed actions, with the fast grammar class.
            self._logic = copy.copy(base)
            self._logic.grammar = FastGrammar()
            self._logic.grammar._rules = rules
            self._logic.grammar.changeable = _changeable_predicates(data["pddl_domain"])
            self._logic.types = textworld.logic.TypeHierarchy()
            self._pddl_state = FastPddlState(self.downward_lib, data["pddl_problem"], self._logic)
            self._entity_infos = self._get_entity_infos()

        def _gather_infos(self):
            # PddlEnv._gather_infos with the fact list built once per step instead of once per
            # applicable action (the state does not change while commands are derived).
            self.state["command_templates"] = sorted(set(a.template for a in self._logic.actions.values()))
            self.state["won"] = self._pddl_state.check_goal()
            self.state["lost"] = False
            self.state["_entity_infos"] = dict(self._entity_infos)
            facts = list(self._pddl_state.facts)
            self.state["_facts"] = list(facts)
            if self.request_infos.facts:
                self.state["facts"] = list(map(self._get_human_readable_fact, self.state["_facts"]))
            self.state["last_action"] = None
            self.state["_last_action"] = self._last_action
            self.state["_valid_actions"] = list(self._pddl_state.all_applicable_actions())
            mapping = {k: info.name for k, info in self._entity_infos.items()}
            self.state["_valid_commands"] = []
            for action in self.state["_valid_actions"]:
                context = {"state": self._pddl_state, "facts": facts,
                           "variables": {ph.name: self._entity_infos[var.name] for ph, var in action.mapping.items()},
                           "mapping": action.mapping, "entity_infos": self._entity_infos}
                action.command_template = self._logic.grammar.derive(action.command_template, context)
                self.state["_valid_commands"].append(action.format_command(mapping))
            self.state["admissible_commands"] = sorted(set(self.state["_valid_commands"]))
            if self.request_infos.moves:
                self.state["moves"] = self._moves
            if self.request_infos.policy_commands:
                self.state["policy_commands"] = self._pddl_state.replan(self._entity_infos)

        def reset(self):
            # PddlEnv.reset with FastPddlState; the same statements otherwise.
            from textworld.core import GameState

            self._pddl_state = FastPddlState(self.downward_lib, self._game_data["pddl_problem"], self._logic)
            self.prev_state = None
            self.state = GameState()
            self._last_action = None
            self._moves = 0
            context = {"state": self._pddl_state, "facts": list(self._pddl_state.facts), "variables": {},
                       "mapping": {}, "entity_infos": self._entity_infos}
            self.state.feedback = self._logic.grammar.derive("#intro#", context)
            self.state.raw = self.state.feedback
            self._gather_infos()
            if "walkthrough" in self.request_infos.extras:
                self.state["extra.walkthrough"] = self.walkthrough or self._pddl_state.replan(self._entity_infos)
            return self.state

    globals()["_CLASSES"] = (FastPddlEnv,)
    return globals()["_CLASSES"]


# Engines whose env has closed, per `fast`, for the next env of this process (Engine.acquire).
_IDLE: dict[bool, list["Engine"]] = {True: [], False: []}
_IDLE_LOCK = threading.Lock()


class Engine:
    """ALFWorld's engine with one game loaded: `game` is a game file path or its loaded JSON.

    An engine holds its own copy of Fast Downward's 34 MB library (fast_downward.load_lib copies
    it to a temporary file and loads it for every PddlEnv, and nothing unloads it: the deleted
    file keeps its disk space and its mapping until the process ends). So `load` each next game
    into an engine rather than making one per game, and take engines with `Engine.acquire` /
    give them back with `release`: an evaluation that opened an env per episode made a copy per
    episode, and 2,000 episodes filled 68 GB of /tmp."""

    @classmethod
    def acquire(cls, fast: bool = True) -> "Engine":
        """An engine released earlier in this process, or a new one: the number of library
        copies stays at the most engines in use at once."""
        with _IDLE_LOCK:
            idle = _IDLE[bool(fast)]
            if idle:
                return idle.pop()
        return cls(fast=fast)

    def release(self) -> None:
        """Give the engine back for the next `acquire` (its game stays loaded until then).
        Engines are never unloaded: Fast Downward's close_lib (dlclose) of one copy made the next
        load_lib crash the process, so a copy is reused, never dropped."""
        with _IDLE_LOCK:
            if not any(e is self for e in _IDLE[self.fast]):
                _IDLE[self.fast].append(self)

    def __init__(self, game: Any = None, fast: bool = True):
        textworld = require("textworld", "alfworld")
        require("fast_downward", "alfworld")
        require("alfworld", "alfworld")
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        from textworld.envs import PddlEnv

        _install_safe_eval()
        infos = textworld.EnvInfos(admissible_commands=True, won=True, extras=["gamefile"])
        base = _classes()[0](infos) if fast else PddlEnv(infos)
        self.fast = bool(fast)
        self._base = base
        self._env = AlfredInfos(AlfredDemangler(base, shuffle=False))
        self.state = None
        self._game_hash = None
        if game is not None:
            self.load(game)

    @_our_derivations
    def load(self, game: Any) -> None:
        """Load a game (its JSON, or a path: read as alfworld reads it). UnsafeGame when its
        grammar could hang a derivation or run code (check_grammar), before any is derived."""
        import sys

        argv = sys.argv
        try:
            self._env.load(str(game) if not isinstance(game, dict) else game)
        finally:
            sys.argv = argv  # the stock engine translates here (pddl2sas sets argv)
        logic = self._base._logic
        check_grammar(logic.grammar._rules, [a.template for a in logic.actions.values()
                                             if isinstance(getattr(a, "template", None), str)])
        self.state = None
        self._game_hash = None

    @property
    def _pddl(self):
        return self._base

    @_our_derivations
    def reset(self):
        import sys

        argv = sys.argv
        try:
            self.state = self._env.reset()
        finally:
            sys.argv = argv  # the stock engine translates again at reset
        return self.state

    @_our_derivations
    def step(self, command: str):
        self.state, _, _ = self._env.step(command)
        return self.state

    def facts(self, dynamic_only: bool = False) -> list[str]:
        """The current PDDL facts as sorted strings (with `dynamic_only`, those an action can change)."""
        return sorted(str(f) for f in self._pddl._pddl_state.facts if not dynamic_only or f.name in _DYNAMIC)

    def anchor(self) -> str:
        """A hash of the game and of its changeable facts: equal exactly when the true states are."""
        if self._game_hash is None:
            self._game_hash = hashlib.sha1(self._pddl._game_data["pddl_problem"].encode()).hexdigest()
        body = self._game_hash + "\n" + "\n".join(self.facts(dynamic_only=True))
        return hashlib.sha1(body.encode()).hexdigest()[:16]

    def names(self) -> dict[str, str]:
        """PDDL name -> display name ("apple_bar_..." -> "apple 1")."""
        return {k: info.name for k, info in self._pddl._entity_infos.items()}

    @_our_derivations
    def plan(self) -> list[str]:
        """The planner's commands from the current state to the goal ([] when none)."""
        pddl = self._pddl
        return list(pddl._pddl_state.replan(pddl._entity_infos))

    def close(self):
        self._env.close()
