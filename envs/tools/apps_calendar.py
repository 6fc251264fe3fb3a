"""Calendar app: events with a date, start and end time and attendees (email addresses)."""

from __future__ import annotations

from agentgym.envs.tools.state import minutes, new_id, parse_date
from agentgym.envs.tools.toolkit import DATE, EMAIL, TIME, ToolError, params, string, tool, writes

EVENT_ID = string("event id, e.g. ev4", 20)
ATTENDEES = {"type": "array", "items": EMAIL, "maxItems": 30, "description": "attendee email addresses"}


def _get(state: dict, eid: str) -> dict:
    try:
        return state["events"][eid]
    except KeyError:
        raise ToolError(f"no event with id {eid!r}; use list_events to find ids") from None


def _check_date(text: str) -> None:
    try:
        parse_date(text)
    except ValueError:
        raise ToolError(f"{text!r} is not a valid calendar date") from None


def _check_times(start: str, end: str) -> None:
    if minutes(end) <= minutes(start):
        raise ToolError(f"the event must end after it starts (start {start}, end {end})")


@tool("list_events", "List events sorted by date and time, optionally only those between two dates "
      "(inclusive) and/or with a given attendee.",
      params(start_date=DATE, end_date=DATE, attendee=EMAIL))
def list_events(state: dict, args: dict):
    for key in ("start_date", "end_date"):
        if key in args:
            _check_date(args[key])
    lo, hi, who = args.get("start_date", ""), args.get("end_date", "9999-12-31"), args.get("attendee", "").lower()
    found = [e for e in state["events"].values()
             if lo <= e["date"] <= hi and (not who or who in (a.lower() for a in e["attendees"]))]
    return sorted(found, key=lambda e: (e["date"], e["start"], e["id"]))


@tool("get_event", "Get one event by id.", params(("event_id",), event_id=EVENT_ID))
def get_event(state: dict, args: dict):
    return _get(state, args["event_id"])


@writes("events")
@tool("create_event", "Create an event.",
      params(("title", "date", "start", "end"), title=string("title", 120, minLength=1), date=DATE, start=TIME,
             end=TIME, attendees=ATTENDEES))
def create_event(state: dict, args: dict):
    _check_date(args["date"])
    _check_times(args["start"], args["end"])
    if not args["title"].strip():
        raise ToolError("title must not be blank")
    eid = new_id(state["events"], "ev")
    state["events"][eid] = {"id": eid, "title": args["title"].strip(), "date": args["date"], "start": args["start"],
                            "end": args["end"], "attendees": sorted(set(args.get("attendees", [])))}
    return state["events"][eid]


@writes("events")
@tool("update_event", "Change fields of an event; fields left out keep their value. `attendees` replaces "
      "the whole attendee list.",
      params(("event_id",), event_id=EVENT_ID, title=string("title", 120, minLength=1), date=DATE, start=TIME,
             end=TIME, attendees=ATTENDEES))
def update_event(state: dict, args: dict):
    event = _get(state, args["event_id"])
    if "date" in args:
        _check_date(args["date"])
    _check_times(args.get("start", event["start"]), args.get("end", event["end"]))
    if "title" in args and not args["title"].strip():
        raise ToolError("title must not be blank")
    for field in ("title", "date", "start", "end"):
        if field in args:
            event[field] = args[field].strip() if field == "title" else args[field]
    if "attendees" in args:
        event["attendees"] = sorted(set(args["attendees"]))
    return event


@writes("events")
@tool("delete_event", "Delete (cancel) an event.", params(("event_id",), event_id=EVENT_ID))
def delete_event(state: dict, args: dict):
    event = _get(state, args["event_id"])
    del state["events"][event["id"]]
    return {"deleted": event["id"]}


TOOLS = [list_events, get_event, create_event, update_event, delete_event]
