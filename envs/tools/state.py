"""The world of the tool-use environment: one user's apps, generated from a task seed.

The state is a plain JSON-able dict of collections (`contacts`, `events`, `emails`, `files`,
`account`, `transactions`, `requests`, `shopping`), each a dict from record id to record, plus
the fixed `today` and `user`. Plain dicts keep three things cheap and exact: hashing the state
for GiGPO anchors, copying it at reset, and diffing the initial against the final state for
grading (which records were added, removed or changed).
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

COLLECTIONS = ("contacts", "events", "emails", "files", "account", "transactions", "requests", "shopping")

# Fields whose changes are side effects of looking, not of acting: reading an email marks it
# read. Grading ignores them so that an agent is never punished for reading its mail.
BENIGN_FIELDS = {"emails": frozenset({"read"})}

FIRST_NAMES = (
    "Dana", "Omar", "Priya", "Lucas", "Mei", "Tomas", "Aisha", "Noah", "Ingrid", "Kofi", "Sofia", "Hiro",
    "Leila", "Mateo", "Greta", "Ravi", "Chloe", "Emeka", "Yara", "Felix", "Nadia", "Bruno", "Anya", "Idris",
    "Clara", "Jonas", "Zara", "Pavel", "Lina", "Rafael", "Elif", "Oscar", "Maya", "Tariq", "Vera", "Diego",
)
LAST_NAMES = (
    "Ortiz", "Haddad", "Nair", "Moreau", "Chen", "Novak", "Bello", "Fischer", "Larsen", "Mensah", "Rossi",
    "Tanaka", "Karimi", "Silva", "Weber", "Iyer", "Dubois", "Okafor", "Aziz", "Brandt", "Petrova", "Costa",
    "Sato", "Quinn", "Holm", "Varga", "Lindqvist", "Reyes", "Kaya", "Byrne",
)
COMPANIES = (
    ("Brightlane", "brightlane.com"), ("Northwind Labs", "northwind.io"), ("Copperleaf", "copperleaf.org"),
    ("Bluefin Analytics", "bluefin.ai"), ("Maple & Stone", "maplestone.co"), ("Quartz Health", "quartzhealth.com"),
    ("Kestrel Logistics", "kestrel.net"), ("Oakridge Studio", "oakridge.design"),
)
USER_NAMES = ("Alex Kim", "Sam Rivera", "Jordan Lee", "Robin Patel", "Casey Morgan", "Taylor Brooks")
EVENT_TITLES = (
    "Project sync", "Budget review", "Design critique", "1:1", "Quarterly planning", "Client call",
    "Hiring debrief", "Roadmap review", "Lunch", "Coffee chat", "Demo prep", "Retrospective",
    "Vendor meeting", "Onboarding session", "Strategy workshop", "Status update",
)
EMAIL_TOPICS = (
    ("Notes from today", "Here are my notes from today's discussion. Let me know if I missed anything."),
    ("Quick question", "Do you have a minute this week to go over the draft?"),
    ("Slides", "I uploaded the slides to the shared folder."),
    ("Travel plans", "I will be away from the 12th to the 16th, back online after that."),
    ("Invoice", "Please find the invoice details below. Payment is due end of month."),
    ("Weekend", "Are we still on for the hike on Saturday?"),
    ("Book recommendation", "You should read 'The Quiet Orbit', I think you'd like it."),
    ("Re: proposal", "Looks good to me, ship it."),
)
NEWSLETTERS = (("The Daily Brief", "news@dailybrief.com"), ("Deal Hunter", "offers@dealhunter.shop"),
               ("Garden Monthly", "hello@gardenmonthly.org"))
GROCERIES = (
    "eggs", "milk", "bread", "apples", "rice", "coffee", "butter", "tomatoes", "onions", "cheese", "yogurt",
    "pasta", "bananas", "spinach", "olive oil", "chicken", "lemons", "flour", "sugar", "tea", "carrots", "beans",
)
MEMOS = ("dinner", "concert tickets", "taxi", "groceries", "rent share", "gift", "lunch", "books", "utilities")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    phone: str
    company: str

    @property
    def first(self) -> str:
        return self.name.split()[0]

    def contact(self, cid: str) -> dict:
        return {"id": cid, "name": self.name, "email": self.email, "phone": self.phone, "company": self.company}


# --- dates, money, ids ----------------------------------------------------------------------------
def parse_date(text: str) -> dt.date:
    return dt.date.fromisoformat(text)


def shift(date: str, days: int) -> str:
    return (parse_date(date) + dt.timedelta(days=days)).isoformat()


def weekday(date: str) -> str:
    return WEEKDAYS[parse_date(date).weekday()]


def minutes(hhmm: str) -> int:
    h, m = hhmm.split(":")
    return int(h) * 60 + int(m)


def hhmm(total: int) -> str:
    return f"{total // 60:02d}:{total % 60:02d}"


def dollars(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    return f"{sign}${abs(cents) // 100:,}.{abs(cents) % 100:02d}"


def new_id(collection: dict, prefix: str) -> str:
    """The next free id `prefix<N>`: one more than the largest in use, so that adding then
    removing a record gives back exactly the same state (and the same anchor)."""
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)$")
    used = [int(m.group(1)) for key in collection if (m := pattern.match(key))]
    return f"{prefix}{max(used, default=0) + 1}"


# --- hashing and diffs -----------------------------------------------------------------------------
def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


PARTS = ("today", "user") + COLLECTIONS


def part_hash(state: dict, name: str) -> str:
    return hashlib.sha256(canonical(state[name]).encode()).hexdigest()


def anchor_of(parts: dict[str, str]) -> str:
    """The state's anchor from the hashes of its parts, so that a step re-hashes only the
    collections it changed."""
    return hashlib.sha256("".join(parts[name] for name in PARTS).encode()).hexdigest()[:16]


def state_hash(state: dict) -> str:
    return anchor_of({name: part_hash(state, name) for name in PARTS})


@dataclass(frozen=True)
class Change:
    """One record that differs between two states: added (before is None), removed (after is
    None) or changed (in fields other than the benign ones)."""

    collection: str
    key: str
    before: dict | None
    after: dict | None

    @property
    def kind(self) -> str:
        return "added" if self.before is None else "removed" if self.after is None else "changed"

    def __str__(self) -> str:
        return f"{self.kind} {self.collection}/{self.key}"


def _strip_benign(collection: str, record: dict) -> dict:
    benign = BENIGN_FIELDS.get(collection)
    return {k: v for k, v in record.items() if k not in benign} if benign else record


def diff(before: dict, after: dict, collections=COLLECTIONS) -> list[Change]:
    changes = []
    for name in collections:
        old, new = before[name], after[name]
        if old == new:  # C-speed equality first: most collections are untouched
            continue
        for key in old.keys() | new.keys():
            a, b = old.get(key), new.get(key)
            if a == b:
                continue
            if a is None or b is None or _strip_benign(name, a) != _strip_benign(name, b):
                changes.append(Change(name, key, a, b))
    changes.sort(key=lambda c: (c.collection, c.key))
    return changes


# --- the generated world ---------------------------------------------------------------------------
class World:
    """Builds the base state from a seed and keeps the cast of people for task templates.

    Templates add the records their goal needs (e.g. three meetings with Dana next week) with
    the helpers below, drawing from the same generator, so the initial state is a function of
    the TaskSpec alone."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        first = rng.permutation(len(FIRST_NAMES))
        last = rng.permutation(len(LAST_NAMES))
        self.people: list[Person] = []
        phones = rng.choice(9000, size=len(FIRST_NAMES), replace=False) + 1000
        for i in range(len(FIRST_NAMES)):
            name = f"{FIRST_NAMES[first[i]]} {LAST_NAMES[last[i % len(LAST_NAMES)]]}"
            company, domain = COMPANIES[int(rng.integers(len(COMPANIES)))]
            email = name.lower().replace(" ", ".") + "@" + domain
            self.people.append(Person(name, email, f"+1-555-{phones[i]:04d}", company))
        # Mondays of 2026: "next week" and weekday names are then unambiguous in instructions.
        today = dt.date(2026, 1, 5) + dt.timedelta(weeks=int(rng.integers(0, 44)))
        user_name = USER_NAMES[int(rng.integers(len(USER_NAMES)))]
        self.state: dict[str, Any] = {
            "today": today.isoformat(),
            "user": {"name": user_name, "email": user_name.lower().replace(" ", ".") + "@mail.example"},
            **{name: {} for name in COLLECTIONS},
        }
        self.state["account"]["main"] = {"id": "main", "balance": int(rng.integers(150_000, 600_000))}
        # The first 24 people are contacts; the rest are acquaintances not yet in the address book.
        self.contacts = self.people[:24]
        self.strangers = self.people[24:]
        for p in self.contacts:
            self.add_contact(p)
        self._fill_background()

    # -- background clutter that templates' goals must not disturb --
    def _fill_background(self) -> None:
        rng, today = self.rng, self.today
        for _ in range(int(rng.integers(10, 16))):
            self.add_event(self._pick(EVENT_TITLES), shift(today, int(rng.integers(-10, 25))),
                           hhmm(int(rng.integers(16, 34)) * 30), 30 * int(rng.integers(1, 4)),
                           [p.email for p in self.sample_people(int(rng.integers(1, 4)))])
        for _ in range(int(rng.integers(8, 14))):
            subject, body = self._pick(EMAIL_TOPICS)
            sender = self._pick(self.people)
            self.add_email(sender.email, subject, f"Hi {self.user_first},\n\n{body}\n\n{sender.first}",
                           shift(today, -int(rng.integers(0, 30))), read=bool(rng.integers(2)))
        for title, address in NEWSLETTERS[:2]:
            for _ in range(int(rng.integers(1, 3))):
                self.add_email(address, f"{title}: this week's picks", "Top stories and offers of the week.",
                               shift(today, -int(rng.integers(0, 30))), read=False)
        for _ in range(int(rng.integers(6, 12))):
            p = self._pick(self.people)
            amount = int(rng.integers(500, 15_000))
            self.add_transaction(p, -amount if rng.integers(3) else amount, self._pick(MEMOS),
                                 shift(today, -int(rng.integers(1, 90))))
        for name in rng.choice(GROCERIES, size=int(rng.integers(2, 5)), replace=False):
            self.add_item(str(name), int(rng.integers(1, 4)), checked=bool(rng.integers(3) == 0))
        self.add_file("/documents/notes.txt", "Ideas:\n- learn the cello\n- plan the spring trip\n")
        self.add_file("/documents/passwords-hint.txt", "Ask the password manager, never write them down.\n")
        self.add_file("/downloads/photo-001.jpg", "<binary image data>")

    # -- helpers used by templates --
    @property
    def today(self) -> str:
        return self.state["today"]

    @property
    def user_first(self) -> str:
        return self.state["user"]["name"].split()[0]

    def _pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def sample_people(self, n: int, pool: list[Person] | None = None, exclude=()) -> list[Person]:
        pool = [p for p in (pool if pool is not None else self.contacts) if p not in exclude]
        return [pool[i] for i in self.rng.choice(len(pool), size=n, replace=False)]

    def add_contact(self, p: Person) -> str:
        contacts = self.state["contacts"]
        cid = new_id(contacts, "c")
        contacts[cid] = p.contact(cid)
        return cid

    def add_event(self, title: str, date: str, start: str, length: int, attendees: list[str]) -> str:
        events = self.state["events"]
        eid = new_id(events, "ev")
        events[eid] = {"id": eid, "title": title, "date": date, "start": start,
                       "end": hhmm(minutes(start) + length), "attendees": sorted(set(attendees))}
        return eid

    def add_email(self, sender: str, subject: str, body: str, date: str, read: bool = False,
                  folder: str = "inbox", to: list[str] | None = None) -> str:
        emails = self.state["emails"]
        mid = new_id(emails, "m")
        emails[mid] = {"id": mid, "folder": folder, "from": sender, "to": to or [self.state["user"]["email"]],
                       "subject": subject, "body": body, "date": date, "read": read}
        return mid

    def add_file(self, path: str, content: str) -> None:
        self.state["files"][path] = {"path": path, "content": content}

    def add_transaction(self, p: Person, amount: int, memo: str, date: str) -> str:
        txs = self.state["transactions"]
        tid = new_id(txs, "t")
        txs[tid] = {"id": tid, "date": date, "counterparty": p.email, "name": p.name, "amount": amount, "memo": memo}
        return tid

    def add_request(self, p: Person, amount: int, memo: str, status: str = "pending") -> str:
        reqs = self.state["requests"]
        rid = new_id(reqs, "r")
        reqs[rid] = {"id": rid, "from": p.email, "name": p.name, "amount": amount, "memo": memo, "status": status}
        return rid

    def add_item(self, name: str, quantity: int, checked: bool = False) -> str:
        items = self.state["shopping"]
        sid = new_id(items, "s")
        items[sid] = {"id": sid, "name": name, "quantity": quantity, "checked": checked}
        return sid

    def contact_id(self, p: Person) -> str:
        return next(c["id"] for c in self.state["contacts"].values() if c["email"] == p.email)

    def snapshot(self) -> dict:
        return copy.deepcopy(self.state)
