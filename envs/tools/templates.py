"""Task templates seen in training. Each `setup(world, level)` adds the records its goal needs
to a generated world (with distractors that share names, dates or senders) and returns the
Goal. Targets are recomputed from the state where background clutter could add to them (a
random background meeting with Dana next week must be moved too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from agentgym.envs.tools.goals import Goal, addressed_to, call, new_records, new_sent, parse_amount, same
from agentgym.envs.tools.state import (COMPANIES, EVENT_TITLES, GROCERIES, MEMOS, MONTHS, NEWSLETTERS, World,
                                       dollars, hhmm, parse_date, shift, weekday)


@dataclass(frozen=True)
class Template:
    name: str
    apps: tuple[str, ...]
    setup: Callable[[World, int], Goal]
    unseen: bool = False  # held out of training: only in the heldout_unseen split


def _time(world: World, lo: int = 18, hi: int = 34) -> str:
    """A start time on the half hour between lo/2 and hi/2 o'clock."""
    return hhmm(int(world.rng.integers(lo, hi)) * 30)


# --- calendar + email ---------------------------------------------------------------------------
def reschedule_meetings(world: World, level: int) -> Goal:
    rng, today = world.rng, world.today
    p = world.sample_people(1)[0]
    monday = shift(today, 7)
    target_day = int(rng.integers(0, 5))
    target = shift(monday, target_day)
    days = rng.choice([d for d in range(5) if d != target_day], size=level, replace=False)
    titles = rng.choice(EVENT_TITLES, size=level + 2, replace=False)
    for title, d in zip(titles, days):
        guests = [p.email] + [o.email for o in world.sample_people(int(rng.integers(0, 2)), exclude=(p,))]
        world.add_event(str(title), shift(monday, int(d)), _time(world), 30 * int(rng.integers(1, 4)), guests)
    # Distractors: the same person this week and the week after; someone else next week.
    world.add_event(str(titles[-1]), shift(today, int(rng.integers(1, 5))), _time(world), 30, [p.email])
    world.add_event(str(titles[-2]), shift(monday, 7 + int(rng.integers(0, 5))), _time(world), 60, [p.email])
    other = world.sample_people(1, exclude=(p,))[0]
    world.add_event("Planning", shift(monday, int(days[0])), _time(world), 30, [other.email])

    sunday = shift(monday, 6)
    moved = sorted((e for e in world.state["events"].values()
                    if monday <= e["date"] <= sunday and p.email in e["attendees"]),
                   key=lambda e: (e["date"], e["start"]))
    ids = {e["id"] for e in moved}
    originals = {e["id"]: dict(e) for e in moved}

    def checks(initial, final, answer):
        out = []
        for eid, before in originals.items():
            after = final["events"].get(eid)
            ok = after is not None and after["date"] == target and all(
                after[k] == before[k] for k in ("title", "start", "end", "attendees"))
            out.append((f"'{before['title']}' moved to {target}, same times", ok))
        # One email or several: what counts is that together they give the date and every time.
        text = "\n".join(m["subject"] + "\n" + m["body"] for m in new_sent(initial, final)
                         if addressed_to(m, p.email))
        told = bool(text) and (target in text or weekday(target).lower() in text.lower()) \
            and all(e["start"] in text for e in moved)
        out.append((f"emailed {p.first} the new date and times", told))
        return out

    def permits(c):
        if c.collection == "events":
            return c.key in ids
        return c.collection == "emails" and c.kind == "added" and c.after["folder"] == "sent" \
            and addressed_to(c.after, p.email)

    body = "\n".join(f"- {e['title']}: {target} ({weekday(target)}) at {e['start']}" for e in moved)
    plan = [call("search_contacts", query=p.name),
            call("list_events", start_date=monday, end_date=sunday, attendee=p.email)]
    plan += [call("update_event", event_id=e["id"], date=target) for e in moved if e["date"] != target]
    plan += [call("send_email", to=[p.email], subject="New meeting times",
                  body=f"Hi {p.first},\n\nI moved our meetings next week to {weekday(target)}:\n{body}\n"),
             call("finish")]
    instruction = (f"Move every meeting I have with {p.name} next week to {weekday(target)} ({target}), keeping "
                   f"their start and end times, then email {p.first} the new date and start time of each meeting.")
    return Goal(instruction, plan, checks, permits)


# --- contacts + calendar ------------------------------------------------------------------------
def invite_company(world: World, level: int) -> Goal:
    rng = world.rng
    counts = {c: sum(p.company == c for p in world.contacts) for c, _ in COMPANIES}
    present = [c for c, n in counts.items() if n > 0]
    company = min(present, key=lambda c: (abs(counts[c] - (level + 1)), c))
    guests = sorted(p.email for p in world.contacts if p.company == company)
    title = str(rng.choice(["Partnership kickoff", "Contract review", "Quarterly check-in", "Launch planning"]))
    date = shift(world.today, int(rng.integers(1, 12)))
    start = _time(world)
    end = hhmm(int(start[:2]) * 60 + int(start[3:]) + 30 * int(rng.integers(1, 4)))

    def created(initial, final):
        return [e for e in new_records(initial, final, "events") if same(e["title"], title)]

    def checks(initial, final, answer):
        events = created(initial, final)
        e = events[0] if len(events) == 1 else None
        user = final["user"]["email"]
        return [
            (f"exactly one event titled '{title}'", e is not None),
            (f"on {date}", e is not None and e["date"] == date),
            (f"from {start} to {end}", e is not None and (e["start"], e["end"]) == (start, end)),
            (f"everyone from {company} invited, nobody else",
             e is not None and {a.lower() for a in e["attendees"]} - {user} == set(guests)),
        ]

    def permits(c):
        return c.collection == "events" and c.kind == "added" and same(c.after["title"], title)

    plan = [call("search_contacts", query=company),
            call("create_event", title=title, date=date, start=start, end=end, attendees=guests), call("finish")]
    instruction = (f"Schedule a meeting titled '{title}' on {weekday(date)} {date} from {start} to {end} and "
                   f"invite everyone from {company} who is in my contacts.")
    return Goal(instruction, plan, checks, permits)


# --- bank -------------------------------------------------------------------------------------------
def pay_requests(world: World, level: int) -> Goal:
    rng = world.rng
    limit = int(rng.choice([30, 50, 75, 100]))
    people = world.sample_people(level + 3)
    for p in people[:2]:  # settled history, not to be touched
        world.add_request(p, int(rng.integers(500, 20_000)), str(rng.choice(MEMOS)),
                          status=str(rng.choice(["paid", "declined"])))
    pending = {}
    # `level` requests at or under the limit, then one above it (two at level 3).
    for i, p in enumerate(people[2:] + people[:int(level == 3)]):
        cents = int(rng.integers(limit * 100 + 1, limit * 300)) if i >= level else int(rng.integers(200, limit * 100))
        pending[world.add_request(p, cents, str(rng.choice(MEMOS)))] = cents
    paid = {rid for rid, cents in pending.items() if cents <= limit * 100}
    requesters = {world.state["requests"][rid]["from"] for rid in pending}
    total = sum(pending[rid] for rid in paid)

    def checks(initial, final, answer):
        out = []
        for rid, cents in pending.items():
            want = "paid" if rid in paid else "declined"
            out.append((f"request {rid} ({dollars(cents)}) {want}", final["requests"][rid]["status"] == want))
        out.append(("balance reduced by the paid requests",
                    final["account"]["main"]["balance"] == initial["account"]["main"]["balance"] - total))
        return out

    def permits(c):
        if c.collection == "requests":
            return c.key in pending and c.kind == "changed"
        if c.collection == "transactions":
            return c.kind == "added" and c.after["counterparty"] in requesters
        return c.collection == "account"

    plan = [call("list_payment_requests", status="pending")]
    plan += [call("pay_request" if rid in paid else "decline_request", request_id=rid) for rid in pending]
    plan += [call("finish")]
    instruction = (f"Go through my pending payment requests: pay every one of ${limit} or less and decline "
                   f"the ones above ${limit}.")
    return Goal(instruction, plan, checks, permits)


STORES = ("Corner Bistro", "Fresh Market", "City Books", "Hardware Hub", "Green Grocer")
PRICES = {"eggs": 450, "coffee": 1199, "cheese": 875, "bread": 399, "pasta": 249, "olive oil": 1350,
          "tea": 625, "lemons": 300, "butter": 525, "flour": 310}


def write_receipt(world: World, store: str, date: str, lines: list[tuple[str, int, int]]) -> tuple[str, int]:
    """A receipt file: (item, quantity, unit price in cents) lines and the total."""
    total = sum(q * cents for _, q, cents in lines)
    body = [store, f"Date: {date}", ""]
    body += [f"{name} x{q}  {q * cents / 100:.2f}" for name, q, cents in lines]
    body += ["", f"TOTAL  {total / 100:.2f}"]
    path = f"/receipts/{store.lower().replace(' ', '-')}-{date}.txt"
    world.add_file(path, "\n".join(body) + "\n")
    return path, total


def _receipt_lines(world: World, n: int, names=None) -> list[tuple[str, int, int]]:
    names = names if names is not None else [str(x) for x in world.rng.choice(sorted(PRICES), size=n, replace=False)]
    return [(name, int(world.rng.integers(1, 4)), PRICES.get(name, 275)) for name in names]


# --- files + bank -------------------------------------------------------------------------------
def reimburse_receipt(world: World, level: int) -> Goal:
    rng = world.rng
    p = world.sample_people(1)[0]
    stores = rng.choice(STORES, size=2, replace=False)
    date = shift(world.today, -int(rng.integers(1, 6)))
    path, total = write_receipt(world, str(stores[0]), date, _receipt_lines(world, level + 1))
    if level >= 2:
        write_receipt(world, str(stores[1]), shift(date, -1), _receipt_lines(world, 2))
    half = level == 3
    owed = (total + 1) // 2 if half else total
    memo = f"{stores[0]} receipt"

    def checks(initial, final, answer):
        txs = [t for t in new_records(initial, final, "transactions") if t["counterparty"].lower() == p.email]
        return [
            (f"paid {p.first} {dollars(owed)}", any(t["amount"] == -owed for t in txs)),
            (f"memo '{memo}'", any(same(t["memo"], memo) for t in txs)),
            ("balance reduced by exactly that", final["account"]["main"]["balance"]
             == initial["account"]["main"]["balance"] - owed),
        ]

    def permits(c):
        return c.collection == "account" or (
            c.collection == "transactions" and c.kind == "added" and c.after["counterparty"].lower() == p.email)

    share = "half of the total (rounded up to the cent)" if half else "the total"
    plan = [call("list_files", folder="/receipts"), call("read_file", path=path),
            call("search_contacts", query=p.name),
            call("send_payment", to=p.email, amount=round(owed / 100, 2), memo=memo), call("finish")]
    instruction = (f"{p.name} paid at {stores[0]} on {date}; the receipt is in /receipts. Send {p.first} "
                   f"{share} with the memo '{memo}'.")
    return Goal(instruction, plan, checks, permits)


# --- email + shopping ---------------------------------------------------------------------------
def shopping_from_email(world: World, level: int) -> Goal:
    rng = world.rng
    p, q = world.sample_people(2)
    occasion = str(rng.choice(["the barbecue", "Sunday brunch", "the book club", "the picnic"]))
    on_list = {i["name"] for i in world.state["shopping"].values()}
    names = [str(n) for n in rng.choice(sorted(set(GROCERIES) - on_list), size=level + 1, replace=False)]
    if level >= 2:  # one of them is already on the list, unchecked: its quantity goes up
        world.add_item(names[0], int(rng.integers(1, 3)))
    asked = {n: int(rng.integers(1, 5)) for n in names}
    lines = "\n".join(f"- {qty} x {n}" for n, qty in asked.items())
    mid = world.add_email(p.email, f"Shopping for {occasion}",
                          f"Hi {world.user_first},\n\ncould you pick these up for {occasion}?\n{lines}\n\n{p.first}",
                          shift(world.today, -1))
    if level >= 3:
        extra = "\n".join(f"- 2 x {n}" for n in rng.choice(GROCERIES, size=2, replace=False))
        world.add_email(q.email, "Shopping for the office party", f"We need:\n{extra}\n\n{q.first}", world.today)

    def unchecked(state, name):
        return sum(i["quantity"] for i in state["shopping"].values() if i["name"] == name and not i["checked"])

    def checks(initial, final, answer):
        return [(f"{n}: quantity {unchecked(initial, n) + qty} on the list",
                 unchecked(final, n) == unchecked(initial, n) + qty) for n, qty in asked.items()]

    def permits(c):
        if c.collection != "shopping":
            return False
        return (c.kind == "added" and c.after["name"] in asked) or (
            c.kind == "changed" and c.before["name"] in asked and not c.before["checked"])

    plan = [call("search_emails", query=f"Shopping for {occasion}"), call("read_email", email_id=mid)]
    plan += [call("add_shopping_item", name=n, quantity=qty) for n, qty in asked.items()]
    plan += [call("finish")]
    instruction = (f"{p.name} emailed me what to buy for {occasion}. Put all of it on my shopping list; if an "
                   "item is already on the list (not checked off), raise its quantity by the amount asked.")
    return Goal(instruction, plan, checks, permits)


# --- email + contacts ---------------------------------------------------------------------------
def update_phones(world: World, level: int) -> Goal:
    rng = world.rng
    people = world.sample_people(level)
    used = {c["phone"] for c in world.state["contacts"].values()}
    fresh = [x for x in (f"+1-555-{n:04d}" for n in rng.permutation(9000)[:40] + 1000) if x not in used]
    new_phone = {p.email: fresh[i] for i, p in enumerate(people)}
    mids = []
    for p in people:
        mids.append(world.add_email(p.email, "New phone number",
                                    f"Hi {world.user_first},\n\nI switched carriers, my new number is "
                                    f"{new_phone[p.email]}. The old one stops working Friday.\n\n{p.first}",
                                    shift(world.today, -int(rng.integers(0, 5)))))
    ids = {world.contact_id(p): p for p in people}
    originals = {cid: dict(world.state["contacts"][cid]) for cid in ids}

    def checks(initial, final, answer):
        out = []
        for cid, p in ids.items():
            c = final["contacts"].get(cid)
            ok = c is not None and c["phone"] == new_phone[p.email] and all(
                c[k] == originals[cid][k] for k in ("name", "email", "company"))
            out.append((f"{p.name}'s phone is {new_phone[p.email]}", ok))
        return out

    def permits(c):
        return c.collection == "contacts" and c.key in ids

    plan = [call("search_emails", query="New phone number")]
    plan += [call("read_email", email_id=m) for m in mids]
    plan += [call("update_contact", contact_id=cid, phone=new_phone[p.email]) for cid, p in ids.items()]
    plan += [call("finish")]
    instruction = ("Some of my contacts emailed me their new phone numbers (subject 'New phone number'). "
                   "Update their contact entries with the new numbers.")
    return Goal(instruction, plan, checks, permits)


# --- files + contacts ---------------------------------------------------------------------------
def contacts_from_file(world: World, level: int) -> Goal:
    rng = world.rng
    team = str(rng.choice(["design", "research", "events", "volunteers"]))
    newcomers = world.sample_people(level + 1, pool=world.strangers)
    known = world.sample_people(1 + int(level >= 2))
    rows = newcomers + known
    order = rng.permutation(len(rows))
    lines = ["name,email,phone,company"] + [f"{r.name},{r.email},{r.phone},{r.company}"
                                            for r in (rows[i] for i in order)]
    path = f"/documents/{team}-team.csv"
    world.add_file(path, "\n".join(lines) + "\n")
    wanted = {p.email: p for p in newcomers}

    def checks(initial, final, answer):
        out = []
        for p in newcomers:
            found = [c for c in final["contacts"].values() if c["email"].lower() == p.email]
            ok = len(found) == 1 and same(found[0]["name"], p.name) and found[0]["phone"] == p.phone \
                and same(found[0]["company"], p.company)
            out.append((f"{p.name} added once with phone and company", ok))
        return out

    def permits(c):
        return c.collection == "contacts" and c.kind == "added" and c.after["email"].lower() in wanted

    plan = [call("read_file", path=path)]
    plan += [call("search_contacts", query=r.email) for r in (rows[i] for i in order)]
    plan += [call("add_contact", name=p.name, email=p.email, phone=p.phone, company=p.company) for p in newcomers]
    plan += [call("finish")]
    instruction = (f"Add everyone listed in {path} who is not in my contacts yet (with their phone and company). "
                   "Don't create duplicates.")
    return Goal(instruction, plan, checks, permits)


# --- email --------------------------------------------------------------------------------------
def clean_newsletters(world: World, level: int) -> Goal:
    rng, today = world.rng, world.today
    title, address = NEWSLETTERS[int(rng.integers(len(NEWSLETTERS)))]
    cutoff = shift(today, -int(rng.integers(8, 15)))
    for _ in range(level + 1):
        world.add_email(address, f"{title}: issue", "This week's stories.", shift(cutoff, -int(rng.integers(1, 20))))
    world.add_email(address, f"{title}: latest issue", "Fresh stories.", shift(cutoff, int(rng.integers(0, 5))))
    p = world.sample_people(1)[0]
    world.add_email(p.email, f"Fwd: {title}", "Thought you'd like this one.", shift(cutoff, -3))
    old = sorted(m["id"] for m in world.state["emails"].values()
                 if m["folder"] == "inbox" and m["from"] == address and m["date"] < cutoff)

    def checks(initial, final, answer):
        return [(f"email {mid} deleted", final["emails"].get(mid, {"folder": "trash"})["folder"] == "trash")
                for mid in old]

    def permits(c):
        return c.collection == "emails" and c.key in old

    plan = [call("list_emails", sender=address)] + [call("delete_email", email_id=mid) for mid in old]
    plan += [call("finish")]
    instruction = f"Delete every email from {title} <{address}> in my inbox dated before {cutoff}."
    return Goal(instruction, plan, checks, permits)


# --- bank, question answering -------------------------------------------------------------------
def spending_question(world: World, level: int) -> Goal:
    rng, today = world.rng, world.today
    p, q = world.sample_people(2)
    first_of_month = parse_date(today).replace(day=1)
    month_start = shift(first_of_month.isoformat(), -1)[:8] + "01"
    month_end = shift(first_of_month.isoformat(), -1)
    days = (parse_date(month_end) - parse_date(month_start)).days
    for _ in range(level + 1):
        world.add_transaction(p, -int(rng.integers(500, 9_000)), str(rng.choice(MEMOS)),
                              shift(month_start, int(rng.integers(0, days + 1))))
    world.add_transaction(p, int(rng.integers(500, 5_000)), "paying you back", shift(month_start, 3))
    world.add_transaction(p, -int(rng.integers(500, 5_000)), "lunch", shift(month_start, -2))
    world.add_transaction(q, -int(rng.integers(500, 5_000)), "taxi", shift(month_start, 5))
    expected = -sum(t["amount"] for t in world.state["transactions"].values()
                    if t["counterparty"] == p.email and t["amount"] < 0 and month_start <= t["date"] <= month_end)
    month = f"{MONTHS[parse_date(month_start).month - 1]} {month_start[:4]}"

    def checks(initial, final, answer):
        got = parse_amount(answer)
        return [(f"answered {expected / 100:.2f}", got is not None and abs(got * 100 - expected) < 0.5)]

    plan = [call("search_contacts", query=p.name),
            call("list_transactions", counterparty=p.email, start_date=month_start, end_date=month_end),
            call("finish", answer=f"{expected / 100:.2f}")]
    instruction = (f"How much money did I send to {p.name} in total in {month}? Answer by calling finish with "
                   "the amount in dollars (e.g. answer '42.50').")
    return Goal(instruction, plan, checks)


# --- files --------------------------------------------------------------------------------------
def archive_downloads(world: World, level: int) -> Goal:
    rng = world.rng
    folder = "/documents/" + str(rng.choice(["archive", "paperwork", "scans", "2026"]))
    pdfs = [f"/downloads/{n}.pdf" for n in rng.choice(
        ["invoice", "boarding-pass", "lease", "manual", "tax-form", "warranty", "tickets"], size=level + 1,
        replace=False)]
    tmps = [f"/downloads/{n}.tmp" for n in rng.choice(["draft", "cache", "upload"], size=1 + int(level >= 2),
                                                        replace=False)]
    for path in pdfs:
        world.add_file(path, f"%PDF {path.split('/')[-1]} {int(rng.integers(10_000))}")
    for path in tmps:
        world.add_file(path, "partial download")
    world.add_file("/downloads/readme.pdf.txt", "not a pdf")
    dest = {path: f"{folder}/{path.split('/')[-1]}" for path in pdfs}

    def checks(initial, final, answer):
        out = [(f"{src} moved to {dst}", src not in final["files"] and dst in final["files"]
                and final["files"][dst]["content"] == initial["files"][src]["content"]) for src, dst in dest.items()]
        out += [(f"{t} deleted", t not in final["files"]) for t in tmps]
        return out

    def permits(c):
        if c.collection != "files":
            return False
        return (c.kind == "removed" and (c.key in dest or c.key in tmps)) or (
            c.kind == "added" and c.key in dest.values())

    plan = [call("list_files", folder="/downloads")]
    plan += [call("move_file", source=src, destination=dst) for src, dst in dest.items()]
    plan += [call("delete_file", path=t) for t in tmps] + [call("finish")]
    instruction = (f"Tidy my downloads: move every PDF file in /downloads into {folder}/ keeping its name, and "
                   "delete the .tmp files there. Leave everything else alone.")
    return Goal(instruction, plan, checks, permits)


TRAIN_TEMPLATES = [
    Template("reschedule_meetings", ("contacts", "calendar", "email"), reschedule_meetings),
    Template("invite_company", ("contacts", "calendar"), invite_company),
    Template("pay_requests", ("bank",), pay_requests),
    Template("reimburse_receipt", ("files", "contacts", "bank"), reimburse_receipt),
    Template("shopping_from_email", ("email", "shopping"), shopping_from_email),
    Template("update_phones", ("email", "contacts"), update_phones),
    Template("contacts_from_file", ("files", "contacts"), contacts_from_file),
    Template("clean_newsletters", ("email",), clean_newsletters),
    Template("spending_question", ("contacts", "bank"), spending_question),
    Template("archive_downloads", ("files",), archive_downloads),
]
