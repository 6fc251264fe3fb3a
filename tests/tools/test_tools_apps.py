"""App logic through the env (real state changes and refusals) and the schema validator."""

import json
import math

import pytest

from agentgym.envs.tools.env import tool_call as act
from agentgym.envs.tools.toolkit import validate


@pytest.fixture
def fresh(env, spec):
    env.reset(options={"task": spec("pay_requests", 1, seed=12)})

    def step(tool_name, /, **arguments):
        obs, _, _, _, info = env.step(act(tool_name, **arguments))
        return obs, info["action_valid"]

    return step


def test_insufficient_funds_is_refused_and_changes_nothing(env, fresh):
    balance = env.state["account"]["main"]["balance"]
    obs, ok = fresh("send_payment", to="a@b.co", amount=balance / 100 + 0.01, memo="too much")
    assert not ok and "insufficient funds" in obs and env.state["account"]["main"]["balance"] == balance
    obs, ok = fresh("send_payment", to="a@b.co", amount=12.345, memo="x")
    assert not ok and "more than two decimals" in obs
    obs, ok = fresh("send_payment", to="a@b.co", amount=balance / 100, memo="all of it")
    assert ok and env.state["account"]["main"]["balance"] == 0


def test_requests_can_be_settled_once(env, fresh):
    rid = next(r["id"] for r in env.state["requests"].values() if r["status"] == "pending")
    assert fresh("decline_request", request_id=rid)[1]
    obs, ok = fresh("pay_request", request_id=rid)
    assert not ok and "already declined" in obs


def test_contacts_refuse_duplicate_emails(env, fresh):
    existing = next(iter(env.state["contacts"].values()))
    obs, ok = fresh("add_contact", name="Someone", email=existing["email"].upper())
    assert not ok and "already exists" in obs
    obs, ok = fresh("add_contact", name="   ", email="new@person.org")
    assert not ok and "blank" in obs


def test_calendar_validates_dates_and_times(env, fresh):
    obs, ok = fresh("create_event", title="x", date="2026-02-30", start="10:00", end="11:00")
    assert not ok and "not a valid calendar date" in obs
    obs, ok = fresh("create_event", title="x", date="2026-03-03", start="11:00", end="10:00")
    assert not ok and "end after it starts" in obs
    obs, ok = fresh("create_event", title="x", date="2026-03-03", start="25:00", end="26:00")
    assert not ok and "HH:MM" in obs
    obs, ok = fresh("create_event", title="Gym", date="2026-03-03", start="07:00", end="08:00",
                    attendees=["b@x.io", "a@x.io", "a@x.io"])
    assert ok and json.loads(obs.split(" -> ", 1)[1])["attendees"] == ["a@x.io", "b@x.io"]


def test_email_delete_moves_to_trash_then_erases(env, fresh):
    mid = next(iter(env.state["emails"]))
    fresh("delete_email", email_id=mid)
    assert env.state["emails"][mid]["folder"] == "trash"
    fresh("delete_email", email_id=mid)
    assert mid not in env.state["emails"]
    obs, ok = fresh("send_email", to=["x@y.org"], subject="s", body="b")
    sent = json.loads(obs.split(" -> ", 1)[1])["sent"]
    assert ok and env.state["emails"][sent]["folder"] == "sent"
    assert fresh("list_emails", folder="sent")[0].count(sent) == 1


def test_files_move_refuses_to_overwrite(env, fresh):
    fresh("write_file", path="/a/one.txt", content="1")
    fresh("write_file", path="/a/two.txt", content="2")
    obs, ok = fresh("move_file", source="/a/one.txt", destination="/a/two.txt")
    assert not ok and "already exists" in obs and env.state["files"]["/a/two.txt"]["content"] == "2"
    assert fresh("move_file", source="/a/one.txt", destination="/b/one.txt")[1]
    assert "/a/one.txt" not in env.state["files"] and env.state["files"]["/b/one.txt"]["content"] == "1"
    obs, ok = fresh("read_file", path="/a/")
    assert not ok and "folder" in obs
    assert fresh("write_file", path="/a/../c.txt", content="3")[1] and "/c.txt" in env.state["files"]


def test_shopping_add_merges_unchecked_items(env, fresh):
    fresh("add_shopping_item", name="Kiwis", quantity=2)
    fresh("add_shopping_item", name="  kiwis ", quantity=3)
    kiwis = [i for i in env.state["shopping"].values() if i["name"] == "kiwis"]
    assert len(kiwis) == 1 and kiwis[0]["quantity"] == 5
    fresh("update_shopping_item", item_id=kiwis[0]["id"], checked=True)
    fresh("add_shopping_item", name="kiwis")
    assert len([i for i in env.state["shopping"].values() if i["name"] == "kiwis"]) == 2


SCHEMA = {"type": "object", "additionalProperties": False, "required": ["n"],
          "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9},
                         "x": {"type": "number"},
                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
                         "mode": {"type": "string", "enum": ["a", "b"]}}}


@pytest.mark.parametrize("value, message", [
    ({"n": True}, "n must be an integer, got a boolean"),
    ({"n": 1.0}, "n must be an integer"),
    ({"n": 0}, "n must be at least 1"),
    ({"n": 1, "x": math.nan}, "x must be a number, got nan"),
    ({"n": 1, "x": "1"}, "x must be a number, got a string"),
    ({"n": 1, "tags": ["abcd"]}, "tags[0] is longer than 3"),
    ({"n": 1, "tags": ["a", "b", "c"]}, "more than 2 items"),
    ({"n": 1, "mode": "c"}, "mode must be one of 'a', 'b'"),
    ({"n": 1, "extra": 1}, "unknown field(s) 'extra'"),
    ({}, "missing the required field 'n'"),
    ([], "arguments must be an object, got an array"),
])
def test_validator_rejects(value, message):
    errors = validate(value, SCHEMA)
    assert any(message in e for e in errors), errors


def test_validator_accepts():
    assert validate({"n": 3, "x": 2, "tags": ["a"], "mode": "b"}, SCHEMA) == []
