"""OpenAI chat messages and tools as the plain {"role", "content"} messages a chat template renders.

Tools are rendered by the gateway itself, as a system message that lists their JSON schemas and
asks for `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (the Hermes format that Qwen
and many open models were tuned on), so any chat template can carry them, the tiny model's too.
An assistant message the gateway sampled is rendered as the text it sampled (the recorder then
swaps in the sampled ids); tool results become `tool` messages. Everything here is pure.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class RequestError(ValueError):
    """A request the gateway cannot serve: an OpenAI error object with this status (app.py)."""

    def __init__(self, message: str, status: int = 400, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.param, self.code, self.kind = status, param, code, kind

    def body(self) -> dict:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.code}}


def check_tools(tools) -> list[dict]:
    """The request's `tools`, checked: each a function with a valid name and a JSON-object schema."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise RequestError("tools must be a list of {'type': 'function', 'function': {...}}", param="tools")
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise RequestError(f"{where}: only tools of type 'function' can be rendered", param=where)
        fn = tool["function"]
        if not isinstance(fn.get("name"), str) or not _NAME.match(fn["name"]):
            raise RequestError(f"{where}.function.name must be 1-64 letters, digits, '_' or '-'", param=f"{where}.function.name")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict) or params.get("type", "object") != "object":
            raise RequestError(f"{where}.function.parameters must be a JSON schema of type 'object'",
                               param=f"{where}.function.parameters")
        try:
            json.dumps(params)
        except (TypeError, ValueError):
            raise RequestError(f"{where}.function.parameters is not JSON", param=f"{where}.function.parameters") from None
    return tools


def tools_message(tools: list[dict], required: bool = False) -> str:
    """The system text that lists the tools and the format of a call."""
    schemas = "\n".join(json.dumps({"name": t["function"]["name"], "description": t["function"].get("description", ""),
                                    "parameters": t["function"].get("parameters", {})}, sort_keys=True)
                        for t in tools)
    must = "You must call one of them." if required else "You may call one or more of them."
    return (f"You have these tools:\n<tools>\n{schemas}\n</tools>\n{must} For each call write "
            '<tool_call>{"name": <tool name>, "arguments": <JSON object>}</tool_call>')


def _text(content, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise RequestError(f"{where}.content[{j}]: only text parts are supported", param=f"{where}.content")
            parts.append(part["text"])
        return "".join(parts)
    raise RequestError(f"{where}.content must be a string or a list of text parts", param=f"{where}.content")


def check_tool_calls(tool_calls, where: str) -> list[dict]:
    """An assistant message's `tool_calls`, checked: each {"function": {"name": str, "arguments": str}}."""
    if not isinstance(tool_calls, list):
        raise RequestError(f"{where} must be a list", param=where)
    for j, call in enumerate(tool_calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or \
                not isinstance(fn.get("arguments", ""), (str, type(None))):
            raise RequestError(f"{where}[{j}] must be {{\"type\": \"function\", \"function\": {{\"name\": <string>, "
                               f"\"arguments\": <JSON string>}}}}", param=f"{where}[{j}]")
    return tool_calls


def call_text(tool_calls: list[dict]) -> str:
    """Tool calls an assistant message carries (not ones the gateway sampled) as the model writes them."""
    out = []
    for call in tool_calls:
        fn = call.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except (TypeError, ValueError, RecursionError):
            args = fn.get("arguments")
        out.append("<tool_call>" + json.dumps({"name": fn.get("name"), "arguments": args}) + "</tool_call>")
    return "".join(out)


def template_messages(messages, tools: list[dict], tool_choice=None) -> list[dict]:
    """The request's messages as plain string messages; the tools as a system message (merged into
    the first system message when there is one). Assistant tool calls become their text."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list", param="messages")
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            raise RequestError(f"{where}.role must be one of system, developer, user, assistant, tool", param=where)
        role = "system" if m["role"] == "developer" else m["role"]
        text = _text(m.get("content"), where)
        if role == "assistant" and m.get("tool_calls"):
            text += call_text(check_tool_calls(m["tool_calls"], f"{where}.tool_calls"))
        out.append({"role": role, "content": text})
    if tools and tool_choice != "none":
        listing = tools_message(tools, required=tool_choice == "required" or isinstance(tool_choice, dict))
        if out[0]["role"] == "system":
            out[0] = {"role": "system", "content": (out[0]["content"] + "\n\n" + listing) if out[0]["content"] else listing}
        else:
            out.insert(0, {"role": "system", "content": listing})
    return out


@dataclass
class Reply:
    content: str | None
    tool_calls: list[dict]


def parse_reply(text: str, tools: list[dict]) -> Reply:
    """The sampled text as an OpenAI assistant message: `<tool_call>` blocks naming an offered tool
    with a JSON object of arguments become tool_calls, the rest stays content."""
    if not tools:
        return Reply(text, [])
    names = {t["function"]["name"] for t in tools}
    calls, kept, last = [], [], 0
    for match in TOOL_CALL.finditer(text):
        try:
            data = json.loads(match.group(1))
        except (ValueError, RecursionError):  # the model's text: "[[[[..." nested past the limit is not a call
            continue
        if not isinstance(data, dict) or data.get("name") not in names or not isinstance(data.get("arguments", {}), dict):
            continue
        kept.append(text[last:match.start()])
        last = match.end()
        calls.append({"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                      "function": {"name": data["name"], "arguments": json.dumps(data.get("arguments", {}))}})
    kept.append(text[last:])
    content = "".join(kept).strip()
    return Reply(content or (None if calls else ""), calls)
