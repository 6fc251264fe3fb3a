"""Objects of one process used from another over a socket, for the grader (envs/swe/README.md).

The grader's test process (T) runs pytest on the project's tests but never imports the agent's
code: `import PKG` there gives a module whose attributes live in a second process (A) that
imported the agent's package. Every call, attribute, operator and iteration on such an object
is one request over the socket; A may call back into objects T passed it (a test's function
handed to a decorator, a fake clock). So nothing the agent wrote runs where the assertions,
pytest and the report are, and the verdict is T's alone.

What crosses the socket is data, never code: JSON with a tag per value. A list, dict or set
handed to a call is a copy; the call's answer carries the copies' new contents and the caller's
are updated in place (a function that edits its argument behaves as it would locally). The exact builtin types
(None, bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset, slice, range,
Ellipsis, builtin classes) go by value and are rebuilt as those exact types; anything else is a
reference (an id) to an object that stays in its process. An int subclass from A arrives as a
reference, not as an int. T treats every message from A as hostile: sizes, depth and types are
checked; anything off ends the connection (the tests that need A then fail).

T gives A less than A gives T (`restricted`): A may call what T passed it, read public
attributes (plus `__name__`, `__qualname__`, `__doc__`, `__module__`, for functools.wraps) that
are not modules or classes, and apply operators; never set attributes, import, or reach a
test's globals; modules, classes, frames and code objects are never handed over (so no chain
of attributes leads from a test's object to its globals, pytest or the report). On T, a reference is compared (==, <, ...) only with another reference: against
a plain value (`convert(...) == 5`, `== pytest.approx(...)`) the agent's `__eq__` is not asked,
so an always-equal object cannot pass an assertion on an expected value.

Run as `python -I agentgym_remote.py FD WORKSPACE` this file is A: it appends WORKSPACE to
sys.path and serves requests on the socket FD until it closes.
"""

import base64
import builtins
import json
import operator
import os
import struct
import sys
import types

MAX_MESSAGE = 8 << 20  # bytes of one message
MAX_DEPTH = 64  # nesting of a value
MAX_NESTED = 200  # requests inside requests (callbacks inside calls)
SAFE_DUNDERS = ("__name__", "__qualname__", "__doc__", "__module__")

BUILTIN_TYPES = {
    t.__name__: t
    for t in (int, float, complex, str, bytes, bytearray, bool, list, tuple, dict, set, frozenset, object,
              type, slice, range)
}
BUILTIN_TYPES.update({n: o for n, o in vars(builtins).items() if isinstance(o, type) and issubclass(o, BaseException)})


class ProtocolError(ConnectionError):
    """The other process broke the protocol or went away."""


def _round(x, *nd):
    return round(x, *nd)


def _exit(o, *a):
    return o.__exit__(*a)


OPS = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
    "ge": operator.ge, "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod, "pow": pow,
    "matmul": operator.matmul, "lshift": operator.lshift, "rshift": operator.rshift, "and": operator.and_,
    "or": operator.or_, "xor": operator.xor, "divmod": divmod, "neg": operator.neg, "pos": operator.pos,
    "abs": abs, "invert": operator.invert, "repr": repr, "str": str, "len": len, "hash": hash,
    "bool": bool, "iter": iter, "next": next, "reversed": reversed, "contains": operator.contains,
    "getitem": operator.getitem, "setitem": operator.setitem, "delitem": operator.delitem,
    "index": operator.index, "int": int, "float": float, "complex": complex, "round": _round,
    "format": format, "enter": lambda o: o.__enter__(), "exit": _exit,
}
# what an operator must give back on the trusted side
RESULT_TYPES = {"repr": str, "str": str, "len": int, "hash": int, "bool": bool, "index": int, "int": int,
                "float": float, "complex": complex, "format": str, "contains": bool}
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


class Peer:
    """One end of the connection: `request` sends and waits for the answer, serving the other
    side's requests (callbacks) meanwhile; `serve_forever` is A's main loop."""

    def __init__(self, fd: int, restricted: bool):
        self.fd = fd
        self.restricted = restricted  # the trusted side: hostile peer, strict comparisons
        self.objects = {}  # rid -> our object the peer holds a reference to
        self.rids = {}  # id(object) -> rid
        self.proxies = {}  # the peer's rid -> our proxy (or rebuilt exception class)
        self.proxy_rids = {}  # id(rebuilt exception class) -> the peer's rid
        self.next_rid = 1
        self.next_q = 1
        self.nested = 0
        self.closed = False

    # --- framing ------------------------------------------------------------------------------
    def _send(self, msg) -> None:
        if self.closed:
            raise ProtocolError("the connection to the agent's process is closed")
        data = json.dumps(msg, separators=(",", ":")).encode("utf-8", "surrogatepass")
        data = struct.pack(">I", len(data)) + data
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError as exc:
            self.closed = True
            raise ProtocolError(f"the agent's process went away ({exc})") from None

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            try:
                chunk = os.read(self.fd, min(n - len(buf), 1 << 20))
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                raise ProtocolError("the agent's process went away")
            buf += chunk
        return buf

    def _recv(self) -> dict:
        (n,) = struct.unpack(">I", self._read(4))
        if n > MAX_MESSAGE:
            self.closed = True
            raise ProtocolError(f"a message of {n} bytes (at most {MAX_MESSAGE})")
        try:
            msg = json.loads(self._read(n).decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError):
            self.closed = True
            raise ProtocolError("a malformed message") from None
        if not isinstance(msg, dict):
            self.closed = True
            raise ProtocolError("a malformed message")
        return msg

    # --- requests -----------------------------------------------------------------------------
    def request(self, op: str, *args):
        q = self.next_q
        self.next_q += 1
        self._send({"q": q, "op": op, "args": [self.enc(a) for a in args]})
        while True:
            msg = self._recv()
            if "q" in msg:
                self._serve(msg)
                continue
            if msg.get("a") != q:
                self.closed = True
                raise ProtocolError("an answer to a request that was not asked")
            if "e" in msg:
                raise self.dec_exc(msg["e"])
            value = self.dec(msg.get("v"))
            if op == "call" and "wb" in msg:
                self._write_back(args, msg["wb"])
            return value

    def _write_back(self, args, wb) -> None:
        """A call changed the lists / dicts / sets it was given (`set_path(data, ...)` edits
        `data`): make ours hold what the other side's copies hold now, in place."""
        pos, kw = args[1], args[2]
        if not isinstance(wb, list) or len(wb) != 2:
            raise ProtocolError("a malformed call answer")
        for old, new in zip(pos, _items(wb[0])):
            if new is not None:
                _sync(old, self.dec(new))
        for key, new in _items(wb[1]):
            if isinstance(key, str) and key in kw:
                _sync(kw[key], self.dec(new))

    def serve_forever(self) -> None:
        while True:
            try:
                msg = self._recv()
            except ProtocolError:
                return
            if "q" in msg:
                self._serve(msg)

    def _serve(self, msg: dict) -> None:
        q = msg.get("q")
        if self.nested >= MAX_NESTED:
            self.closed = True
            raise ProtocolError("too many nested requests")
        self.nested += 1
        try:
            try:
                args = msg.get("args")
                if not isinstance(args, list):
                    raise ProtocolError("a malformed request")
                decoded = [self.dec(a) for a in args]
                result = self._handle(msg.get("op"), decoded)
                reply = {"a": q, "v": self.enc(result)}
                if msg.get("op") == "call":
                    pos, kw = decoded[1], decoded[2]
                    reply["wb"] = [[self.enc(a) if type(a) in MUTABLE else None for a in pos],
                                   [[k, self.enc(v)] for k, v in kw.items() if type(v) in MUTABLE]]
            except ProtocolError:
                raise
            except BaseException as exc:  # noqa: BLE001 - every error goes back to the caller
                if isinstance(exc, KeyboardInterrupt):
                    raise
                reply = {"a": q, "e": self.enc_exc(exc)}
        finally:
            self.nested -= 1
        self._send(reply)

    def _handle(self, op, args):
        if self.restricted:
            if not args or not self._is_ours(args[0]):
                raise PermissionError("only objects this process handed over can be used")
        if op == "import":
            if self.restricted:
                raise PermissionError("import is not allowed here")
            import importlib

            return importlib.import_module(str(args[0]))
        if op == "getattr":
            obj, name = args
            name = str(name)
            if self.restricted and name.startswith("_") and name not in SAFE_DUNDERS:
                raise AttributeError(name)
            value = getattr(obj, name)
            if self.restricted and isinstance(value, (type, types.ModuleType)):
                raise AttributeError(f"{name} is not handed over")
            return value
        if op in ("setattr", "delattr"):
            if self.restricted:
                raise PermissionError(f"{op} is not allowed here")
            return setattr(args[0], str(args[1]), args[2]) if op == "setattr" else delattr(args[0], str(args[1]))
        if op == "call":
            obj, pos, kw = args
            if not isinstance(pos, tuple) or not isinstance(kw, dict):
                raise ProtocolError("a malformed call")
            return obj(*pos, **{str(k): v for k, v in kw.items()})
        if isinstance(op, str) and op.startswith("op:") and op[3:] in OPS:
            return OPS[op[3:]](*args)
        raise ProtocolError(f"unknown request {op!r}")

    def _is_ours(self, obj) -> bool:
        return id(obj) in self.rids and self.objects.get(self.rids[id(obj)]) is obj

    # --- values -------------------------------------------------------------------------------
    def enc(self, x, depth: int = 0):
        if depth > MAX_DEPTH:
            raise ValueError("a value nested too deeply to send")
        t = type(x)
        if x is None:
            return ["none"]
        if t is bool:
            return ["bool", x]
        if t is int:
            return ["int", hex(x)]  # hex has no digit limit
        if t is float:
            return ["float", x.hex()]
        if t is complex:
            return ["complex", x.real.hex(), x.imag.hex()]
        if t is str:
            return ["str", x]
        if t in (bytes, bytearray):
            return ["bytes" if t is bytes else "bytearray", base64.b64encode(x).decode()]
        if t in (list, tuple, set, frozenset):
            return [t.__name__, [self.enc(i, depth + 1) for i in x]]
        if t is dict:
            return ["dict", [[self.enc(k, depth + 1), self.enc(v, depth + 1)] for k, v in x.items()]]
        if t is slice:
            return ["slice", self.enc(x.start, depth + 1), self.enc(x.stop, depth + 1), self.enc(x.step, depth + 1)]
        if t is range:
            return ["range", hex(x.start), hex(x.stop), hex(x.step)]
        if x is Ellipsis:
            return ["ellipsis"]
        if isinstance(x, type) and BUILTIN_TYPES.get(x.__name__) is x:
            return ["type", x.__name__]
        if t is Remote and x._peer is self:
            return ["yours", x._rid]
        if id(x) in self.proxy_rids:
            return ["yours", self.proxy_rids[id(x)]]
        if self.restricted:
            if isinstance(x, types.TracebackType):
                return ["none"]  # an __exit__'s traceback: its frames lead to the test's globals
            if isinstance(x, (types.ModuleType, types.FrameType, types.CodeType)) or (
                    isinstance(x, type) and not issubclass(x, BaseException)):
                raise TypeError(f"a {type(x).__name__} cannot be handed to the agent's code")
        return ["mine", self._export(x), self._meta(x)]

    def _export(self, x) -> int:
        rid = self.rids.get(id(x))
        if rid is None or self.objects.get(rid) is not x:
            rid = self.next_rid
            self.next_rid += 1
            self.objects[rid] = x  # kept alive while the peer may use it
            self.rids[id(x)] = rid
        return rid

    def _meta(self, x) -> dict:
        if isinstance(x, type) and issubclass(x, BaseException):
            bases = [self.enc(b) for b in x.__bases__ if issubclass(b, BaseException)]
            return {"exc": [str(x.__name__)[:200], str(getattr(x, "__module__", ""))[:200], bases]}
        return {}

    def dec(self, v, depth: int = 0):
        if depth > MAX_DEPTH or not isinstance(v, list) or not v or not isinstance(v[0], str):
            raise ProtocolError("a malformed value")
        tag, rest = v[0], v[1:]
        try:
            if tag == "none":
                return None
            if tag == "bool" and type(rest[0]) is bool:
                return rest[0]
            if tag == "int":
                return int(_text(rest[0]), 16)
            if tag == "float":
                return float.fromhex(_text(rest[0]))
            if tag == "complex":
                return complex(float.fromhex(_text(rest[0])), float.fromhex(_text(rest[1])))
            if tag == "str":
                return _text(rest[0])
            if tag in ("bytes", "bytearray"):
                raw = base64.b64decode(_text(rest[0]), validate=True)
                return raw if tag == "bytes" else bytearray(raw)
            if tag in ("list", "tuple", "set", "frozenset"):
                items = [self.dec(i, depth + 1) for i in _items(rest[0])]
                return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
            if tag == "dict":
                out = {}
                for pair in _items(rest[0]):
                    k, val = _items(pair)
                    out[self.dec(k, depth + 1)] = self.dec(val, depth + 1)
                return out
            if tag == "slice":
                return slice(*(self.dec(i, depth + 1) for i in rest[:3]))
            if tag == "range":
                return range(*(int(_text(i), 16) for i in rest[:3]))
            if tag == "ellipsis":
                return Ellipsis
            if tag == "type" and _text(rest[0]) in BUILTIN_TYPES:
                return BUILTIN_TYPES[rest[0]]
            if tag == "yours" and type(rest[0]) is int and rest[0] in self.objects:
                return self.objects[rest[0]]
            if tag == "mine" and type(rest[0]) is int and isinstance(rest[1], dict):
                return self._proxy(rest[0], rest[1], depth)
        except ProtocolError:
            raise
        except (IndexError, TypeError, ValueError, OverflowError, RecursionError):
            pass
        raise ProtocolError(f"a malformed value ({tag[:20]!r})")

    def _proxy(self, rid: int, meta: dict, depth: int):
        if rid in self.proxies:
            return self.proxies[rid]
        exc = meta.get("exc")
        if exc is not None:
            name, module, bases = _items(exc)
            base_classes = tuple(b for b in (self.dec(b, depth + 1) for b in _items(bases))
                                 if isinstance(b, type) and issubclass(b, BaseException)) or (Exception,)
            ns = {"__module__": _text(module)[:200], "__str__": _remote_str, "__getattr__": _remote_attr}
            try:
                proxy = type(_text(name)[:200] or "RemoteError", base_classes, ns)
            except TypeError:  # bases that cannot be combined here
                proxy = type(_text(name)[:200] or "RemoteError", (Exception,), ns)
            self.proxy_rids[id(proxy)] = rid
        else:
            proxy = Remote(self, rid)
        self.proxies[rid] = proxy
        return proxy

    def enc_exc(self, exc: BaseException) -> dict:
        try:
            message = str(exc)[:4000]
        except Exception:  # noqa: BLE001 - a __str__ that raises
            message = "<unprintable>"
        try:
            args = self.enc(tuple(exc.args))
        except Exception:  # noqa: BLE001 - args that cannot be sent
            args = self.enc(())
        try:
            ref = self.enc(exc)  # its other attributes (`err.line`) are read through this
        except Exception:  # noqa: BLE001
            ref = self.enc(None)
        return {"cls": self.enc(type(exc)), "args": args, "str": message, "ref": ref}

    def dec_exc(self, d) -> BaseException:
        if not isinstance(d, dict):
            raise ProtocolError("a malformed error")
        cls = self.dec(d.get("cls"))
        if not (isinstance(cls, type) and issubclass(cls, BaseException)) or cls in (KeyboardInterrupt, SystemExit):
            cls = RuntimeError  # a remote KeyboardInterrupt or exit must not stop this process
        args = self.dec(d.get("args"))
        args = args if isinstance(args, tuple) else ()
        try:
            exc = cls(*args)
        except Exception:  # noqa: BLE001 - a constructor that wants other arguments
            exc = cls.__new__(cls)
            exc.args = args
        if id(cls) in self.proxy_rids:
            exc._agentgym_str = _text(d.get("str", ""))
            ref = self.dec(d.get("ref", ["none"]))
            exc._agentgym_ref = ref if type(ref) is Remote else None
        return exc


def _text(x) -> str:
    if type(x) is not str:
        raise TypeError("expected a string")
    return x


def _items(x) -> list:
    if type(x) is not list:
        raise TypeError("expected a list")
    return x


MUTABLE = (list, dict, set, bytearray)


def _sync(old, new, depth: int = 0) -> None:
    """Make the container `old` equal to `new` in place, keeping the identity of nested lists
    and dicts that are still where they were."""
    if depth > MAX_DEPTH or type(old) is not type(new):
        return
    if type(old) is list:
        for i in range(min(len(old), len(new))):
            if type(old[i]) in (list, dict) and type(new[i]) is type(old[i]):
                _sync(old[i], new[i], depth + 1)
                new[i] = old[i]
        old[:] = new
    elif type(old) is dict:
        for k, v in new.items():
            if k in old and type(old[k]) in (list, dict) and type(v) is type(old[k]):
                _sync(old[k], v, depth + 1)
                new[k] = old[k]
        old.clear()
        old.update(new)
    elif type(old) is set:
        old.clear()
        old.update(new)
    elif type(old) is bytearray:
        old[:] = new


def _remote_attr(self, name):
    """A rebuilt exception's own attributes (`err.line`) come from the one that was raised."""
    ref = self.__dict__.get("_agentgym_ref")
    if ref is None or name.startswith("__"):
        raise AttributeError(name)
    return getattr(ref, name)


def _remote_str(self) -> str:
    return getattr(self, "_agentgym_str", None) or BaseException.__str__(self)


# --- the proxy --------------------------------------------------------------------------------
class Remote:
    """An object living in the other process. Every use is a request."""

    __slots__ = ("_peer", "_rid")
    __doc__ = None

    def __init__(self, peer: Peer, rid: int):
        object.__setattr__(self, "_peer", peer)
        object.__setattr__(self, "_rid", rid)

    def __getattr__(self, name):
        if name in Remote.__slots__:
            raise AttributeError(name)
        return self._peer.request("getattr", self, name)

    def __setattr__(self, name, value):
        self._peer.request("setattr", self, name, value)

    def __delattr__(self, name):
        self._peer.request("delattr", self, name)

    def __call__(self, *args, **kwargs):
        return self._peer.request("call", self, args, kwargs)

    def __iter__(self):
        return self._op("iter")

    def __next__(self):
        return self._op("next")

    def _op(self, name, *args):
        result = self._peer.request("op:" + name, self, *args)
        want = RESULT_TYPES.get(name) if self._peer.restricted else None
        if want is not None and type(result) is not want:
            raise TypeError(f"{name}() of an object of the agent's code gave {type(result).__name__}, "
                            f"not {want.__name__}")
        return result


def _unary(name):
    def method(self, *args):
        return self._op(name, *args)

    method.__name__ = f"__{name}__"
    return method


def _binary(name, reflected=False):
    def method(self, other):
        if reflected:
            return self._peer.request("op:" + name, other, self)
        return self._op(name, other)

    return method


def _compare(name):
    def method(self, other):
        if self._peer.restricted and not (type(other) is Remote and other._peer is self._peer):
            return NotImplemented  # never ask the agent's code whether it equals an expected value
        return self._op(name, other)

    return method


for _n in ("repr", "str", "len", "hash", "bool", "reversed", "contains", "getitem", "setitem", "delitem",
           "index", "int", "float", "complex", "round", "format", "enter", "exit", "neg", "pos", "abs", "invert"):
    setattr(Remote, f"__{_n}__", _unary(_n))
for _n in COMPARISONS:
    setattr(Remote, f"__{_n}__", _compare(_n))
for _n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift", "rshift", "and",
           "or", "xor", "divmod"):
    setattr(Remote, f"__{_n}__", _binary(_n))
    setattr(Remote, f"__r{_n}__", _binary(_n, reflected=True))


def serve(fd: int, workspace: str) -> None:
    """A: the agent's package on sys.path (at the end: it adds modules, shadows none), then serve."""
    sys.path.append(workspace)
    os.chdir(workspace)
    Peer(fd, restricted=False).serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])
    os._exit(0)
