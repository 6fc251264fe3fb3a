"""Action parsers: from a model's raw text to the action string an environment executes.

A parser never raises on model output. Text it cannot read gives `ParsedAction(None, error)`,
which the chat wrapper turns into an invalid action with the error as feedback.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from agentgym.errors import ConfigError


@dataclass(frozen=True)
class ParsedAction:
    action: str | None
    error: str | None = None


class ActionParser:
    format_instructions: str = ""

    def parse(self, text: str) -> ParsedAction:
        raise NotImplementedError

    def format(self, action: str) -> str:
        """The text a well-behaved model would write for `action` (oracle demos, SFT targets)."""
        raise NotImplementedError


class TagActionParser(ActionParser):
    """Reads the last `<action>...</action>` block (the default; reasoning may come before it)."""

    def __init__(self, tag: str = "action", max_action_chars: int = 4096):
        self.tag = tag
        self.max_action_chars = max_action_chars
        self._pattern = re.compile(rf"<{tag}>(.*?)</{tag}>", re.S | re.I)
        self.format_instructions = (
            f"Think briefly if you need to, then give exactly one action inside <{tag}></{tag}> tags, "
            f"e.g. <{tag}>look</{tag}>."
        )

    def parse(self, text: str) -> ParsedAction:
        if not isinstance(text, str):
            return ParsedAction(None, "the reply was not text")
        matches = self._pattern.findall(text)
        if not matches:
            return ParsedAction(None, f"no <{self.tag}>...</{self.tag}> block found in the reply")
        action = " ".join(matches[-1].split())
        if not action:
            return ParsedAction(None, f"the <{self.tag}> block is empty")
        if len(action) > self.max_action_chars:
            return ParsedAction(None, f"the action is longer than {self.max_action_chars} characters")
        return ParsedAction(action)

    def format(self, action: str) -> str:
        return f"<{self.tag}>{action}</{self.tag}>"


class RawActionParser(ActionParser):
    """The whole reply is the action (scripted policies, humans at a terminal)."""

    format_instructions = "Reply with the action only."

    def parse(self, text: str) -> ParsedAction:
        if not isinstance(text, str):
            return ParsedAction(None, "the reply was not text")
        return ParsedAction(text.strip())

    def format(self, action: str) -> str:
        return action


class JSONToolCallParser(ActionParser):
    """Reads a JSON function call: `{"name": ..., "arguments": {...}}`, a list of them, or one
    wrapped in `<tool_call>...</tool_call>`. The action handed to the env is canonical JSON."""

    format_instructions = (
        'Call a tool by replying with JSON inside <tool_call></tool_call> tags, e.g. '
        '<tool_call>{"name": "tool_name", "arguments": {"arg": "value"}}</tool_call>.'
    )
    _tagged = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)

    def parse(self, text: str) -> ParsedAction:
        if not isinstance(text, str):
            return ParsedAction(None, "the reply was not text")
        blocks = self._tagged.findall(text)
        candidates = blocks if blocks else [text]
        calls = []
        for block in candidates:
            obj = _first_json_value(block)
            if obj is None:
                return ParsedAction(None, "the tool call is not valid JSON")
            calls.extend(obj if isinstance(obj, list) else [obj])
        # OpenAI's nested form {"type": "function", "function": {"name": ..., "arguments": ...}}
        calls = [c["function"] if isinstance(c, dict) and isinstance(c.get("function"), dict) else c for c in calls]
        for call in calls:
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                return ParsedAction(None, 'each tool call must be an object with a string "name"')
            args = call.get("arguments", {})
            if isinstance(args, str):  # OpenAI sends arguments as a JSON string
                try:
                    call["arguments"] = json.loads(args)
                except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested past the limit
                    return ParsedAction(None, f"arguments of {call['name']} are not valid JSON")
            elif not isinstance(args, dict):
                return ParsedAction(None, f"arguments of {call['name']} must be an object")
            call.setdefault("arguments", {})
        payload = calls[0] if len(calls) == 1 else calls
        return ParsedAction(json.dumps(payload, ensure_ascii=False, sort_keys=True))

    def format(self, action: str) -> str:
        return f"<tool_call>{action}</tool_call>"


def _first_json_value(text: str):
    """The first JSON object or array in `text`, or None."""
    decoder = json.JSONDecoder()
    # Bounded: adversarial text ("[[[[..." x 100k) must not cost quadratic time or blow the stack.
    starts = [m.start() for m in re.finditer(r"[{\[]", text[:200_000])][:32]
    for i in starts:
        try:
            value, _ = decoder.raw_decode(text, i)
            return value
        except (ValueError, RecursionError):
            continue
    return None


PARSERS = {"tag": TagActionParser, "raw": RawActionParser, "json": JSONToolCallParser}


def get_parser(name: str | ActionParser) -> ActionParser:
    if isinstance(name, ActionParser):
        return name
    try:
        return PARSERS[name]()
    except KeyError:

        raise ConfigError(f"unknown action parser {name!r}; choose one of {', '.join(PARSERS)}") from None
