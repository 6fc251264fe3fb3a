import json

from hypothesis import given, settings, strategies as st

from agentgym.parsing import JSONToolCallParser, RawActionParser, TagActionParser


def test_tag_parser_takes_the_last_block_and_normalizes_whitespace():
    p = TagActionParser()
    assert p.parse("I think...<action>go to x</action> no, <action>  take\n apple 1 </action>").action == "take apple 1"
    assert p.parse("<ACTION>look</ACTION>").action == "look"


def test_tag_parser_malformed_output_is_an_error_not_an_exception():
    p = TagActionParser()
    for text in ["", "look", "<action>look", "<action></action>", "<action>  </action>", None, 42]:
        parsed = p.parse(text)
        assert parsed.action is None and parsed.error


def test_tag_parser_rejects_overlong_actions():
    assert TagActionParser(max_action_chars=10).parse("<action>" + "a" * 11 + "</action>").action is None


def test_format_round_trips():
    for p in (TagActionParser(), RawActionParser()):
        assert p.parse(p.format("open drawer 1")).action == "open drawer 1"


def test_json_parser_accepts_tagged_bare_lists_and_string_arguments():
    p = JSONToolCallParser()
    one = p.parse('<tool_call>{"name": "send", "arguments": {"to": "dana"}}</tool_call>')
    assert json.loads(one.action) == {"name": "send", "arguments": {"to": "dana"}}
    bare = p.parse('sure: {"name": "list", "arguments": "{\\"n\\": 2}"}')
    assert json.loads(bare.action) == {"name": "list", "arguments": {"n": 2}}
    many = p.parse('[{"name": "a"}, {"name": "b", "arguments": {}}]')
    assert [c["name"] for c in json.loads(many.action)] == ["a", "b"]


def test_json_parser_unwraps_openai_nested_calls():
    parsed = JSONToolCallParser().parse('{"type": "function", "function": {"name": "f", "arguments": "{}"}}')
    assert json.loads(parsed.action) == {"name": "f", "arguments": {}}


def test_json_parser_errors():
    p = JSONToolCallParser()
    for text in ["", "{not json", '{"arguments": {}}', '{"name": 3}', '{"name": "a", "arguments": [1]}',
                 '{"name": "a", "arguments": "{bad"}', "[" * 100_000, "{" * 100_000]:
        parsed = p.parse(text)
        assert parsed.action is None and parsed.error, text[:20]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_parsers_never_raise(text):
    for p in (TagActionParser(), JSONToolCallParser(), RawActionParser()):
        parsed = p.parse(text)
        assert (parsed.action is None) != (parsed.error is None) or isinstance(p, RawActionParser)
