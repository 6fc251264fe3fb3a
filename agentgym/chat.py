"""ChatEnv: what an LLM sees and does in a TextEnv.

Observations become chat message lists; actions are the model's raw text, from which an
ActionParser extracts the env action. Two prompt layouts:

* history=k (int): every step is its own prompt, one user message holding the instruction, the
  last k (action, observation) pairs and the current observation (verl-agent / GiGPO style);
* history="full": one growing conversation in which the model's replies are assistant messages
  (LOOP style, one sequence per episode).

Agent-side memory (`memory=n`, windowed layouts only): a compact record of the agent's own last
n actions. It costs a few tokens per step where a history window repeats whole observations, and
it is what lets a policy that sees one observation at a time search systematically (skip what it
already tried) instead of at random. Two styles:

* memory_style="list": a line "Your actions so far: a1; a2 (nothing happened); ..." with each
  action's short outcome, bounded to `memory_max_words` words (oldest dropped first);
* memory_style="marks": the admissible actions the agent already took carry " (tried)" in the
  admissible list, and no new names enter the prompt. A small model copies names from wherever
  they stand in its prompt: with the list style it re-issues remembered actions (a 2-layer model
  said `go to cabinet 1` while standing at cabinet 1), with marks every name it can copy is one
  it may use. Envs without an admissible list fall back to the list style.

`memory_seen=True` (windowed layouts, with or without `memory`) adds where the agent saw the
things its task names: a line "Seen: apple 2 (go to countertop 1); desklamp 1 (open drawer 2)."
A thing is a name followed by a number (the "apple 2" convention of ALFWorld, household and
TextWorld's games) whose word is a word of the instruction; each is kept with the latest action
whose observation showed it, unless that action names it itself (taking or moving it is not a
sighting). Marks remember where the agent went; this remembers what it found there, so a policy
that sees one observation at a time can go back for a second object or a lamp it passed.
Envs whose texts name no such things get no line.

`memory_unvisited=True` (windowed layouts) adds the places the agent has not gone to yet: a line
"Not visited yet: cabinet 2, countertop 1, ..." of the admissible "go to X" actions not taken in
this episode, in the list's order (the first `UNVISITED_MAX_ENTRIES`). The marks carry the same
fact, but reading it takes a pass over a list of up to ~60 entries; a 2-layer model cloned from a
demonstrator that searches in list order learned the first moves and then looped among marked
places (docs/alfworld.md). Envs without "go to" actions get no line.
"""

from __future__ import annotations

import dataclasses
import re

import gymnasium as gym

from agentgym.core import TextEnv
from agentgym.parsing import ActionParser, get_parser
from agentgym.policies.base import Messages  # the prompt type of the Policy contract
from agentgym.snapshot import SnapshotError, restore as restore_env, snapshot as snapshot_env

TRIED_MARK = "(tried)"  # memory_style="marks": the suffix of admissible actions already taken
MEMORY_ENTRY_WORDS = 24  # one remembered action is cut here, so a long reply cannot fill the memory
SEEN_MAX_ENTRIES = 12  # memory_seen: the newest sightings shown (a room lists dozens of names)
UNVISITED_MAX_ENTRIES = 10  # memory_unvisited: the next places in list order (a search needs only the first)
_GO_TO = "go to "
_NAMED_THING = re.compile(r"\b([a-z][a-z-]*) (\d+)\b")


@dataclasses.dataclass
class ChatConfig:
    """ChatEnv's options as one typed record: the trainer config's `env.chat` section, and what
    `agentgym.collect(chat=...)` / `evaluate(chat=...)` accept besides a plain dict of the same keys.
    Invalid values raise ValueError (one line) when the record is made, so a config is checked
    when it loads, before any env or model exists. The fields are ChatEnv's keyword arguments
    with the same defaults (a test keeps the two in step)."""

    parser: str | None = None  # action format; None: the env family's own (TextEnv.action_parser)
    history: int | str = 2  # k past (action, observation) pairs per prompt, or "full": one conversation
    show_admissible: bool = True
    max_admissible: int = 64
    invalid_penalty: float = 0.0  # subtracted from an invalid step's reward (trainers use estimator.invalid_penalty)
    system_prompt: str | None = None  # None: the env's rules and the parser's format instructions
    memory: int = 0  # agent-side memory of the last n actions (windowed layouts only)
    memory_outcomes: bool = True
    memory_max_words: int = 120
    memory_style: str = "list"  # "list" | "marks"
    memory_seen: bool = False  # a "Seen: thing (action); ..." line: where the task's things were seen
    memory_unvisited: bool = False  # a "Not visited yet: place, ..." line: "go to" targets not yet taken

    def __post_init__(self) -> None:
        history, memory, words = self.history, self.memory, self.memory_max_words
        if not (history == "full" or (isinstance(history, int) and not isinstance(history, bool) and history >= 0)):
            raise ValueError(f"history must be a non-negative int or 'full', got {history!r}")
        if isinstance(memory, bool) or not isinstance(memory, int) or memory < 0:
            raise ValueError(f"memory is the number of past actions to remember (0 = off), got {memory!r}")
        if memory and history == "full":
            raise ValueError("memory is for windowed prompts: with history='full' the conversation already holds "
                             "every action; set memory=0 or history to a number")
        if isinstance(words, bool) or not isinstance(words, int) or words < 1:
            raise ValueError(f"memory_max_words must be a positive int, got {words!r}")
        if self.memory_style not in ("list", "marks"):
            raise ValueError(f"memory_style must be 'list' or 'marks', got {self.memory_style!r}")
        if not isinstance(self.memory_seen, bool):
            raise ValueError(f"memory_seen must be true or false, got {self.memory_seen!r}")
        if self.memory_seen and history == "full":
            raise ValueError("memory_seen is for windowed prompts: with history='full' the conversation already "
                             "holds every observation; set memory_seen=false or history to a number")
        if not isinstance(self.memory_unvisited, bool):
            raise ValueError(f"memory_unvisited must be true or false, got {self.memory_unvisited!r}")
        if self.memory_unvisited and history == "full":
            raise ValueError("memory_unvisited is for windowed prompts: with history='full' the conversation already "
                             "holds every action; set memory_unvisited=false or history to a number")
        if isinstance(self.max_admissible, bool) or not isinstance(self.max_admissible, int) or self.max_admissible < 0:
            raise ValueError(f"max_admissible must be a non-negative int, got {self.max_admissible!r}")
        if not isinstance(self.invalid_penalty, (int, float)) or isinstance(self.invalid_penalty, bool) or \
                self.invalid_penalty != self.invalid_penalty or abs(self.invalid_penalty) == float("inf"):
            raise ValueError(f"invalid_penalty must be a finite number, got {self.invalid_penalty!r}")

    @classmethod
    def of(cls, chat: "ChatConfig | dict | None") -> "ChatConfig":
        """A ChatConfig from what callers pass as `chat=`: a ChatConfig, a dict of its keys, or None."""
        if chat is None or isinstance(chat, ChatConfig):
            return chat or cls()
        unknown = sorted(set(chat) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"unknown chat option {unknown[0]!r}; ChatEnv takes: "
                             f"{', '.join(f.name for f in dataclasses.fields(cls))}")
        return cls(**chat)

    def kwargs(self) -> dict:
        """ChatEnv's keyword arguments (values as given: a parser object is not copied)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class ChatEnv(gym.Wrapper):
    def __init__(
        self,
        env: gym.Env,
        parser: str | ActionParser | None = None,
        history: int | str = 2,
        show_admissible: bool = True,
        max_admissible: int = 64,
        invalid_penalty: float = 0.0,
        system_prompt: str | None = None,
        memory: int = 0,
        memory_outcomes: bool = True,
        memory_max_words: int = 120,
        memory_style: str = "list",
        memory_seen: bool = False,
        memory_unvisited: bool = False,
    ):
        super().__init__(env)
        # the checks live in ChatConfig (a parser object is not a config value: checked by get_parser)
        ChatConfig(history=history, memory=memory, memory_max_words=memory_max_words, memory_style=memory_style,
                   max_admissible=max_admissible, invalid_penalty=invalid_penalty, memory_seen=memory_seen,
                   memory_unvisited=memory_unvisited)
        self.memory = memory
        self.memory_seen = memory_seen
        self.memory_unvisited = memory_unvisited
        self.memory_style = memory_style
        self.memory_outcomes = bool(memory_outcomes)
        self.memory_max_words = memory_max_words
        # Each env family names the action format its rules describe (TextEnv.action_parser); a
        # plain gym.Env gets the default tag format.
        default = env.unwrapped.action_parser if isinstance(env.unwrapped, TextEnv) else "tag"
        self.parser = get_parser(parser if parser is not None else default)
        self.history = history
        self.show_admissible = show_admissible
        self.max_admissible = max_admissible
        self.invalid_penalty = float(invalid_penalty)
        rules = getattr(env.unwrapped, "rules", "") or ""
        self.system_prompt = system_prompt if system_prompt is not None else (
            f"You are an agent acting in a text environment.\n{rules}\n\n{self.parser.format_instructions}".strip()
        )
        self._turns: list[tuple[str, str]] = []  # (action or raw reply summary, observation)
        self._memory: list[str] = []  # one entry per past step: the action and its short outcome
        self._tried: list[str] = []  # per past step: the valid action, normalized ("" for invalid ones)
        self._seen: dict[str, str] = {}  # memory_seen: thing -> the latest action whose observation showed it
        self._visited: set[str] = set()  # memory_unvisited: the valid actions taken this episode, normalized
        self._messages: Messages = []
        self._instruction = ""

    # --- Gymnasium API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Messages, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._instruction = info["instruction"]
        self._turns = []
        self._memory = []
        self._tried = []
        self._seen = {}
        self._visited = set()
        info = dict(info, env_observation=obs)
        self._messages = [{"role": "system", "content": self.system_prompt}]
        if self.history == "full":
            self._messages.append({"role": "user", "content": self._first_user_message(obs, info)})
        return self._prompt(obs, info), info

    def step(self, text: str | dict) -> tuple[Messages, float, bool, bool, dict]:
        """Play the model's reply: its text, or its assistant message ({"role": "assistant",
        "content": ...}, as chat APIs return it). A reply that is not text is an invalid turn."""
        if isinstance(text, dict) and text.get("role", "assistant") == "assistant" \
                and isinstance(text.get("content"), str):
            text = text["content"]
        parsed = self.parser.parse(text)
        if self.memory_style == "marks" and parsed.action is not None and parsed.action.rstrip().endswith(TRIED_MARK):
            # a reply that copied the mark along with the action means the action
            parsed = dataclasses.replace(parsed, action=parsed.action.rstrip()[: -len(TRIED_MARK)].rstrip())
        if parsed.action is None:
            # Step the env with an empty action so that the turn counts against the time limit;
            # every TextEnv treats it as an invalid action that leaves its state unchanged.
            obs, reward, terminated, truncated, info = self.env.step("")
            shown = f"Your reply could not be used: {parsed.error}. {self.parser.format_instructions}"
            info = dict(info, action_valid=False, parse_error=parsed.error)
        else:
            obs, reward, terminated, truncated, info = self.env.step(parsed.action)
            shown = obs
            info = dict(info)
        if not info["action_valid"]:
            reward -= self.invalid_penalty
        info["env_observation"] = obs
        info["action"] = parsed.action
        self._turns.append((parsed.action if parsed.action is not None else "(unparseable reply)", shown))
        if self.memory:
            self._remember(parsed.action, bool(info["action_valid"]))
        if self.memory_seen and info["action_valid"] and parsed.action is not None:
            update_sightings(self._seen, self._instruction, parsed.action, obs)
        if self.memory_unvisited and info["action_valid"] and parsed.action is not None:
            self._visited.add(_normalized(parsed.action))
        if self.history == "full":
            self._messages.append({"role": "assistant", "content": text if isinstance(text, str) else ""})
            self._messages.append({"role": "user", "content": self._turn_message(shown, info)})
        return self._prompt(shown, info), reward, terminated, truncated, info

    # --- snapshots (tree rollouts branch from them) -----------------------------------------
    def snapshot(self) -> dict:
        """The env's Snapshot (agentgym.snapshot) and this wrapper's conversation so far, as data."""
        return {"env": snapshot_env(self.env).to_dict(),
                "chat": {"instruction": self._instruction, "turns": [list(t) for t in self._turns],
                         "memory": list(self._memory), "tried": list(self._tried), "seen": dict(self._seen),
                         "visited": sorted(self._visited), "messages": [dict(m) for m in self._messages]}}

    def restore(self, state: dict) -> None:
        """Put the env and the conversation back where `snapshot()` was taken (the env was reset with
        the same task); a bad snapshot is refused in one line, nothing changed."""
        chat = state.get("chat") if isinstance(state, dict) else None
        keys = ("instruction", "turns", "memory", "tried", "seen", "visited", "messages")
        if not isinstance(chat, dict) or set(chat) != set(keys) or "env" not in state:
            raise SnapshotError(f"a ChatEnv snapshot is {{'env': ..., 'chat': {{{', '.join(keys)}}}}}: this one is not")
        restore_env(self.env, state["env"])
        self._instruction = chat["instruction"]
        self._turns = [tuple(t) for t in chat["turns"]]
        self._memory, self._tried = list(chat["memory"]), list(chat["tried"])
        self._seen, self._visited = dict(chat["seen"]), set(chat["visited"])
        self._messages = [dict(m) for m in chat["messages"]]

    # --- memory ------------------------------------------------------------------------------
    def _remember(self, action: str | None, valid: bool) -> None:
        # Actions are single-line commands for every family but open-ended ones (JSON tool
        # calls, free text): fold whitespace and cut each entry so one reply cannot fill the budget.
        words = (action if action is not None else "(unparseable reply)").split()
        cap = min(MEMORY_ENTRY_WORDS, self.memory_max_words)
        entry = " ".join(words[:cap]) + (" ..." if len(words) > cap else "")
        if self.memory_outcomes and not valid:
            entry += " (nothing happened)"
        self._memory.append(entry)
        self._tried.append(_normalized(action) if valid and action is not None else "")

    @property
    def memory_entries(self) -> list[str]:
        """What the prompt's memory line shows now: the last `memory` entries within the word budget."""
        kept: list[str] = []
        words = 0
        for entry in reversed(self._memory[-self.memory :] if self.memory else []):
            n = len(entry.split())
            if words + n > self.memory_max_words:
                break
            kept.append(entry)
            words += n
        return kept[::-1]

    @property
    def sightings(self) -> dict[str, str]:
        """memory_seen: each thing of the task seen so far -> the action after which it was last seen."""
        return dict(self._seen)

    # --- prompt building --------------------------------------------------------------------
    def _prompt(self, obs: str, info: dict) -> Messages:
        if self.history == "full":
            return list(self._messages)
        return [self._messages[0], {"role": "user", "content": self._windowed_message(obs, info)}]

    def _admissible(self, info: dict) -> str:
        actions = info.get("admissible_actions")
        if not self.show_admissible or not actions:
            return ""
        shown = actions[: self.max_admissible]
        if self.memory and self.memory_style == "marks":
            tried = set(self._tried[-self.memory :])
            shown = [f"{a} {TRIED_MARK}" if _normalized(a) in tried else a for a in shown]
        more = f" (and {len(actions) - len(shown)} more)" if len(actions) > len(shown) else ""
        return "\nAdmissible actions: " + ", ".join(shown) + more

    def _first_user_message(self, obs: str, info: dict) -> str:
        return f"Your task: {self._instruction}\n\n{obs}{self._admissible(info)}"

    def _turn_message(self, obs: str, info: dict) -> str:
        return f"{obs}{self._admissible(info)}"

    def _windowed_message(self, obs: str, info: dict) -> str:
        parts = [f"Your task: {self._instruction}"]
        done = len(self._turns)
        if self.memory and (self.memory_style == "list" or info.get("admissible_actions") is None):
            entries = self.memory_entries
            parts.append("Your actions so far: " + ("; ".join(entries) if entries else "none") + ".")
        if self.memory_seen and self._seen:
            newest = list(self._seen.items())[-SEEN_MAX_ENTRIES:]
            parts.append("Seen: " + "; ".join(f"{thing} ({action})" for thing, action in newest) + ".")
        if self.memory_unvisited and (places := self._unvisited(info)):
            parts.append("Not visited yet: " + ", ".join(places) + ".")
        window = self._turns[-self.history :] if self.history else []
        if window:
            first = done - len(window) + 1
            parts.append(f"You have taken {done} step(s). Your last {len(window)} action(s) and what followed:")
            for i, (action, seen) in enumerate(window, first):
                parts.append(f"[Step {i}] Action: {action}\nObservation: {seen}")
        parts.append(f"Current observation (step {done + 1}):\n{obs}{self._admissible(info)}")
        parts.append(self.parser.format_instructions)
        return "\n\n".join(parts)

    def _unvisited(self, info: dict) -> list[str]:
        """memory_unvisited: the targets of the admissible "go to" actions not taken this episode, in
        list order, the first UNVISITED_MAX_ENTRIES (with how many more)."""
        places = [a[len(_GO_TO):] for a in info.get("admissible_actions") or ()
                  if a.startswith(_GO_TO) and _normalized(a) not in self._visited]
        more = len(places) - UNVISITED_MAX_ENTRIES
        return places[:UNVISITED_MAX_ENTRIES] + ([f"(and {more} more)"] if more > 0 else [])

    @property
    def instruction(self) -> str:
        return self._instruction

    def format_action(self, action: str) -> str:
        return self.parser.format(action)


def _normalized(action: str) -> str:
    return " ".join(action.lower().split())


def update_sightings(seen: dict[str, str], instruction: str, action: str, observation: str) -> None:
    """memory_seen's rule, in place: every "word N" thing in `observation` whose word is a word of
    `instruction` and that `action` does not name is now last seen after `action` (moved to the
    end, so the newest sightings come last)."""
    words = set(re.findall(r"[a-z]+", instruction.lower()))
    act = _normalized(action)
    for word, number in _NAMED_THING.findall(observation.lower()):
        thing = f"{word} {number}"
        if word in words and not re.search(rf"\b{re.escape(thing)}\b", act):
            seen.pop(thing, None)
            seen[thing] = act
