"""Briefing templates: each turns a generated world into a report the user asks for, and the rubric
that grades it.

A briefing has no single right final state or string: any wording that carries the facts counts.
What grades it is a rubric (rewards.rubric.Criterion, whose checks here take the report text):
criteria checked by code on the report and criteria only a judge can check (the report reads as
a clear note to the user), which carry no check function here.

Only facts the agent must look up earn points (a company, a phone number, which titles fall on
which day). Everything a report meets by saying nothing or everything is a gate
(Criterion.gate: any failing gate makes the score 0): the length bound, clarity, and "names no
distractor", where the distractors are every candidate of the same kind that is not the answer
(the other titles and subjects of the pools the world draws from, the other companies). A
constant report then earns only lucky guesses, and a report listing every candidate earns 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from agentgym.envs.tools.goals import Goal, call
from agentgym.envs.tools.state import EVENT_TITLES, MEMOS, MONTHS, World, dollars, parse_date, shift, weekday
from agentgym.envs.tools.state import COMPANIES, EMAIL_TOPICS, NEWSLETTERS, WEEKDAYS
from agentgym.rewards.rubric import Criterion, mentions

QUALITY = Criterion("clear", 1.0, "The report reads as a short, clear note to the user: complete sentences or a "
                    "tidy list, no tool-call syntax, nothing the user did not ask for.", gate=True)
MEETING_SUBJECTS = ("Contract draft", "Q3 numbers", "Venue options", "Hiring plan", "Offsite agenda",
                    "Pricing update", "Launch checklist")
AGENDA_TITLES = ("Board prep", "Supplier visit", "Team offsite", "Press briefing", "Audit kickoff", "Mentoring",
                 "Code review")
DIGEST_SUBJECTS = ("Invoice 114", "Trip photos", "Draft contract", "Lunch Friday?", "New address", "Slides v2",
                   "Budget question")
NUMBER_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve"
                                           .split())}


def words(text: str | None) -> int:
    return len((text or "").split())


def digits(text: str | None) -> str:
    return re.sub(r"\D", "", text or "")


def segments(text: str | None) -> list[str]:
    """The report's items: lines, `;`-separated parts and sentences."""
    return [p for p in re.split(r"[\n;]|\.\s", text or "") if p.strip()]


def on_day(text: str | None, title: str, day: str) -> bool:
    """Some item of the report names `title` with `day` and no other weekday (a line listing every
    weekday says nothing about when the meeting is)."""
    return any(mentions(p, title) and mentions(p, day) and not any(mentions(p, d) for d in WEEKDAYS if d != day)
               for p in segments(text))


def stated_counts(text: str | None) -> set[int]:
    """The numbers the report gives as a count of payments ("3 payments", "three transfers")."""
    number = "|".join([r"\d+", *NUMBER_WORDS])
    found = re.findall(rf"\b({number})\s+(?:\w+\s+)?(?:payments?|transfers?|transactions?|times)\b",
                       (text or "").lower())
    return {int(n) if n.isdigit() else NUMBER_WORDS[n] for n in found}


def names_no_distractor(name: str, what: str, candidates, answers) -> Criterion:
    """A gate: the report names none of `candidates` that is not one of `answers` (a candidate
    that occurs inside an answer cannot be told apart, so it does not count)."""
    wrong = sorted({c for c in candidates if c not in answers and not any(mentions(a, c) for a in answers)})
    return Criterion(name, 1.0, f"names no {what} that is not asked for ({', '.join(wrong)})",
                     lambda a: not any(mentions(a, w) for w in wrong), gate=True)


def at_most(limit: int) -> Criterion:
    return Criterion("short", 1.0, f"is at most {limit} words", lambda a: 0 < words(a) <= limit, gate=True)


@dataclass
class Briefing:
    goal: Goal
    criteria: list[Criterion]  # the rubric: code checks plus judge-only criteria


@dataclass(frozen=True)
class Template:
    name: str
    setup: Callable[[World, int], Briefing]
    unseen: bool = False


def _rubric_goal(instruction: str, plan: list[dict], criteria: list[Criterion]) -> Briefing:
    """The env's own grade is the code-checkable part of the rubric, unweighted per check, as a
    tool-use Goal over the answer (the gates as the Goal's gates); the judge-only criteria stay
    for a judge."""
    facts = [c for c in criteria if c.check is not None and not c.gate]
    gates = [c for c in criteria if c.check is not None and c.gate]

    def checks(initial, final, answer):
        return [(c.description, bool(c.check(answer))) for c in facts]

    def gate_checks(initial, final, answer):
        return [(c.description, bool(c.check(answer))) for c in gates]

    return Briefing(Goal(instruction, plan, checks, gates=gate_checks), criteria)


def meeting_brief(world: World, level: int) -> Briefing:
    rng, today = world.rng, world.today
    p, other = world.sample_people(2)
    day = shift(today, int(rng.integers(1, 6)))
    world.add_event(str(rng.choice(EVENT_TITLES)), day, "10:00", 60, [p.email])
    subjects = [str(s) for s in rng.choice(MEETING_SUBJECTS, size=2 + level, replace=False)]
    for k, subject in enumerate(subjects):  # the first is the newest
        world.add_email(p.email, subject, f"Hi {world.user_first}, see attached.\n{p.first}", shift(today, -1 - 2 * k))
    world.add_email(other.email, "Re: " + subjects[0], "Forwarding this.", today)  # a newer one, someone else
    limit = 60 + 20 * level
    criteria = [
        Criterion("company", 2.0, f"says {p.first} works at {p.company}", lambda a: mentions(a, p.company)),
        Criterion("phone", 2.0, f"gives the phone number {p.phone}", lambda a: digits(p.phone) in digits(a)),
        Criterion("last_email", 2.0, f"names the subject of {p.first}'s latest email, '{subjects[0]}'",
                  lambda a: mentions(a, subjects[0])),
        names_no_distractor("only_latest", "other email subject", MEETING_SUBJECTS, [subjects[0]]),
        names_no_distractor("one_company", "other company", [c for c, _ in COMPANIES], [p.company]),
        at_most(limit),
        QUALITY,
    ]
    answer = (f"You meet {p.name} on {weekday(day)} {day}. {p.first} works at {p.company}, phone {p.phone}. "
              f"Their latest email to you was about '{subjects[0]}'.")
    plan = [call("search_contacts", query=p.name), call("list_emails", sender=p.email), call("finish", answer=answer)]
    instruction = (f"I have a meeting with {p.name} soon. Write me a short brief (at most {limit} words): their "
                   "company, their phone number and the subject of the last email they sent me. Call finish with "
                   "the brief as the answer.")
    return _rubric_goal(instruction, plan, criteria)


def week_agenda(world: World, level: int) -> Briefing:
    rng, today = world.rng, world.today
    monday = shift(today, 7)
    friday = shift(monday, 4)
    titles = [str(t) for t in rng.choice(AGENDA_TITLES, size=2 + level, replace=False)]
    for k, title in enumerate(titles):
        world.add_event(title, shift(monday, int(rng.integers(0, 5))), f"{9 + k:02d}:00", 30,
                        [q.email for q in world.sample_people(1)])
    outside = "Dentist" if level < 3 else "Car service"
    world.add_event(outside, shift(monday, 7 + int(rng.integers(0, 5))), "08:00", 60, [])
    week = sorted((e for e in world.state["events"].values() if monday <= e["date"] <= friday),
                  key=lambda e: (e["date"], e["start"]))
    limit = 15 * len(week) + 20
    criteria = [Criterion(f"event_{k}", 1.0, f"lists '{e['title']}' on {weekday(e['date'])}",
                          lambda a, e=e: on_day(a, e["title"], weekday(e["date"])))
                for k, e in enumerate(week)]
    criteria += [names_no_distractor("in_range", "meeting outside next week",
                                     AGENDA_TITLES + EVENT_TITLES + ("Dentist", "Car service"), [e["title"] for e in week]),
                 at_most(limit), QUALITY]
    answer = "Next week: " + "; ".join(f"{weekday(e['date'])} {e['start']} {e['title']}" for e in week) + "."
    plan = [call("list_events", start_date=monday, end_date=friday), call("finish", answer=answer)]
    instruction = (f"Write me an agenda of my meetings next week, Monday {monday} to Friday {friday}: for each, the "
                   f"day and the title (at most {limit} words). Call finish with the agenda as the answer.")
    return _rubric_goal(instruction, plan, criteria)


def spending_summary(world: World, level: int) -> Briefing:
    rng, today = world.rng, world.today
    p, q = world.sample_people(2)
    first = parse_date(today).replace(day=1)
    start = shift(first.isoformat(), -1)[:8] + "01"
    end = shift(first.isoformat(), -1)
    amounts = [int(a) for a in rng.choice(np.arange(600, 9_000, 7), size=level + 1, replace=False)]
    for k, amount in enumerate(amounts):
        world.add_transaction(p, -amount, str(rng.choice(MEMOS)), shift(start, 2 + 5 * k))
    world.add_transaction(p, 1_500, "paying you back", shift(start, 3))
    world.add_transaction(q, -int(rng.integers(500, 5_000)), "taxi", shift(start, 4))
    world.add_transaction(p, -int(rng.integers(500, 5_000)), "lunch", shift(start, -3))
    sent = [-t["amount"] for t in world.state["transactions"].values()
            if t["counterparty"] == p.email and t["amount"] < 0 and start <= t["date"] <= end]
    total, largest, count = sum(sent), max(sent), len(sent)
    month = f"{MONTHS[parse_date(start).month - 1]} {start[:4]}"
    num = lambda cents: f"{cents / 100:.2f}"  # noqa: E731
    criteria = [
        Criterion("count", 1.0, f"says there were {count} payments (and gives no other count)",
                  lambda a: stated_counts(a) == {count}),
        Criterion("total", 2.0, f"gives the total {dollars(total)}", lambda a: num(total) in (a or "").replace(",", "")),
        Criterion("largest", 1.0, f"gives the largest payment {dollars(largest)}",
                  lambda a: num(largest) in (a or "").replace(",", "")),
        at_most(60),
        QUALITY,
    ]
    answer = (f"In {month} you sent {p.name} {count} payments, ${num(total)} in total; the largest was "
              f"${num(largest)}.")
    plan = [call("search_contacts", query=p.name),
            call("list_transactions", counterparty=p.email, start_date=start, end_date=end),
            call("finish", answer=answer)]
    instruction = (f"Summarize the money I sent to {p.name} in {month}: how many payments, the total and the largest "
                   "one, in dollars (at most 60 words). Call finish with the summary as the answer.")
    return _rubric_goal(instruction, plan, criteria)


def unread_digest(world: World, level: int) -> Briefing:
    rng, today = world.rng, world.today
    people = world.sample_people(2 + level)
    subjects = [str(s) for s in rng.choice(DIGEST_SUBJECTS, size=len(people), replace=False)]
    for p, subject in zip(people, subjects):
        world.add_email(p.email, subject, f"Hi {world.user_first}, a quick note.\n{p.first}", today, read=False)
    world.add_email(people[0].email, "Old thread", "Already read.", shift(today, -3), read=True)
    unread = sorted((m for m in world.state["emails"].values() if m["folder"] == "inbox" and not m["read"]),
                    key=lambda m: m["id"])
    criteria = [Criterion(f"mail_{k}", 1.0, f"lists the unread email '{m['subject']}'",
                          lambda a, s=m["subject"]: mentions(a, s)) for k, m in enumerate(unread)]
    candidates = DIGEST_SUBJECTS + tuple(t for t, _ in EMAIL_TOPICS) + \
        tuple(f"{t}: this week's picks" for t, _ in NEWSLETTERS) + ("Old thread",)
    criteria += [names_no_distractor("read_left_out", "email that is read or not there", candidates,
                                     [m["subject"] for m in unread]), QUALITY]
    answer = "Unread: " + "; ".join(f"{m['from'].split('@')[0]}: {m['subject']}" for m in unread) + "."
    plan = [call("list_emails", unread_only=True), call("finish", answer=answer)]
    instruction = ("Give me a digest of my unread emails: who wrote each and its subject. Call finish with the "
                   "digest as the answer.")
    return _rubric_goal(instruction, plan, criteria)




TRAIN_TEMPLATES = [Template("meeting_brief", meeting_brief), Template("week_agenda", week_agenda),
                   Template("spending_summary", spending_summary)]
UNSEEN_TEMPLATES = [Template("unread_digest", unread_digest, unseen=True)]
