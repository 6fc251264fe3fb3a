"""Shopping list app. Adding an item that is already on the list (and not yet checked off)
raises its quantity instead of making a duplicate line, as list apps do."""

from __future__ import annotations

from agentgym.envs.tools.state import new_id
from agentgym.envs.tools.toolkit import ToolError, params, string, tool, writes

ITEM_ID = string("shopping item id, e.g. s2", 20)
QUANTITY = {"type": "integer", "minimum": 1, "maximum": 999}


def _get(state: dict, sid: str) -> dict:
    try:
        return state["shopping"][sid]
    except KeyError:
        raise ToolError(f"no shopping item with id {sid!r}; use list_shopping_items to find ids") from None


@tool("list_shopping_items", "List the shopping list (checked-off items included unless include_checked is false).",
      params(include_checked={"type": "boolean"}))
def list_shopping_items(state: dict, args: dict):
    keep_checked = args.get("include_checked", True)
    return [i for i in sorted(state["shopping"].values(), key=lambda i: i["id"]) if keep_checked or not i["checked"]]


@writes("shopping")
@tool("add_shopping_item", "Add an item (quantity defaults to 1). If the same item is already on the list "
      "unchecked, its quantity is increased instead.",
      params(("name",), name=string("item name", 80, minLength=1), quantity=QUANTITY))
def add_shopping_item(state: dict, args: dict):
    name = " ".join(args["name"].lower().split())
    if not name:
        raise ToolError("item name must not be blank")
    quantity = args.get("quantity", 1)
    for item in state["shopping"].values():
        if item["name"] == name and not item["checked"]:
            if item["quantity"] + quantity > 999:
                raise ToolError("quantity would exceed 999")
            item["quantity"] += quantity
            return item
    sid = new_id(state["shopping"], "s")
    state["shopping"][sid] = {"id": sid, "name": name, "quantity": quantity, "checked": False}
    return state["shopping"][sid]


@writes("shopping")
@tool("update_shopping_item", "Set an item's quantity and/or check it off (checked=true) or back on.",
      params(("item_id",), item_id=ITEM_ID, quantity=QUANTITY, checked={"type": "boolean"}))
def update_shopping_item(state: dict, args: dict):
    item = _get(state, args["item_id"])
    for field in ("quantity", "checked"):
        if field in args:
            item[field] = args[field]
    return item


@writes("shopping")
@tool("remove_shopping_item", "Remove an item from the list.", params(("item_id",), item_id=ITEM_ID))
def remove_shopping_item(state: dict, args: dict):
    item = _get(state, args["item_id"])
    del state["shopping"][item["id"]]
    return {"removed": item["id"]}


TOOLS = [list_shopping_items, add_shopping_item, update_shopping_item, remove_shopping_item]
