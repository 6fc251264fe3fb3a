"""Fuzzed actions never raise: random text, random JSON, real tool names with wrong or huge
arguments, lists of calls. Garbage is an invalid action; the state keeps its invariants."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym.core import INFO_KEYS
from agentgym.envs.tools.env import TOOLS, ToolUseEnv
from agentgym.envs.tools.goals import grade
from agentgym.envs.tools.state import state_hash
from agentgym.tasks.spec import TaskSpec

ENV = ToolUseEnv()
TASK = TaskSpec("agentgym/ToolUse-v0", {"template": "reschedule_meetings", "level": 2}, seed=1)
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
param_names = sorted({k for t in TOOLS.values() for k in t.parameters["properties"]})
arguments = st.dictionaries(st.sampled_from(param_names) | st.text(max_size=8), json_values, max_size=5)
calls = st.builds(lambda name, args: {"name": name, "arguments": args},
                  st.sampled_from(sorted(TOOLS)) | st.text(max_size=12), arguments)


def _step(action: str):
    ENV.reset(options={"task": TASK})
    obs, reward, terminated, truncated, info = ENV.step(action)
    assert isinstance(obs, str) and obs and set(INFO_KEYS) <= set(info)
    assert 0.0 <= info["score"] <= 1.0 and isinstance(info["action_valid"], bool)
    state = ENV.state
    assert state["account"]["main"]["balance"] >= 0
    assert all(e["start"] < e["end"] for e in state["events"].values())
    assert all(1 <= i["quantity"] <= 999 for i in state["shopping"].values())
    return obs, reward, terminated, info


@FUZZ
@given(st.text(max_size=300))
def test_random_text(text):
    _, _, _, info = _step(text)
    if "{" not in text and "[" not in text:
        assert not info["action_valid"]


@FUZZ
@given(json_values)
def test_random_json(value):
    _step(json.dumps(value))


@FUZZ
@given(calls)
def test_tool_names_with_random_arguments(call):
    obs, _, _, info = _step(json.dumps(call))
    if call["name"] not in TOOLS:
        assert not info["action_valid"] and "unknown tool" in obs


@settings(FUZZ, max_examples=40)
@given(st.lists(calls, min_size=0, max_size=4), st.sampled_from(["{}", "<action>{}</action>", "<tool_call>{}</tool_call>"]))
def test_lists_of_calls_in_wrappers(batch, wrapper):
    _step(wrapper.replace("{}", json.dumps(batch)))


@FUZZ
@given(st.sampled_from(sorted(TOOLS)), st.integers(0, 120_000), st.sampled_from(["x", "é", "\n", "\x00", "😀"]))
def test_huge_arguments(name, size, char):
    big = char * size
    props = TOOLS[name].parameters["properties"]
    args = {k: big if v.get("type") == "string" else [big] if v.get("type") == "array" else size
            for k, v in props.items()}
    obs, _, _, info = _step(json.dumps({"name": name, "arguments": args}))
    assert len(obs) < 20_000


def test_too_many_calls_in_one_action_are_refused():
    obs, _, _, info = _step(json.dumps([{"name": "get_balance", "arguments": {}}] * 11))
    assert not info["action_valid"] and "too many calls" in obs


def test_pathological_inputs():
    for action in ["[" * 100_000, "{" * 50_000, '{"name": "finish", "arguments": ' * 2000,
                   '{"name": "get_balance", "arguments": {}}' * 5000, "\x00\x01\x02", "<action></action>",
                   '{"name": null}', '{"name": "finish", "arguments": null}', '{"name": "finish", "arguments": []}',
                   '{"name": "send_payment", "arguments": {"to": "a@b.co", "amount": NaN, "memo": "x"}}',
                   '{"name": "send_payment", "arguments": {"to": "a@b.co", "amount": Infinity, "memo": "x"}}',
                   '{"name": "send_payment", "arguments": {"to": "a@b.co", "amount": 1e308, "memo": "x"}}',
                   '{"name": "send_payment", "arguments": {"to": "a@b.co", "amount": 1e-9, "memo": "x"}}',
                   '{"name": "add_shopping_item", "arguments": {"name": "x", "quantity": 1e3}}',
                   '{"name": "list_events", "arguments": {"start_date": "2026-13-45"}}',
                   '{"name": "write_file", "arguments": {"path": "/", "content": ""}}',
                   '{"name": "list_files", "arguments": {"folder": "/../../.."}}']:
        _, reward, terminated, info = _step(action)
        assert not info["action_valid"] or action.startswith('{"name": "list_files'), action
        assert reward == 0.0 and not terminated


def _from_schema(schema: dict, key: str = ""):
    """Arguments that pass the schema, so that fuzzing reaches the handlers' own logic."""
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "object":
        props = schema["properties"]
        optional = [k for k in props if k not in schema["required"]]
        return st.builds(lambda req, opt: {**req, **opt},
                         st.fixed_dictionaries({k: _from_schema(props[k], k) for k in schema["required"]}),
                         st.fixed_dictionaries({}, optional={k: _from_schema(props[k], k) for k in optional}))
    if kind == "array":
        return st.lists(_from_schema(schema["items"], key), min_size=schema.get("minItems", 0), max_size=3)
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(schema.get("minimum", -5), schema.get("maximum", 5))
    if kind == "number":
        return st.integers(1, 500_000).map(lambda cents: cents / 100)
    pattern = schema.get("pattern", "")
    if "\\d{4}" in pattern:
        return st.dates().map(lambda d: d.isoformat())
    if "[01]" in pattern:
        return st.times().map(lambda t: t.strftime("%H:%M"))
    if "@" in pattern:
        return st.sampled_from(["a@b.co", "dana.ortiz@brightlane.com", "x@y.org"])
    if key.endswith("id"):
        return st.sampled_from(["c1", "c3", "ev2", "ev17", "m1", "m4", "r1", "s1", "s2", "t1", "zz"])
    if key in ("path", "source", "destination", "folder"):
        return st.sampled_from(["/documents/notes.txt", "/downloads/photo-001.jpg", "/x/y.txt", "/documents", "/"])
    return st.text(max_size=30)


valid_calls = st.sampled_from(sorted(TOOLS)).flatmap(
    lambda name: _from_schema(TOOLS[name].parameters).map(lambda args: {"name": name, "arguments": args}))


@settings(FUZZ, max_examples=60)
@given(st.lists(valid_calls, min_size=1, max_size=15))
def test_random_walks_of_schema_valid_calls(walk):
    ENV.reset(options={"task": TASK})
    for call in walk:
        obs, _, terminated, _, info = ENV.step(json.dumps(call))
        assert set(INFO_KEYS) <= set(info)
        assert info["action_valid"] or "Error" in obs, obs
        # The env re-hashes and re-diffs only the collections tools declare they write: an
        # undeclared write would show up here as a stale anchor or a missed change.
        assert info["anchor"] == state_hash(ENV.state)
        full = grade(ENV._goal, ENV._initial, ENV.state, None)
        assert info["progress"] == full.progress
        assert ENV._grade is None or ENV._grade.collateral == full.collateral
        if terminated:
            break
    assert ENV.state["account"]["main"]["balance"] >= 0
