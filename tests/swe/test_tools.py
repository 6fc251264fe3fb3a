"""Action parsing and the host-side file tools: bad input is an ActionError/PathError, never
anything else, and no path leaves the workspace."""

import json
import os

import pytest

from agentgym.envs.swe.tools import ActionError, create, format_call, parse_action, str_replace, truncate, view
from agentgym.envs.swe.workspace import PathError
from agentgym.parsing import JSONToolCallParser


def test_text_forms():
    assert parse_action("bash ls -la").args == {"command": "ls -la"}
    assert parse_action("bash --timeout 5 sleep 1").args == {"command": "sleep 1", "timeout": 5.0}
    assert parse_action("view pkg/mod.py 3-9").args == {"path": "pkg/mod.py", "start_line": 3, "end_line": 9}
    assert parse_action("view pkg/mod.py").args == {"path": "pkg/mod.py"}
    assert parse_action("run_tests tests/test_a.py").args == {"paths": ["tests/test_a.py"]}
    assert parse_action("submit").name == "submit"
    call = parse_action("str_replace pkg/mod.py\n<<<<<<< SEARCH\n    return a + b\n=======\n    return a - b\n>>>>>>> REPLACE")
    assert call.args == {"path": "pkg/mod.py", "old_str": "    return a + b", "new_str": "    return a - b"}
    call = parse_action("create notes.txt\nline one\n  indented")
    assert call.args == {"path": "notes.txt", "content": "line one\n  indented"}


def test_json_forms_and_parser_round_trip():
    """What JSONToolCallParser hands the env parses to the same call."""
    parsed = JSONToolCallParser().parse('<tool_call>{"name": "view", "arguments": {"file": "a.py", "view_range": [1, 5]}}</tool_call>')
    call = parse_action(parsed.action)
    assert call.name == "view" and call.args == {"path": "a.py", "start_line": 1, "end_line": 5}
    call = parse_action(json.dumps({"name": "bash", "arguments": json.dumps({"command": "echo hi"})}))
    assert call.args == {"command": "echo hi"}
    text = format_call("str_replace", path="p.py", old_str="a\n  b", new_str="c")
    assert JSONToolCallParser().parse(JSONToolCallParser().format(text)).action == text


@pytest.mark.parametrize("bad", [
    "", "   ", "{not json", '{"arguments": {}}', '{"name": 3}', '[{"name": "submit"}, {"name": "submit"}]',
    '{"name": "bash", "arguments": []}', '{"name": "bash", "arguments": {"command": 5}}',
    '{"name": "bash", "arguments": {"command": "ls", "timeout": "soon"}}', '{"name": "rm_rf"}',
    "dance wildly", "view", "view a.py x-y", "str_replace a.py\nno markers", "create", "bash",
    '{"name": "view", "arguments": {"path": "a", "start_line": "one"}}', '{"name": "view", "arguments": {"path": "a", "view_range": 4}}',
    '"just a string"', "[]", "\x00\x01", "[" * 5000,
])
def test_malformed_actions_raise_action_error(bad):
    with pytest.raises(ActionError):
        parse_action(bad)


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.txt", "pkg/../../x", "/workspace/../etc/passwd", "", "a\x00b"])
def test_paths_outside_workspace_refused(workspace, path):
    with pytest.raises(PathError):
        view(workspace, path)
    with pytest.raises(PathError):
        create(workspace, path, "x")
    assert not (workspace.parent / "outside.txt").exists()


def test_symlink_out_of_workspace_refused(workspace, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    os.symlink(secret, workspace / "link")
    os.symlink(tmp_path, workspace / "dirlink")
    with pytest.raises(PathError):
        view(workspace, "link")
    with pytest.raises(PathError):
        create(workspace, "dirlink/new.txt", "x")
    with pytest.raises(PathError):
        str_replace(workspace, "link", "host", "pwned")
    assert secret.read_text() == "host secret"
    assert not (tmp_path / "new.txt").exists()


def test_view_str_replace_create(workspace):
    out = view(workspace, "/workspace/pkg/mod.py", 2, 2)
    assert "    2      return a + b" in out
    assert "pkg/" in view(workspace, ".")
    str_replace(workspace, "pkg/mod.py", "a + b", "a - b")
    assert "a - b" in (workspace / "pkg/mod.py").read_text()
    with pytest.raises(ActionError, match="not found"):
        str_replace(workspace, "pkg/mod.py", "nothing like this", "x")
    (workspace / "dup.py").write_text("x = 1\nx = 1\n")
    with pytest.raises(ActionError, match="2 times"):
        str_replace(workspace, "dup.py", "x = 1", "y")
    create(workspace, "new/dir/file.py", "print('hi')\n")
    assert (workspace / "new/dir/file.py").read_text() == "print('hi')\n"
    with pytest.raises(PathError):
        create(workspace, "pkg", "x")
    with pytest.raises(PathError):
        view(workspace, "pkg/mod.py", 50, 60)


def test_truncate_marks_the_cut():
    text = "a" * 5000 + "MIDDLE" + "b" * 5000
    out = truncate(text, 1000)
    assert len(out) < 1100 and "characters truncated" in out
    assert out.startswith("a") and out.endswith("b")
    assert truncate("short", 1000) == "short"


from hypothesis import given, settings, strategies as st  # noqa: E402

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["name", "arguments", "path", "command", "old_str"]), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), JSONISH.map(json.dumps),
                 st.sampled_from(["bash ", "view ", "str_replace ", "create ", "run_tests ", "submit "]).flatmap(
                     lambda p: st.text(max_size=80).map(lambda t: p + t))))
def test_any_text_parses_or_raises_action_error(text):
    try:
        call = parse_action(text)
    except ActionError:
        return
    assert call.name in ("bash", "view", "str_replace", "create", "run_tests", "submit")
