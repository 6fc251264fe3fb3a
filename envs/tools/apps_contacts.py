"""Contacts app: the user's address book."""

from __future__ import annotations

from agentgym.envs.tools.state import new_id
from agentgym.envs.tools.toolkit import EMAIL, ToolError, params, string, tool, writes

CONTACT_ID = string("contact id, e.g. c3", 20)
PHONE = string("phone number", 40)


def _get(state: dict, cid: str) -> dict:
    try:
        return state["contacts"][cid]
    except KeyError:
        raise ToolError(f"no contact with id {cid!r}; use search_contacts to find ids") from None


def _email_taken(state: dict, email: str, other_than: str | None = None) -> bool:
    return any(c["email"].lower() == email.lower() and c["id"] != other_than for c in state["contacts"].values())


@tool("search_contacts", "Find contacts whose name, email, phone or company contains the query "
      "(case-insensitive). An empty query lists every contact.",
      params(("query",), query=string("text to look for")))
def search_contacts(state: dict, args: dict):
    q = args["query"].strip().lower()
    return [c for c in state["contacts"].values()
            if q in c["name"].lower() or q in c["email"].lower() or q in c["phone"] or q in c["company"].lower()]


@tool("get_contact", "Get one contact by id.", params(("contact_id",), contact_id=CONTACT_ID))
def get_contact(state: dict, args: dict):
    return _get(state, args["contact_id"])


@writes("contacts")
@tool("add_contact", "Add a contact. Emails must be unique in the address book.",
      params(("name", "email"), name=string("full name", 100, minLength=1), email=EMAIL, phone=PHONE,
             company=string("company", 100)))
def add_contact(state: dict, args: dict):
    if not args["name"].strip():
        raise ToolError("name must not be blank")
    if _email_taken(state, args["email"]):
        raise ToolError(f"a contact with email {args['email']} already exists")
    cid = new_id(state["contacts"], "c")
    state["contacts"][cid] = {"id": cid, "name": args["name"].strip(), "email": args["email"],
                              "phone": args.get("phone", ""), "company": args.get("company", "")}
    return state["contacts"][cid]


@writes("contacts")
@tool("update_contact", "Change fields of a contact; fields left out keep their value.",
      params(("contact_id",), contact_id=CONTACT_ID, name=string("full name", 100, minLength=1), email=EMAIL,
             phone=PHONE, company=string("company", 100)))
def update_contact(state: dict, args: dict):
    contact = _get(state, args["contact_id"])
    if "email" in args and _email_taken(state, args["email"], other_than=contact["id"]):
        raise ToolError(f"another contact already has email {args['email']}")
    if "name" in args and not args["name"].strip():
        raise ToolError("name must not be blank")
    for field in ("name", "email", "phone", "company"):
        if field in args:
            contact[field] = args[field].strip() if field == "name" else args[field]
    return contact


@writes("contacts")
@tool("delete_contact", "Delete a contact.", params(("contact_id",), contact_id=CONTACT_ID))
def delete_contact(state: dict, args: dict):
    contact = _get(state, args["contact_id"])
    del state["contacts"][contact["id"]]
    return {"deleted": contact["id"]}


TOOLS = [search_contacts, get_contact, add_contact, update_contact, delete_contact]
