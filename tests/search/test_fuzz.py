"""Any string is a legal action: fuzzed actions never raise and always return a full info dict."""

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym.core import INFO_KEYS

_VERBS = st.sampled_from(["search", "open", "answer", "SEARCH", "Open", "answer ", "serch", ""])
_BRACKETS = st.sampled_from(["[", "]", "[[", "]]", "(", ")", "", "[]", "][", "\\[", "{"])
_CONTROL = st.text(alphabet=st.characters(codec="utf-8", categories=["Cc", "Cf", "Zs", "Zl", "Zp"]), max_size=20)
_ANY = st.text(max_size=300)  # every unicode category, surrogates excluded by hypothesis' default
_ACTION = st.one_of(
    _ANY,
    _CONTROL,
    st.builds(lambda v, o, body, c: f"{v}{o}{body}{c}", _VERBS, _BRACKETS, st.one_of(_ANY, _CONTROL), _BRACKETS),
    st.builds(lambda v, body: f"{v}[{body}]", _VERBS, st.text(alphabet=string.printable, max_size=60)),
)


def _check(result):
    obs, reward, terminated, truncated, info = result
    assert isinstance(obs, str) and obs
    assert isinstance(reward, float) and 0.0 <= reward <= 1.0
    assert all(k in info for k in INFO_KEYS)
    assert 0.0 <= info["score"] <= 1.0 and isinstance(info["anchor"], str)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(_ACTION, min_size=1, max_size=4))
def test_fuzzed_actions_never_raise(env, space, actions):
    env.reset(options={"task": space.split("train")[7]})
    for action in actions:
        _check(env.step(action))


def test_huge_and_odd_actions(env, space):
    env.reset(options={"task": space.split("train")[7]})
    huge = "x" * 100_000
    for action in [huge, f"search[{huge}]", f"search[{'ab ' * 35_000}]", f"open[{huge}]",
                   "search[\x00\x01\x02]", "open[\u202e\u200b]", "search[\ud800]", "search[🙂 Ω ß 漢字]",
                   "search[[[]]]", "open[[per-00001]]", "]search[", "search]x[", "\n\t", None, 42]:
        _check(env.step(action))
    obs, reward, terminated, _, info = env.step(f"answer[{huge}]")
    assert terminated and len(obs) < 1000 and reward == info["score"]
