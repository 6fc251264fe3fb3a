"""ToolUse-v0: an agent calls JSON tools over a user's stateful apps to carry out an errand.

An action is one tool call `{"name": ..., "arguments": {...}}` or a list of them (at most
MAX_CALLS), as written by agentgym.parsing.JSONToolCallParser; text wrapped in
`<action>...</action>` or `<tool_call>...</tool_call>` works too. Calls in a list are all
checked against their schemas before any runs; they then run in order, and a call that fails
stops the rest (the observation says which were skipped). Calling `finish` ends the episode
and grades the final state (see goals.py); reward is sparse: the score at that step.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from agentgym.core import TextEnv
from agentgym.envs.tools import apps_bank, apps_calendar, apps_contacts, apps_email, apps_files, apps_shopping
from agentgym.envs.tools.goals import Goal, Grade, grade
from agentgym.envs.tools.state import PARTS, anchor_of, part_hash, weekday
from agentgym.envs.tools.tasks import ToolUseTaskSpace, load_task
from agentgym.envs.tools.toolkit import Tool, ToolError, params, string, validate
from agentgym.parsing import JSONToolCallParser
from agentgym.snapshot import need, need_bool, need_keys, need_str_list
from agentgym.tasks.spec import TaskSpec

MAX_ACTION_CHARS = 50_000
MAX_CALLS = 10
MAX_RESULT_CHARS = 6_000


def _finish_handler(state: dict, args: dict) -> Any:
    return {"finished": True}


FINISH = Tool("finish", "Call this when the task is done (or cannot be done). For questions, put the answer in "
              "`answer`. Ends the episode.", params(answer=string("the answer, for questions", 500)),
              _finish_handler)

APPS = {"contacts": apps_contacts, "calendar": apps_calendar, "email": apps_email, "files": apps_files,
        "bank": apps_bank, "shopping list": apps_shopping}
TOOLS: dict[str, Tool] = {t.name: t for app in APPS.values() for t in app.TOOLS}
TOOLS[FINISH.name] = FINISH
TOOLS["complete_task"] = Tool("complete_task", "Same as finish.", FINISH.parameters, _finish_handler)


def _signature(t: Tool) -> str:
    props, required = t.parameters["properties"], set(t.parameters["required"])
    args = ", ".join(f"{k}: {v.get('type', 'any')}" if k in required else f"[{k}: {v.get('type', 'any')}]"
                     for k, v in props.items())
    return f"- {t.name}({args}): {t.description}"


def _rules() -> str:
    lines = ["You are a personal assistant with access to the user's apps. Carry out the user's task by "
             "calling tools, then call finish. Change only what the task asks for: other changes count as "
             "mistakes. Dates are YYYY-MM-DD, times HH:MM (24h), amounts in dollars.",
             'A tool call is JSON: {"name": "<tool>", "arguments": {...}}; a JSON list of calls runs them in '
             "order. Tools:"]
    for app, module in APPS.items():
        lines.append(f"[{app}]")
        lines += [_signature(t) for t in module.TOOLS]
    lines.append(_signature(FINISH) + " (alias: complete_task)")
    return "\n".join(lines)


def tool_call(tool_name: str, /, **arguments: Any) -> str:
    """The canonical action string for one call (what JSONToolCallParser hands to the env)."""
    return json.dumps({"name": tool_name, "arguments": arguments}, ensure_ascii=False, sort_keys=True)


_ACTION_TAG = re.compile(r"<action>(.*?)</action>", re.S | re.I)


def parse_calls(action: str) -> tuple[list[dict] | None, str | None]:
    """Tool calls in an action string, or (None, what is wrong)."""
    if len(action) > MAX_ACTION_CHARS:
        return None, f"the action is longer than {MAX_ACTION_CHARS} characters"
    tagged = _ACTION_TAG.findall(action)
    text = tagged[-1] if tagged else action
    if not text.strip():
        return None, 'empty action; call a tool with {"name": ..., "arguments": {...}}'
    try:
        parsed = JSONToolCallParser().parse(text)
        if parsed.action is None:
            return None, parsed.error
        payload = json.loads(parsed.action)
    except (ValueError, TypeError, RecursionError):
        return None, "the tool call could not be read as JSON"
    calls = payload if isinstance(payload, list) else [payload]
    if not calls:
        return None, "the list of tool calls is empty"
    if len(calls) > MAX_CALLS:
        return None, f"too many calls in one action ({len(calls)}); send at most {MAX_CALLS}"
    return calls, None


def check_calls(calls: list[dict]) -> list[str]:
    """Schema errors of every call, so the agent can fix them all at once."""
    errors = []
    for i, c in enumerate(calls):
        where = f"call {i + 1} ({c['name'][:60]})" if len(calls) > 1 else c["name"][:60]
        tool = TOOLS.get(c["name"])
        if tool is None:
            errors.append(f"{where}: unknown tool; available tools: {', '.join(TOOLS)}")
            continue
        errors += [f"{where}: {e}" for e in validate(c["arguments"], tool.parameters)]
        if tool.handler is _finish_handler and i != len(calls) - 1:
            errors.append(f"{where}: finish must be the last call")
    return errors


def _show(result: Any) -> str:
    text = json.dumps(result, ensure_ascii=False)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"... [truncated, {len(text)} characters in all; narrow the query]"
    return text


class ToolUseEnv(TextEnv):
    task_space = ToolUseTaskSpace()
    rules: ClassVar[str] = _rules()
    #: The tools in OpenAI function-calling format (for chat templates with native tool support).
    tools: ClassVar[list[dict]] = [t.spec for name, t in TOOLS.items() if name != "complete_task"]
    #: The agentgym.parsing parser that suits this env's actions (ChatEnv(env, parser="json")).
    action_parser: ClassVar[str] = "json"
    snapshot_version = 1

    def __init__(self, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        self.state: dict = {}
        self._initial: dict = {}
        self._goal: Goal | None = None
        self._finished = False
        self._parts: dict[str, str] = {}  # hash of each part of the state, for the anchor
        self._touched: set[str] = set()  # collections written since reset: the only ones to diff
        self._grade: Grade | None = None  # of the current state (None: stale)

    def _reset(self, task: TaskSpec) -> tuple[str, dict]:
        self.state, self._initial, self._goal = load_task(task)
        self._parts = {name: part_hash(self.state, name) for name in PARTS}
        self._touched, self._grade = set(), None
        self._finished = False
        user, today = self.state["user"], self.state["today"]
        obs = (f"Today is {weekday(today)} {today}. You are {user['name']} <{user['email']}>. "
               f"Your apps: {', '.join(APPS)}. Use the tools to do the task, then call finish.")
        return obs, self._info(action_valid=True, final=False)

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._finished:
            return "The episode has ended; call reset().", 0.0, True, False, self._info(False, final=True)
        calls, error = parse_calls(action)
        if calls is None:
            return f"Error: {error}.", 0.0, False, False, self._info(False, final=False)
        errors = check_calls(calls)
        if errors:
            shown = "\n".join(errors[:20]) + (f"\n({len(errors) - 20} more errors)" if len(errors) > 20 else "")
            return f"Error, nothing was run:\n{shown}", 0.0, False, False, self._info(False, final=False)

        lines, valid, answer, written = [], True, None, set()
        for i, c in enumerate(calls):
            tool = TOOLS[c["name"]]
            written.update(tool.writes)  # also when it fails: a refusal may come after a write
            try:
                result = tool.handler(self.state, c["arguments"])
            except ToolError as exc:
                lines.append(f"{c['name']} -> Error: {exc}")
                skipped = [d["name"] for d in calls[i + 1:]]
                if skipped:
                    lines.append(f"(not run: {', '.join(skipped)})")
                valid = False
                break
            if tool.handler is _finish_handler:
                self._finished = True
                answer = c["arguments"].get("answer")
            else:
                lines.append(f"{c['name']} -> {_show(result)}")

        if written:
            for name in written:
                self._parts[name] = part_hash(self.state, name)
            self._touched |= written
            self._grade = None
        if self._finished:
            info = self._info(valid, final=True, answer=answer)
            lines.append(f"Task finished. Score: {info['score']:.2f}.")
            return "\n".join(lines), info["score"], True, False, info
        return "\n".join(lines), 0.0, False, False, self._info(valid, final=False)

    # --- snapshots: the apps' data (JSON already), whether finish was called, what was written --
    def _get_state(self) -> dict:
        return {"apps": json.loads(json.dumps(self.state)), "finished": self._finished,
                "touched": sorted(self._touched)}

    def _set_state(self, state: dict) -> None:
        need_keys(state, ("apps", "finished", "touched"))
        apps, initial = state["apps"], self._initial
        need(isinstance(apps, dict) and set(apps) == set(initial),
             f"apps must hold exactly {sorted(initial)}")
        for name, value in apps.items():
            need(type(value) is type(initial[name]), f"apps.{name} must be a {type(initial[name]).__name__}")
        for fixed in ("today", "user"):  # no tool writes them
            need(apps[fixed] == initial[fixed], f"apps.{fixed} differs from the task's")
        touched = need_str_list(state["touched"], "touched")
        need(set(touched) <= set(PARTS), f"touched names a part that is not one of {', '.join(PARTS)}")
        finished = need_bool(state["finished"], "finished")
        self.state = json.loads(json.dumps(apps))
        self._parts = {name: part_hash(self.state, name) for name in PARTS}
        self._touched, self._grade, self._finished = set(touched), None, finished

    def _info(self, action_valid: bool, final: bool, answer: str | None = None) -> dict:
        if final:  # the answer counts only at the end, so the final grade is never cached
            g = grade(self._goal, self._initial, self.state, answer, self._touched)
        else:
            if self._grade is None:
                self._grade = grade(self._goal, self._initial, self.state, None, self._touched)
            g = self._grade
        info = {
            "task_id": self.task.task_id,
            "instruction": self._goal.instruction,
            "anchor": anchor_of(self._parts),
            "admissible_actions": None,
            "action_valid": bool(action_valid),
            # Success and score are only awarded once the agent says it is done.
            "success": bool(final and g.success),
            "score": float(g.score) if final else 0.0,
            "progress": float(g.progress),
        }
        if final:
            info["failed_checks"] = g.failed
            info["collateral_damage"] = g.collateral
        return info
