"""The grader's two-process protocol (envs/swe/data/sandbox/agentgym_remote.py), in one process:
the trusted side (T, `restricted`) against a peer that may be hostile (A). What crosses is data;
what T hands over cannot lead back to its globals; comparisons with plain values never ask A."""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
from pathlib import Path

import pytest

SUPPORT = Path(__file__).resolve().parents[2] / "envs" / "swe" / "data" / "sandbox"
sys.path.insert(0, str(SUPPORT))
import agentgym_remote as R  # noqa: E402

sys.path.remove(str(SUPPORT))


@pytest.fixture
def pair():
    """(T, A-module): T is restricted; A serves a module of our own in a thread."""
    ours, theirs = socket.socketpair()
    a = R.Peer(theirs.detach(), restricted=False)
    thread = threading.Thread(target=a.serve_forever, daemon=True)
    thread.start()
    t = R.Peer(ours.detach(), restricted=True)
    yield t, a
    os.close(t.fd)
    thread.join(timeout=5)


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class Box:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, Box) and self.v == other.v

    def __lt__(self, other):
        return self.v < other.v


class LineError(ValueError):
    def __init__(self, msg, line):
        super().__init__(msg)
        self.line = line


def _remote(t, a, obj):
    """T's handle on A's object, as it would arrive in an answer."""
    return t.dec(a.enc(obj))


def test_values_cross_as_exact_builtins_and_subclasses_as_references(pair):
    t, a = pair
    f = _remote(t, a, lambda: [1, 2.5, "x", b"y", (1,), {"k": {1, 2}}, None, True, 10 ** 5000, float("nan")])
    out = f()
    assert out[:7] == [1, 2.5, "x", b"y", (1,), {"k": {1, 2}}, None] and out[7] is True
    assert out[8] == 10 ** 5000 and out[9] != out[9]
    always = _remote(t, a, lambda: AlwaysEqual(5))()
    assert type(always) is R.Remote
    assert not (always == 5) and always != 5  # an expected plain value is never compared by A's code
    import pytest as _pytest

    assert not (always == _pytest.approx(5))


def test_remote_objects_compare_and_raise_as_themselves(pair):
    t, a = pair
    box = _remote(t, a, Box)
    assert box(1) == box(1) and box(1) < box(2) and sorted([box(3), box(1)])[0] == box(1)

    def boom():
        raise LineError("bad line", 3)

    cls = _remote(t, a, LineError)
    with pytest.raises(cls) as err:
        _remote(t, a, boom)()
    assert isinstance(err.value, ValueError) and err.value.line == 3 and str(err.value) == "bad line"


def test_a_call_that_edits_its_argument_edits_the_callers(pair):
    t, a = pair
    data = {"a": {"b": [1, 2]}}
    inner = data["a"]
    _remote(t, a, lambda d: d["a"]["b"].append(3) or d.update(c=1))(data)
    assert data == {"a": {"b": [1, 2, 3]}, "c": 1} and data["a"] is inner


def test_what_T_hands_over_leads_nowhere(pair):
    t, a = pair
    secret = {"report": "T's"}

    def callback(x):
        return x * 2

    callback.secret = secret
    seen = {}

    def probe(f):
        seen["call"] = f(21)
        for name in ("__globals__", "__code__", "__closure__", "__dict__", "__self__"):
            try:
                getattr(f, name)
                seen[name] = "reached"
            except Exception as exc:  # noqa: BLE001
                seen[name] = type(exc).__name__
        try:
            f.anything = 1
            seen["setattr"] = "reached"
        except Exception as exc:  # noqa: BLE001
            seen["setattr"] = type(exc).__name__
        return True

    assert _remote(t, a, probe)(callback) is True
    assert seen["call"] == 42
    assert all(v != "reached" for v in seen.values()), sorted(seen.items())
    with pytest.raises(TypeError):
        _remote(t, a, lambda m: m)(json)  # a module is never handed to A


@pytest.mark.parametrize("value", [["int", "zz"], ["type", "eval"], ["yours", 999], ["mine", "x", {}],
                                   ["list", "notalist"], ["float", 1.5], "plain", ["bool", "yes"]])
def test_malformed_values_are_protocol_errors(value):
    t = R.Peer(-1, restricted=True)
    with pytest.raises(R.ProtocolError):
        t.dec(value)


def test_a_hostile_peer_cannot_make_T_import_set_or_reach_plain_values(pair):
    t, a = pair
    results = {}

    def hostile(f):  # runs in A, during T's call, as agent code would
        for op, args in (("import", ("os",)), ("setattr", (f, "x", 1)), ("getattr", ("text", "upper")),
                         ("op:getitem", ({"k": 1}, "k"))):
            try:
                a.request(op, *args)
                results[op] = "reached"
            except Exception as exc:  # noqa: BLE001
                results[op] = type(exc).__name__
        return True

    assert _remote(t, a, hostile)(lambda: None) is True
    assert set(results.values()) == {"PermissionError"}, results


def test_oversized_messages_close_the_connection():
    ours, theirs = socket.socketpair()
    t = R.Peer(ours.detach(), restricted=True)
    theirs.sendall(struct.pack(">I", R.MAX_MESSAGE + 1))
    with pytest.raises(R.ProtocolError):
        t._recv()
    theirs.close()
    os.close(t.fd)
