"""Bank app: a checking account, its transactions and payment requests from other people.

Money is stored in integer cents (no float drift in balances) and shown to the agent in
dollars. Payments fail on insufficient funds; a request can be paid or declined once."""

from __future__ import annotations

from agentgym.envs.tools.state import new_id, parse_date
from agentgym.envs.tools.toolkit import DATE, EMAIL, ToolError, params, string, tool, writes

AMOUNT = {"type": "number", "minimum": 0.01, "maximum": 100_000, "description": "amount in dollars, e.g. 12.50"}
REQUEST_ID = string("payment request id, e.g. r2", 20)


def to_cents(amount: float) -> int:
    cents = round(amount * 100)
    if abs(cents - amount * 100) > 1e-6 * max(1.0, abs(amount * 100)):
        raise ToolError(f"amount {amount} has more than two decimals")
    return cents


def _tx_view(t: dict) -> dict:
    return {**t, "amount": t["amount"] / 100}


def _pay(state: dict, email: str, name: str, cents: int, memo: str) -> dict:
    account = state["account"]["main"]
    if cents > account["balance"]:
        raise ToolError(f"insufficient funds: the balance is {account['balance'] / 100:.2f} dollars")
    account["balance"] -= cents
    tid = new_id(state["transactions"], "t")
    state["transactions"][tid] = {"id": tid, "date": state["today"], "counterparty": email, "name": name,
                                  "amount": -cents, "memo": memo}
    return _tx_view(state["transactions"][tid])


@tool("get_balance", "The current balance of the checking account, in dollars.", params())
def get_balance(state: dict, args: dict):
    return {"balance": state["account"]["main"]["balance"] / 100}


@tool("list_transactions", "List transactions, newest first; negative amounts are money sent. Optionally "
      "only those with one counterparty (email) and/or between two dates (inclusive).",
      params(counterparty=EMAIL, start_date=DATE, end_date=DATE))
def list_transactions(state: dict, args: dict):
    for key in ("start_date", "end_date"):
        if key in args:
            try:
                parse_date(args[key])
            except ValueError:
                raise ToolError(f"{args[key]!r} is not a valid date") from None
    who = args.get("counterparty", "").lower()
    lo, hi = args.get("start_date", ""), args.get("end_date", "9999-12-31")
    found = [t for t in state["transactions"].values()
             if lo <= t["date"] <= hi and (not who or t["counterparty"].lower() == who)]
    return [_tx_view(t) for t in sorted(found, key=lambda t: (t["date"], t["id"]), reverse=True)]


@writes("account", "transactions")
@tool("send_payment", "Send money to a person, identified by email address.",
      params(("to", "amount", "memo"), to=EMAIL, amount=AMOUNT, memo=string("what the payment is for", 200)))
def send_payment(state: dict, args: dict):
    email = args["to"]
    name = next((c["name"] for c in state["contacts"].values() if c["email"].lower() == email.lower()), email)
    return _pay(state, email, name, to_cents(args["amount"]), args["memo"])


@tool("list_payment_requests", "List payment requests people sent you, optionally only those with a status.",
      params(status={"type": "string", "enum": ["pending", "paid", "declined"]}))
def list_payment_requests(state: dict, args: dict):
    status = args.get("status")
    return [{**r, "amount": r["amount"] / 100} for r in sorted(state["requests"].values(), key=lambda r: r["id"])
            if status is None or r["status"] == status]


def _pending(state: dict, rid: str) -> dict:
    request = state["requests"].get(rid)
    if request is None:
        raise ToolError(f"no payment request with id {rid!r}; use list_payment_requests to find ids")
    if request["status"] != "pending":
        raise ToolError(f"request {rid} is already {request['status']}")
    return request


@writes("account", "transactions", "requests")
@tool("pay_request", "Pay a pending payment request in full.", params(("request_id",), request_id=REQUEST_ID))
def pay_request(state: dict, args: dict):
    request = _pending(state, args["request_id"])
    tx = _pay(state, request["from"], request["name"], request["amount"], request["memo"])
    request["status"] = "paid"
    return {"paid": request["id"], "transaction": tx}


@writes("requests")
@tool("decline_request", "Decline a pending payment request.", params(("request_id",), request_id=REQUEST_ID))
def decline_request(state: dict, args: dict):
    request = _pending(state, args["request_id"])
    request["status"] = "declined"
    return {"declined": request["id"]}


TOOLS = [get_balance, list_transactions, send_payment, list_payment_requests, pay_request, decline_request]
