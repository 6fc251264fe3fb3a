"""State-based grading: required checks give partial credit; collateral damage zeroes the score."""

import json

import pytest

from agentgym.envs.tools.env import tool_call as act
from agentgym.envs.tools.goals import parse_amount
from agentgym.envs.tools.tasks import TEMPLATES


def _with_extra(plan, extra):
    """The oracle plan with `extra` actions inserted just before its final `finish`."""
    return plan[:-1] + list(extra) + plan[-1:]


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_oracle_plus_one_unrelated_deletion_fails(env, spec, play, space, template):
    task = spec(template, 2, seed=7)
    plan = space.solve(task)
    _, reward, term, _, info = play(env, task, plan)
    assert term and info["success"] and reward == 1.0
    # No template touches /documents/notes.txt: deleting it is collateral damage.
    _, reward, term, _, info = play(env, task, _with_extra(plan, [act("delete_file", path="/documents/notes.txt")]))
    assert term and reward == 0.0 and info["score"] == 0.0 and not info["success"]
    assert info["collateral_damage"] == ["removed files//documents/notes.txt"]
    assert info["progress"] == 1.0  # the required checks still pass: only the damage failed it


def test_paying_an_extra_person_is_collateral(env, spec, play, space):
    task = spec("pay_requests", 2, seed=4)
    plan = space.solve(task)
    extra = act("send_payment", to="stranger@example.com", amount=1.0, memo="oops")
    _, reward, _, _, info = play(env, task, _with_extra(plan, [extra]))
    assert reward == 0.0
    assert "added transactions/" in " ".join(info["collateral_damage"])
    # The balance may change in this task, but not by that much: its check fails too.
    assert any("balance" in f for f in info["failed_checks"])


def test_moving_a_distractor_meeting_is_collateral(env, spec, play, space):
    task = spec("reschedule_meetings", 1, seed=3)
    plan = space.solve(task)
    env.reset(options={"task": task})
    target = next(json.loads(a)["arguments"]["date"] for a in plan if json.loads(a)["name"] == "update_event")
    moved = {json.loads(a)["arguments"]["event_id"] for a in plan if json.loads(a)["name"] == "update_event"}
    # An event with the same person outside next week must stay where it is.
    person = json.loads(plan[1])["arguments"]["attendee"]
    other = next(e["id"] for e in env.state["events"].values()
                 if person in e["attendees"] and e["id"] not in moved and e["date"] != target)
    _, reward, _, _, info = play(env, task, _with_extra(plan, [act("update_event", event_id=other, date=target)]))
    assert reward == 0.0 and info["collateral_damage"] == [f"changed events/{other}"]


def test_partial_credit_is_the_fraction_of_checks(env, spec, play, space):
    task = spec("pay_requests", 3, seed=1)  # 3 pay, 2 decline, 1 balance check = 6 checks
    plan = space.solve(task)
    dropped = next(i for i, a in enumerate(plan) if json.loads(a)["name"] == "decline_request")
    _, reward, _, _, info = play(env, task, plan[:dropped] + plan[dropped + 1:])
    assert reward == pytest.approx(5 / 6) and not info["success"]
    assert len(info["failed_checks"]) == 1 and "declined" in info["failed_checks"][0]
    assert info["collateral_damage"] == []


def test_wrong_email_content_fails_only_the_email_check(env, spec, play, space):
    task = spec("reschedule_meetings", 2, seed=5)
    plan = space.solve(task)
    send = next(i for i, a in enumerate(plan) if json.loads(a)["name"] == "send_email")
    call = json.loads(plan[send])
    call["arguments"]["body"] = "Moved everything, see calendar."
    plan[send] = json.dumps(call)
    _, reward, _, _, info = play(env, task, plan)
    assert 0 < reward < 1 and len(info["failed_checks"]) == 1 and "emailed" in info["failed_checks"][0]


def test_emailing_the_wrong_person_is_collateral(env, spec, play, space):
    task = spec("reschedule_meetings", 1, seed=5)
    plan = space.solve(task)
    extra = act("send_email", to=["someone@else.org"], subject="hi", body="hello")
    _, reward, _, _, info = play(env, task, _with_extra(plan, [extra]))
    assert reward == 0.0 and info["collateral_damage"][0].startswith("added emails/")


def test_reading_mail_is_not_collateral(env, spec, play, space):
    task = spec("spending_question", 1, seed=3)
    env.reset(options={"task": task})
    unread = [m["id"] for m in env.state["emails"].values() if not m["read"]]
    plan = space.solve(task)
    _, reward, _, _, info = play(env, task, _with_extra(plan, [act("read_email", email_id=m) for m in unread[:5]]))
    assert reward == 1.0 and info["success"]


def test_undoing_a_change_is_not_collateral(env, spec, play, space):
    task = spec("invite_company", 1, seed=3)
    plan = space.solve(task)
    undo = [act("add_contact", name="Temp Person", email="temp@example.com")]
    env.reset(options={"task": task})
    cid = f"c{len(env.state['contacts']) + 1}"
    undo.append(act("delete_contact", contact_id=cid))
    _, reward, _, _, info = play(env, task, _with_extra(plan, undo))
    assert reward == 1.0


def test_question_answers_are_graded_by_amount(env, spec, play, space):
    task = spec("spending_question", 2, seed=8)
    plan = space.solve(task)
    answer = json.loads(plan[-1])["arguments"]["answer"]
    for text, ok in [(answer, True), (f"${float(answer):,.2f} in total", True),
                     (f"{float(answer) + 1:.2f}", False), ("no idea", False)]:
        _, reward, _, _, info = play(env, task, plan[:-1] + [act("finish", answer=text)])
        assert info["success"] is ok, text


def test_finish_without_doing_anything_scores_zero(env, spec, play):
    for template in TEMPLATES:
        _, reward, term, _, info = play(env, spec(template, 1, seed=2), [act("finish")])
        assert term and reward == 0.0 and not info["success"], template


def test_parse_amount():
    assert parse_amount("$1,234.50") == 1234.5
    assert parse_amount("It was 42 dollars") == 42.0
    assert parse_amount("") is None and parse_amount(None) is None and parse_amount("none") is None


def test_the_new_times_may_be_split_over_several_emails(env, spec, play, space):
    task = spec("reschedule_meetings", 2, seed=5)
    plan = space.solve(task)
    send = next(i for i, a in enumerate(plan) if json.loads(a)["name"] == "send_email")
    call = json.loads(plan[send])
    lines = [line for line in call["arguments"]["body"].splitlines() if line.startswith("- ")]
    assert len(lines) >= 2
    split = [act("send_email", to=call["arguments"]["to"], subject="Moved", body=line) for line in lines]
    _, reward, _, _, info = play(env, task, plan[:send] + split + plan[send + 1:])
    assert reward == 1.0, info["failed_checks"]
