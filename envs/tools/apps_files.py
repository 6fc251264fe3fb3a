"""Files app: a flat store of text files addressed by absolute paths; folders are implied by
the paths in them (as in object stores), so a folder exists while it holds a file."""

from __future__ import annotations

import posixpath

from agentgym.envs.tools.toolkit import ToolError, params, string, tool, writes

PATH = string("absolute file path, e.g. /documents/notes.txt", 200, pattern=r"^/[^\s]*$")
MAX_CONTENT = 10_000


def _clean(path: str) -> str:
    norm = posixpath.normpath(path)
    if norm in ("/", "//") or path.endswith("/"):
        raise ToolError(f"{path!r} is a folder, not a file path")
    return norm


def _get(state: dict, path: str) -> dict:
    try:
        return state["files"][_clean(path)]
    except KeyError:
        raise ToolError(f"no file at {path!r}; use list_files to see what exists") from None


@tool("list_files", "List files under a folder (default /), recursively, with their sizes.",
      params(folder=string("folder path, e.g. /documents", 200, pattern=r"^/")))
def list_files(state: dict, args: dict):
    folder = posixpath.normpath(args.get("folder", "/")).rstrip("/") + "/"
    return [{"path": p, "size": len(f["content"])} for p, f in sorted(state["files"].items()) if p.startswith(folder)]


@tool("read_file", "Read a text file.", params(("path",), path=PATH))
def read_file(state: dict, args: dict):
    return _get(state, args["path"])


@writes("files")
@tool("write_file", "Create a file, or replace the content of an existing one.",
      params(("path", "content"), path=PATH, content=string("the file's text", MAX_CONTENT)))
def write_file(state: dict, args: dict):
    path = _clean(args["path"])
    existed = path in state["files"]
    state["files"][path] = {"path": path, "content": args["content"]}
    return {"overwritten" if existed else "created": path}


@writes("files")
@tool("move_file", "Move or rename a file. Fails if the destination exists.",
      params(("source", "destination"), source=PATH, destination=PATH))
def move_file(state: dict, args: dict):
    source = _get(state, args["source"])
    dest = _clean(args["destination"])
    if dest in state["files"]:
        raise ToolError(f"{dest} already exists; delete it first or choose another name")
    del state["files"][source["path"]]
    state["files"][dest] = {"path": dest, "content": source["content"]}
    return {"moved": source["path"], "to": dest}


@writes("files")
@tool("delete_file", "Delete a file.", params(("path",), path=PATH))
def delete_file(state: dict, args: dict):
    f = _get(state, args["path"])
    del state["files"][f["path"]]
    return {"deleted": f["path"]}


TOOLS = [list_files, read_file, write_file, move_file, delete_file]
