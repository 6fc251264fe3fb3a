"""env.reward=patch_similarity|both on SWE-v0: the oracle's fix scores 1 without running tests, no
change scores -1, a wrong edit lands in between; the reference stays on the host."""

import pytest

from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.tools import format_call
from agentgym.errors import ConfigError

SPACE = SWETaskSpace()
TASK = SPACE.split("train")[0]


def finish(env, actions):
    env.reset(options={"task": TASK})
    for a in actions:
        obs, reward, term, trunc, info = env.step(a)
        if term or trunc:
            return obs, reward, info
    raise AssertionError("episode did not end")


@pytest.fixture
def env():
    e = SWEEnv(reward="patch_similarity")
    yield e
    e.close()


@pytest.mark.sandbox
def test_oracle_is_one_and_no_change_is_minus_one(env, monkeypatch):
    import agentgym.envs.swe.env as swe_env

    def no_tests(*a, **k):
        raise AssertionError("patch_similarity must not run the tests")

    monkeypatch.setattr(swe_env, "grade", no_tests)
    obs, reward, info = finish(env, SPACE.solve(TASK))
    assert reward == 1.0 and info["patch_similarity"] == 1.0 and info["success"] and info["score"] == 1.0
    obs, reward, info = finish(env, [format_call("submit")])
    assert reward == -1.0 and info["score"] == 0.0 and not info["success"]
    assert "no patch" in info["patch_note"]


@pytest.mark.sandbox
def test_wrong_edit_is_in_between_and_both_keeps_the_tests_verdict():
    p = TASK.params
    indent = p["after"][: len(p["after"]) - len(p["after"].lstrip())]
    # the fix's line, behind a line that raises: part of what the patch writes is the fix's
    wrong = [format_call("str_replace", path=p["file"], old_str=p["after"],
                         new_str=f"{indent}raise RuntimeError('not yet')\n{p['before']}"), format_call("submit")]
    with SWEEnv(reward="both") as env:
        obs, reward, info = finish(env, wrong)
        assert 0.0 < info["patch_similarity"] < 1.0
        assert not info["success"]  # the tests still fail
        assert reward == pytest.approx((info["score"] + info["patch_similarity"]) / 2)
        assert "Hidden tests" in obs and "Patch similarity" in obs


@pytest.mark.sandbox
def test_a_comment_or_whitespace_on_the_buggy_line_is_no_change(env):
    """Issue 52, item 5: a space added to the buggy line, the bug left in, scored 0.96."""
    p = TASK.params
    for trivial in (p["after"] + " ", p["after"] + "  # fixed", p["after"].replace("(", "( ", 1)):
        obs, reward, info = finish(env, [format_call("str_replace", path=p["file"], old_str=p["after"],
                                                     new_str=trivial), format_call("submit")])
        assert reward == -1.0 and "no code change" in info["patch_note"], (trivial, info["patch_note"])


def test_unknown_reward_mode_is_one_line():
    with pytest.raises(ConfigError, match="choose one of tests, patch_similarity, both"):
        SWEEnv(reward="similarity")


BLOB = {"path": "assets/logo.bin", "content": "\x00\x01PNG\x00binary"}  # NUL bytes: a binary file
HUGE = {"path": "notes/huge.txt", "content": "".join(f"line {i}: {'x' * 40}\n" for i in range(1000))}


@pytest.mark.sandbox
@pytest.mark.parametrize("extra,expected", [
    ([BLOB], ["binary files left out of the comparison: assets/logo.bin"]),
    ([HUGE], ["characters cut to 20000 for the similarity"]),
    ([BLOB, HUGE], ["binary files left out", "cut to 20000"]),
], ids=["binary", "huge", "both"])
def test_binary_and_huge_patches_leave_one_line_in_info_and_a_bounded_reward(extra, expected):
    """Through agentgym/SWE-v0 with env.reward=patch_similarity: the oracle's fix plus a binary
    and/or huge file at submit. The binary file is left out of the comparison (the fix alone still
    scores 1), the huge patch is cut before comparing; info["patch_note"] says so in one line."""
    import agentgym
    from agentgym.rewards.hook import env_reward_kwargs

    fix, submit = SPACE.solve(TASK)
    env = agentgym.make("agentgym/SWE-v0", **env_reward_kwargs("patch_similarity"))
    try:
        env.reset(options={"task": TASK})
        for action in [fix] + [format_call("create", **f) for f in extra]:
            _, reward, term, trunc, info = env.step(action)
            assert info["action_valid"] and not (term or trunc)
        obs, reward, term, _, info = env.step(submit)
    finally:
        env.close()
    note = info["patch_note"]
    assert term and isinstance(note, str) and len(note.splitlines()) == 1 and "\n" not in note and "\r" not in note
    assert all(e in note for e in expected), note
    assert -1.0 <= reward <= 1.0 and info["score"] == max(reward, 0.0) and reward == info["patch_similarity"]
    if HUGE in extra:
        assert 0.0 <= reward < 0.5  # a 52,000-character patch compared as its first 20,000
    else:
        assert reward == 1.0  # the binary file is left out: what is compared is the fix
    assert note in obs
