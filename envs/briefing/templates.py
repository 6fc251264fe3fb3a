"""Briefing templates: each turns a generated world into a report the user asks for, and the rubric
that grades it.

A briefing has no single right final state or string: any wording that carries the facts counts.
What grades it is a rubric (rewards.rubric.Criterion, whose checks here take the report text):
criteria checked by code on the report
(a fact is mentioned, a distractor is not, the length bound holds) and criteria only a judge can
check (the report reads as a clear note to the user), which carry no check function here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from agentgym.envs.tools.goals import Goal, call
from agentgym.envs.tools.state import EVENT_TITLES, MEMOS, MONTHS, World, dollars, parse_date, shift, weekday
from agentgym.rewards.rubric import Criterion

QUALITY = Criterion("clear", 1.0, "The report reads as a short, clear note to the user: complete sentences or a "
                    "tidy list, no tool-call syntax, nothing the user did not ask for.")


def words(text: str | None) -> int:
    return len((text or "").split())


def mentions(text: str | None, fact: str) -> bool:
    """Case- and spacing-insensitive containment."""
    norm = lambda s: " ".join(s.lower().split())  # noqa: E731
    return norm(fact) in norm(text or "")


def digits(text: str | None) -> str:
    return re.sub(r"\D", "", text or "")


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
    tool-use Goal over the answer; the judge-only criteria stay for a judge."""
    coded = [c for c in criteria if c.check is not None]

    def checks(initial, final, answer):
        return [(c.description, bool(c.check(answer))) for c in coded]

    return Briefing(Goal(instruction, plan, checks), criteria)


def meeting_brief(world: World, level: int) -> Briefing:
    rng, today = world.rng, world.today
    p, other = world.sample_people(2)
    day = shift(today, int(rng.integers(1, 6)))
    world.add_event(str(rng.choice(EVENT_TITLES)), day, "10:00", 60, [p.email])
    subjects = [str(s) for s in rng.choice(["Contract draft", "Q3 numbers", "Venue options", "Hiring plan",
                                            "Offsite agenda", "Pricing update", "Launch checklist"],
                                           size=2 + level, replace=False)]
    for k, subject in enumerate(subjects):  # the first is the newest
        world.add_email(p.email, subject, f"Hi {world.user_first}, see attached.\n{p.first}", shift(today, -1 - 2 * k))
    world.add_email(other.email, "Re: " + subjects[0], "Forwarding this.", today)  # a newer one, someone else
    limit = 60 + 20 * level
    criteria = [
        Criterion("company", 2.0, f"says {p.first} works at {p.company}", lambda a: mentions(a, p.company)),
        Criterion("phone", 2.0, f"gives the phone number {p.phone}", lambda a: digits(p.phone) in digits(a)),
        Criterion("last_email", 2.0, f"names the subject of {p.first}'s latest email, '{subjects[0]}'",
                  lambda a: mentions(a, subjects[0])),
        Criterion("only_latest", 1.0, "does not present an older email as the latest",
                  lambda a: not any(mentions(a, s) for s in subjects[1:])),
        Criterion("short", 1.0, f"is at most {limit} words", lambda a: 0 < words(a) <= limit),
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
    titles = [str(t) for t in rng.choice(["Board prep", "Supplier visit", "Team offsite", "Press briefing",
                                          "Audit kickoff", "Mentoring", "Code review"], size=2 + level, replace=False)]
    for k, title in enumerate(titles):
        world.add_event(title, shift(monday, int(rng.integers(0, 5))), f"{9 + k:02d}:00", 30,
                        [q.email for q in world.sample_people(1)])
    outside = "Dentist" if level < 3 else "Car service"
    world.add_event(outside, shift(monday, 7 + int(rng.integers(0, 5))), "08:00", 60, [])
    week = sorted((e for e in world.state["events"].values() if monday <= e["date"] <= friday),
                  key=lambda e: (e["date"], e["start"]))
    limit = 15 * len(week) + 20
    criteria = [Criterion(f"event_{k}", 1.0, f"lists '{e['title']}' on {weekday(e['date'])}",
                          lambda a, e=e: mentions(a, e["title"]) and mentions(a, weekday(e["date"])))
                for k, e in enumerate(week)]
    criteria += [Criterion("in_range", 1.0, f"leaves out '{outside}', which is the week after",
                           lambda a: not mentions(a, outside)),
                 Criterion("short", 1.0, f"is at most {limit} words", lambda a: 0 < words(a) <= limit), QUALITY]
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
        Criterion("count", 1.0, f"says there were {count} payments",
                  lambda a: re.search(rf"\b{count}\b", a or "") is not None),
        Criterion("total", 2.0, f"gives the total {dollars(total)}", lambda a: num(total) in (a or "").replace(",", "")),
        Criterion("largest", 1.0, f"gives the largest payment {dollars(largest)}",
                  lambda a: num(largest) in (a or "").replace(",", "")),
        Criterion("short", 1.0, "is at most 60 words", lambda a: 0 < words(a) <= 60),
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
    subjects = [str(s) for s in rng.choice(["Invoice 114", "Trip photos", "Draft contract", "Lunch Friday?",
                                            "New address", "Slides v2", "Budget question"],
                                           size=len(people), replace=False)]
    for p, subject in zip(people, subjects):
        world.add_email(p.email, subject, f"Hi {world.user_first}, a quick note.\n{p.first}", today, read=False)
    world.add_email(people[0].email, "Old thread", "Already read.", shift(today, -3), read=True)
    unread = sorted((m for m in world.state["emails"].values() if m["folder"] == "inbox" and not m["read"]),
                    key=lambda m: m["id"])
    criteria = [Criterion(f"mail_{k}", 1.0, f"lists the unread email '{m['subject']}'",
                          lambda a, s=m["subject"]: mentions(a, s)) for k, m in enumerate(unread)]
    criteria += [Criterion("read_left_out", 1.0, "leaves out emails already read ('Old thread')",
                           lambda a: not mentions(a, "Old thread")), QUALITY]
    answer = "Unread: " + "; ".join(f"{m['from'].split('@')[0]}: {m['subject']}" for m in unread) + "."
    plan = [call("list_emails", unread_only=True), call("finish", answer=answer)]
    instruction = ("Give me a digest of my unread emails: who wrote each and its subject. Call finish with the "
                   "digest as the answer.")
    return _rubric_goal(instruction, plan, criteria)




TRAIN_TEMPLATES = [Template("meeting_brief", meeting_brief), Template("week_agenda", week_agenda),
                   Template("spending_summary", spending_summary)]
UNSEEN_TEMPLATES = [Template("unread_digest", unread_digest, unseen=True)]
