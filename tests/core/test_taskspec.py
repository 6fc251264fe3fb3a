import json

import numpy as np
import pytest

from agentgym.errors import HeldoutTaskError, SplitFileError, UnknownTaskError
from agentgym.tasks import TaskSpec, load_split, refuse_heldout, save_split
from agentgym.toy import CounterTaskSpace
from agentgym.tasks.validation import heldout_ids
from agentgym.tasks import generation as _generation
from agentgym.tasks import validation as _validation


def test_task_id_is_a_content_hash_independent_of_key_order():
    a = TaskSpec("agentgym/X-v0", {"b": 1, "a": [1, 2]}, seed=3)
    b = TaskSpec("agentgym/X-v0", {"a": (1, 2), "b": 1}, seed=3)
    assert a.task_id == b.task_id and a == b and hash(a) == hash(b)
    assert TaskSpec("agentgym/X-v0", {"b": 1, "a": [1, 2]}, seed=4).task_id != a.task_id
    assert len(a.task_id) == 16


def test_task_id_is_stable_across_releases():
    # A changed hash would orphan every saved split and pool: pin one value.
    assert TaskSpec("agentgym/Household-v0", {"k": 1}, seed=0).task_id == TaskSpec.from_dict(
        {"env_id": "agentgym/Household-v0", "params": {"k": 1}, "seed": 0}).task_id
    import hashlib
    expected = hashlib.sha256(b'{"env_id":"agentgym/Household-v0","params":{"k":1},"seed":0}').hexdigest()[:16]
    assert TaskSpec("agentgym/Household-v0", {"k": 1}, seed=0).task_id == expected


def test_from_dict_rejects_a_wrong_id():
    d = TaskSpec("e", {"x": 1}).to_dict()
    d["task_id"] = "0" * 16
    with pytest.raises(ValueError):
        TaskSpec.from_dict(d)


@pytest.mark.parametrize("bad", [dict(env_id=""), dict(env_id="e", seed="1"), dict(env_id="e", seed=True)])
def test_bad_specs_raise(bad):
    with pytest.raises(ValueError):
        TaskSpec(**bad)


def test_split_round_trip(tmp_path):
    tasks = [TaskSpec("e", {"i": i, "name": "é"}, seed=i) for i in range(5)]
    save_split(tmp_path / "s.jsonl", tasks)
    assert load_split(tmp_path / "s.jsonl") == tasks


@pytest.mark.parametrize("line", ["not json", '{"params": {}}', '{"env_id": "e", "seed": "x"}', "[1,2]"])
def test_malformed_split_file_gives_one_clear_error(tmp_path, line):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(TaskSpec("e").to_dict()) + "\n" + line + "\n")
    with pytest.raises(SplitFileError, match=r"bad.jsonl:2"):
        load_split(path)


def test_missing_split_file(tmp_path):
    with pytest.raises(SplitFileError, match="does not exist"):
        load_split(tmp_path / "nope.jsonl")


def test_refuse_heldout():
    space = CounterTaskSpace()
    held = heldout_ids(space)
    refuse_heldout(space.split("train"), held)
    with pytest.raises(HeldoutTaskError, match="held-out"):
        refuse_heldout(space.split("train") + space.split("heldout")[:1], held)


def test_find_unknown_task_id():
    with pytest.raises(UnknownTaskError, match="unknown task id"):
        CounterTaskSpace().find("deadbeef")


def test_default_parse_of_llm_proposals():
    space = CounterTaskSpace()
    assert _generation.parse(space, 'Here: {"params": {"target": 3}, "seed": 7}').params == {"target": 3}
    assert _generation.parse(space, "no json here") is None
    assert _generation.parse(space, '{"params": [1], "seed": "x"}') is None


def test_validate_uses_the_oracle():
    space = CounterTaskSpace()
    from agentgym.toy import register_counter
    register_counter()
    assert _validation.validate(space, space.sample(np.random.default_rng(0)))
