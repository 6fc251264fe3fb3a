"""Task templates held out of training (the `heldout_unseen` split): new compositions of the
same apps, so evaluation measures transfer to goals the agent never trained on."""

from __future__ import annotations

from agentgym.envs.tools.goals import Goal, addressed_to, call, new_sent
from agentgym.envs.tools.state import EVENT_TITLES, GROCERIES, World, shift, weekday
from agentgym.envs.tools.templates import STORES, Template, _receipt_lines, _time, write_receipt


# --- calendar + email ---------------------------------------------------------------------------
def cancel_day(world: World, level: int) -> Goal:
    rng, today = world.rng, world.today
    day = shift(today, int(rng.integers(2, 5)))  # a weekday this week
    titles = rng.choice(EVENT_TITLES, size=level + 1, replace=False)
    for title in titles[:level]:
        guests = [p.email for p in world.sample_people(int(rng.integers(1, 3)))]
        world.add_event(str(title), day, _time(world), 30 * int(rng.integers(1, 3)), guests)
    world.add_event(str(titles[-1]), shift(day, 1), _time(world), 60, [world.sample_people(1)[0].email])
    cancelled = sorted((e for e in world.state["events"].values() if e["date"] == day),
                       key=lambda e: (e["start"], e["id"]))
    ids = {e["id"] for e in cancelled}
    guests = sorted({a for e in cancelled for a in e["attendees"]})

    def checks(initial, final, answer):
        out = [(f"'{initial['events'][eid]['title']}' cancelled", eid not in final["events"]) for eid in sorted(ids)]
        mails = [m for m in new_sent(initial, final)
                 if "cancel" in (m["subject"] + " " + m["body"]).lower()]
        out += [(f"{g} told about the cancellation", any(addressed_to(m, g) for m in mails)) for g in guests]
        return out

    def permits(c):
        if c.collection == "events":
            return c.key in ids and c.kind == "removed"
        allowed = set(guests) | {world.state["user"]["email"]}
        return c.collection == "emails" and c.kind == "added" and c.after["folder"] == "sent" \
            and {a.lower() for a in c.after["to"]} <= allowed

    plan = [call("list_events", start_date=day, end_date=day)]
    plan += [call("delete_event", event_id=e["id"]) for e in cancelled]
    lines = "\n".join(f"- {e['title']} at {e['start']}" for e in cancelled)
    plan += [call("send_email", to=guests, subject=f"Cancelled: my meetings on {day}",
                  body=f"Hello,\n\nI have to cancel my meetings on {weekday(day)} {day}:\n{lines}\n\nSorry!"),
             call("finish")]
    instruction = (f"Something came up: cancel all my events on {weekday(day)} {day} and email everyone who was "
                   "invited to them that the meeting is cancelled.")
    return Goal(instruction, plan, checks, permits)


# --- contacts + calendar ------------------------------------------------------------------------
def change_email_everywhere(world: World, level: int) -> Goal:
    rng, today = world.rng, world.today
    p = world.sample_people(1)[0]
    new = p.email.split("@")[0] + "@" + str(rng.choice(["fastpost.example", "inbox.example", "mailbox.example"]))
    for _ in range(level):
        others = [o.email for o in world.sample_people(int(rng.integers(0, 2)), exclude=(p,))]
        world.add_event(str(rng.choice(EVENT_TITLES)), shift(today, int(rng.integers(0, 20))), _time(world), 30,
                        [p.email] + others)
    world.add_event("Old workshop", shift(today, -int(rng.integers(1, 10))), _time(world), 60, [p.email])
    cid = world.contact_id(p)
    contact_before = dict(world.state["contacts"][cid])
    upcoming = {e["id"]: sorted(e["attendees"]) for e in world.state["events"].values()
                if e["date"] >= today and p.email in e["attendees"]}
    expected = {eid: sorted((set(a) - {p.email}) | {new}) for eid, a in upcoming.items()}

    def checks(initial, final, answer):
        c = final["contacts"].get(cid)
        out = [(f"contact email is {new}", c is not None and c["email"] == new
                and all(c[k] == contact_before[k] for k in ("name", "phone", "company")))]
        out += [(f"event {eid} has the new address", eid in final["events"]
                 and sorted(final["events"][eid]["attendees"]) == want) for eid, want in expected.items()]
        return out

    def permits(c):
        return (c.collection == "contacts" and c.key == cid) or (c.collection == "events" and c.key in upcoming)

    plan = [call("search_contacts", query=p.name), call("update_contact", contact_id=cid, email=new),
            call("list_events", start_date=today, attendee=p.email)]
    plan += [call("update_event", event_id=eid, attendees=want) for eid, want in expected.items()]
    plan += [call("finish")]
    instruction = (f"{p.name} has a new email address: {new}. Update their contact, and replace the old address "
                   "in all my events from today on (leave past events as they are).")
    return Goal(instruction, plan, checks, permits)


# --- email + files ------------------------------------------------------------------------------
NOTES = {
    "Recipe: lemon cake": "200 g flour\n150 g sugar\n3 eggs\n2 lemons\nBake 40 minutes at 180 C.",
    "Wifi for the cabin": "Network: pinecabin\nPassword: moss-river-42\nRouter is behind the bookshelf.",
    "Directions to the venue": "Take line 4 to Harbor Street, walk north two blocks, blue door on the left.",
    "Packing list": "tent\nsleeping bag\nheadlamp\nwater filter\nrain jacket",
}


def save_email_to_file(world: World, level: int) -> Goal:
    rng = world.rng
    p, q = world.sample_people(2)
    subject = str(rng.choice(sorted(NOTES)))
    body = NOTES[subject]
    mid = world.add_email(p.email, subject, body, shift(world.today, -int(rng.integers(0, 6))))
    if level >= 2:  # the same subject from someone else, with other content
        world.add_email(q.email, subject, body.upper(), shift(world.today, -7))
    if level >= 3:  # an older draft from the same person
        world.add_email(p.email, f"Draft: {subject}", "not final yet", shift(world.today, -9))
    path = "/documents/" + subject.split(":")[-1].strip().lower().replace(" ", "-") + ".txt"

    def checks(initial, final, answer):
        f = final["files"].get(path)
        return [(f"{path} exists", f is not None),
                (f"{path} holds the email's text", f is not None and f["content"].strip() == body.strip())]

    def permits(c):
        return c.collection == "files" and c.key == path and c.kind == "added"

    plan = [call("search_emails", query=subject), call("read_email", email_id=mid),
            call("write_file", path=path, content=body), call("finish")]
    instruction = f"Save the text of the email '{subject}' that {p.name} sent me into the file {path}."
    return Goal(instruction, plan, checks, permits)


# --- files + shopping ---------------------------------------------------------------------------
def checkoff_from_receipt(world: World, level: int) -> Goal:
    rng = world.rng
    on_list = {i["name"] for i in world.state["shopping"].values()}
    fresh = [str(n) for n in rng.choice(sorted(set(GROCERIES) - on_list), size=level + 3, replace=False)]
    bought, not_bought, off_list = fresh[: level + 1], fresh[level + 1], fresh[level + 2]
    ids = {world.add_item(name, int(rng.integers(1, 4))): name for name in bought}
    world.add_item(not_bought, 2)
    store = str(rng.choice(STORES))
    names = [*bought, off_list]
    path, _ = write_receipt(world, store, world.today, _receipt_lines(world, len(names), names))
    before = {sid: dict(world.state["shopping"][sid]) for sid in ids}

    def checks(initial, final, answer):
        return [(f"{name} checked off", sid in final["shopping"] and final["shopping"][sid]["checked"]
                 and final["shopping"][sid]["quantity"] == before[sid]["quantity"]) for sid, name in ids.items()]

    def permits(c):
        return c.collection == "shopping" and c.key in ids and c.kind == "changed"

    plan = [call("read_file", path=path), call("list_shopping_items", include_checked=False)]
    plan += [call("update_shopping_item", item_id=sid, checked=True) for sid in ids] + [call("finish")]
    instruction = (f"I just went shopping; the receipt is {path}. Check off the items on my shopping list that "
                   "I bought. Don't add anything.")
    return Goal(instruction, plan, checks, permits)


UNSEEN_TEMPLATES = [
    Template("cancel_day", ("calendar", "email"), cancel_day, unseen=True),
    Template("change_email_everywhere", ("contacts", "calendar"), change_email_everywhere, unseen=True),
    Template("save_email_to_file", ("email", "files"), save_email_to_file, unseen=True),
    Template("checkoff_from_receipt", ("files", "shopping"), checkoff_from_receipt, unseen=True),
]
