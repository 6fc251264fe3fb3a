"""Email app: inbox, sent and trash folders. Sending files a copy in `sent`; deleting moves a
message to `trash`, and deleting it from the trash removes it for good."""

from __future__ import annotations

from agentgym.envs.tools.state import new_id
from agentgym.envs.tools.toolkit import EMAIL, ToolError, params, string, tool, writes

EMAIL_ID = string("email id, e.g. m7", 20)
FOLDER = {"type": "string", "enum": ["inbox", "sent", "trash"], "description": "mail folder"}
RECIPIENTS = {"type": "array", "items": EMAIL, "minItems": 1, "maxItems": 30, "description": "recipient addresses"}


def _get(state: dict, mid: str) -> dict:
    try:
        return state["emails"][mid]
    except KeyError:
        raise ToolError(f"no email with id {mid!r}; use list_emails or search_emails to find ids") from None


def _summary(m: dict) -> dict:
    return {k: m[k] for k in ("id", "folder", "from", "to", "subject", "date", "read")}


def _newest_first(found):
    return [_summary(m) for m in sorted(found, key=lambda m: (m["date"], m["id"]), reverse=True)]


@tool("list_emails", "List emails in a folder (default inbox), newest first, without their bodies. "
      "Optionally only those from one sender and/or only unread ones.",
      params(folder=FOLDER, sender=EMAIL, unread_only={"type": "boolean"}))
def list_emails(state: dict, args: dict):
    folder, sender = args.get("folder", "inbox"), args.get("sender", "").lower()
    return _newest_first(m for m in state["emails"].values()
                         if m["folder"] == folder and (not sender or m["from"].lower() == sender)
                         and not (args.get("unread_only") and m["read"]))


@tool("search_emails", "Find emails (any folder unless one is given) whose sender, subject or body "
      "contains the query, case-insensitive; newest first, without bodies.",
      params(("query",), query=string("text to look for", 200, minLength=1), folder=FOLDER))
def search_emails(state: dict, args: dict):
    q, folder = args["query"].lower(), args.get("folder")
    return _newest_first(m for m in state["emails"].values()
                         if (folder is None or m["folder"] == folder)
                         and (q in m["from"].lower() or q in m["subject"].lower() or q in m["body"].lower()))


@writes("emails")
@tool("read_email", "Read one email in full (marks it read).", params(("email_id",), email_id=EMAIL_ID))
def read_email(state: dict, args: dict):
    message = _get(state, args["email_id"])
    message["read"] = True
    return message


@writes("emails")
@tool("send_email", "Send an email; a copy is kept in the sent folder.",
      params(("to", "subject", "body"), to=RECIPIENTS, subject=string("subject", 200),
             body=string("message text", 5000)))
def send_email(state: dict, args: dict):
    mid = new_id(state["emails"], "m")
    state["emails"][mid] = {"id": mid, "folder": "sent", "from": state["user"]["email"], "to": list(args["to"]),
                            "subject": args["subject"], "body": args["body"], "date": state["today"], "read": True}
    return {"sent": mid}


@writes("emails")
@tool("delete_email", "Delete an email: it moves to the trash (deleting from the trash erases it).",
      params(("email_id",), email_id=EMAIL_ID))
def delete_email(state: dict, args: dict):
    message = _get(state, args["email_id"])
    if message["folder"] == "trash":
        del state["emails"][message["id"]]
        return {"erased": message["id"]}
    message["folder"] = "trash"
    return {"moved_to_trash": message["id"]}


TOOLS = [list_emails, search_emails, read_email, send_email, delete_email]
