"""Chat templates rendered within bounds of time and size.

A model folder's chat template is a Jinja program run on every prompt. transformers renders it in
Jinja's sandbox, which stops attribute escapes but bounds neither time nor size: nested
`range(100000)` loops render for hours, `'x' * 10**9` allocates a GB, and what the sandbox does stop
surfaces as a traceback. `render_chat` renders as `tokenizer.apply_chat_template` does (the same
environment options, globals, filters and variables; tests/models compare the ids) and bounds each
render:

- work: at most `MAX_RENDER_OPERATIONS` operations, counted at every item of every `{% for %}` loop
  (each loop's iterable is wrapped when the template is compiled), every call, filter, operator and
  attribute, so a loop that calls nothing stops too; a filter given a large input or an iterator has
  every line of its own Python counted (a trace function, in its thread, for that call only), so
  `('x ' * 2000000)|wordwrap(1)` stops too; a single C operation runs to its end, but its size is
  bounded (below). A count, not a clock: a render is stopped by what it does, never by how
  loaded the machine is (a wall-clock bound stopped real templates on a busy CPU), and the template is
  compiled before the count starts;
- size: every string, list or dict an operator, a call or a filter builds, and the output, at most
  `max_chars` (MAX_OUTPUT_CHARS plus four times the conversation's own characters); an operation whose
  result size is known beforehand (`*`, `**`, a width or count argument, a format width) is refused
  before it runs;
- the template itself: at most MAX_TEMPLATE_CHARS, self-contained (no include, import or extends).

Whatever stops a render (a bound, the sandbox, an include, the template's own raise_exception, memory,
recursion, any other error in it) is a ConfigError of one line that names the model and what to do.
A real template renders in about a millisecond and a few hundred operations; these bounds are orders of
magnitude above that (a million operations take about half a second).
"""

from __future__ import annotations

import functools
import json
import re
import string
import sys
import threading
from datetime import datetime
from typing import Any

from agentgym.errors import ConfigError

MAX_RENDER_OPERATIONS = 1_000_000
MAX_TEMPLATE_CHARS = 1 << 20
MAX_OUTPUT_CHARS = 4 << 20
MAX_WRAPPED_CHARS = 100_000  # the wordwrap filter's input (about a second at worst, one long word at width 1)
COUNTED_ABOVE = 10_000  # items: a filter given more, or an iterator, has each line of its Python counted

_SIZED = (str, bytes, list, tuple, dict)
# widths in printf-style format strings ("%1000000000s"); str.format's are read by string.Formatter
_PERCENT_WIDTH = re.compile(r"%[-#0 +]*(\d+)(?:\.(\d+))?")


class TemplateBound(Exception):
    """A render went past one of the module's bounds (the message says which)."""


class _Render(threading.local):
    """The bounds of the render under way in this thread (none outside a render, e.g. at compile time)."""

    operations_left: int | None = None
    operations: int = MAX_RENDER_OPERATIONS
    limit: int = MAX_OUTPUT_CHARS


_render = _Render()


def _check_time() -> None:
    """Count one operation of the render under way; past its budget, stop it."""
    if _render.operations_left is None:
        return
    _render.operations_left -= 1
    if _render.operations_left < 0:
        raise TemplateBound(f"ran more than {_render.operations} operations (loop items, calls, filters) to render "
                            "one prompt")


def _check_size(value: Any) -> Any:
    if isinstance(value, _SIZED) and len(value) > _render.limit:
        raise TemplateBound(f"built a {type(value).__name__} of {len(value)} items (at most {_render.limit})")
    return value


def _check_args(args: tuple, kwargs: dict) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _render.limit:
            raise TemplateBound(f"passed {value} to a call, beyond the {_render.limit} items a render may build")
        _check_size(value)


def _check_widths(fmt: str, style: str) -> None:
    """Refuse a format string ("%" or "{}" style) whose width or precision passes the bound."""
    if style == "%":
        numbers = [g for m in _PERCENT_WIDTH.finditer(fmt) for g in m.groups() if g]
    else:  # string.Formatter's parser (linear, in C) yields each field's format spec
        numbers = [n for _, _, spec, _ in string.Formatter().parse(fmt) if spec for n in re.findall(r"\d+", spec)]
    for number in numbers:
        if len(number) > 9 or int(number) > _render.limit:
            raise TemplateBound(f"formats with a width of {number[:20]}, beyond the {_render.limit} items a "
                                "render may build")


def _check_repeat(left: Any, right: Any) -> None:
    seq, n = (left, right) if isinstance(left, _SIZED) else (right, left)
    if isinstance(seq, _SIZED) and isinstance(n, int) and len(seq) * max(n, 0) > _render.limit:
        raise TemplateBound(f"repeats a {type(seq).__name__} of {len(seq)} items {n} times (at most "
                            f"{_render.limit} items)")


def _check_power(base: Any, exponent: Any) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1 and \
            exponent * abs(base).bit_length() > 1 << 16:
        raise TemplateBound(f"raises {base} to the power {exponent} (a number of more than 65536 bits)")


def _check_expected(size: int, what: str) -> None:
    if size > _render.limit:
        raise TemplateBound(f"{what} {size} characters (at most {_render.limit})")


def _longest(values) -> int:
    return max((len(v) if isinstance(v, str) else len(str(v)) for v in values), default=0)


def _check_str_method(owner: str, name: str, args: tuple, kwargs: dict) -> tuple:
    """Refuse a str method whose result would pass the bound, from its arguments (before it runs).
    Returns the arguments to call it with (an iterable to join is materialized to be measured)."""
    if name in ("format", "format_map"):
        _check_widths(owner, "{}")
        _check_expected(len(owner) + owner.count("{") * _longest((*args, *kwargs.values())), "would format")
    elif name == "join" and args:
        items = list(args[0])
        _check_expected(sum(len(str(i)) for i in items) + len(owner) * len(items), "would join")
        args = (items, *args[1:])
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        count = owner.count(args[0]) if args[0] else len(owner) + 1
        _check_expected(len(owner) + count * (len(args[1]) - len(args[0])), "would make a string of")
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(size, int):
            _check_expected(len(owner) + owner.count("\t") * size, "would make a string of")
    return args


def _check_filter(name: str, args: tuple, kwargs: dict) -> None:
    """Refuse a filter whose result would pass the bound, from its arguments (before it runs)."""
    value = next((a for a in args if isinstance(a, str)), None)
    if name == "format" and value is not None:
        _check_widths(value, "%")
        _check_expected(len(value) + value.count("%") * _longest(args[1:]), "would format")
    elif name == "replace" and len(strings := [a for a in args if isinstance(a, str)]) >= 3:
        text, old, new = strings[:3]  # do_replace(eval_ctx, s, old, new, count)
        count = text.count(old) if old else len(text) + 1
        _check_expected(len(text) + count * (len(new) - len(old)), "would make a string of")
    elif name == "indent" and value is not None:
        width = kwargs.get("width", args[1] if len(args) > 1 else 4)
        prefix = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        _check_expected(len(value) + (value.count("\n") + 1) * prefix, "would indent to")
    elif name == "wordwrap" and value is not None:
        if len(value) > MAX_WRAPPED_CHARS:  # textwrap cuts a long word by slicing it again and again: quadratic
            raise TemplateBound(f"wraps a text of {len(value)} characters (at most {MAX_WRAPPED_CHARS})")
        wrap = kwargs.get("wrapstring") or next((a for a in args[3:] if isinstance(a, str)), "\n")
        width = kwargs.get("width", args[1] if len(args) > 1 else 79)
        if isinstance(width, int):
            _check_expected(len(value) + (len(value) // max(width, 1) + 1) * len(wrap), "would wrap to")
    elif name == "tojson":
        indent = kwargs.get("indent", args[1] if len(args) > 1 else None)
        if isinstance(indent, (int, str)) and not isinstance(indent, bool) and \
                (len(indent) if isinstance(indent, str) else indent) > 64:
            raise TemplateBound(f"indents JSON by {indent!r} (at most 64)")


def _environment():
    """transformers' chat-template environment (utils/chat_template_utils.py), bounded."""
    import jinja2
    import jinja2.ext
    from jinja2.compiler import CodeGenerator, optimizeconst
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.utils import Namespace

    class BoundedCodeGenerator(CodeGenerator):
        @optimizeconst
        def visit_Concat(self, node, frame):  # `a ~ b ~ ...`: measured by the environment before it is joined
            self.write("environment.concat((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class BoundedNamespace(Namespace):
        """`namespace()`, whose attributes (`{% set ns.s = ... %}` in a loop) are measured as they are set."""

        def __setitem__(self, name, value):
            _check_time()
            super().__setitem__(name, _check_size(value))

    class Bounded(ImmutableSandboxedEnvironment):
        code_generator_class = BoundedCodeGenerator
        intercepted_binops = frozenset({"*", "**", "+", "%"})

        def _parse(self, source, name, filename):
            """Every `{% for %}` iterates through `_bounded_iter`, which counts each item as an operation:
            a loop whose body calls nothing (nested range(100000) loops) stops too."""
            tree = super()._parse(source, name, filename)
            for loop in tree.find_all(jinja2.nodes.For):
                loop.iter = jinja2.nodes.Call(jinja2.nodes.Name(_ITER, "load"), [loop.iter], [], None, None,
                                              lineno=loop.lineno)
            return tree

        def concat(self, items):
            _check_time()
            _check_expected(sum(len(i) if isinstance(i, str) else len(str(i)) for i in items), "would concatenate")
            return str_join(items)  # as jinja's own code for `~` without autoescape (transformers sets none)

        def call_binop(self, context, operator, left, right):
            _check_time()
            if operator == "*":
                _check_repeat(left, right)
            elif operator == "**":
                _check_power(left, right)
            elif operator == "%" and isinstance(left, str):
                _check_widths(left, "%")
                values = right if isinstance(right, tuple) else (right,)
                _check_expected(len(left) + left.count("%") * _longest(values), "would format")
            elif operator == "+" and isinstance(left, _SIZED) and isinstance(right, _SIZED):
                _check_expected(len(left) + len(right), "would add up to")
            return _check_size(super().call_binop(context, operator, left, right))

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - jinja's signature
            _check_time()
            _check_args(args, kwargs)
            method = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
            if isinstance(getattr(method, "__self__", None), str):
                args = _check_str_method(method.__self__, getattr(method, "__name__", ""), args, kwargs)
            return _check_size(super().call(__context, __obj, *args, **kwargs))

        def getattr(self, obj, attribute):
            _check_time()
            return super().getattr(obj, attribute)

        def getitem(self, obj, argument):
            _check_time()
            return super().getitem(obj, argument)

    from jinja2.runtime import str_join

    class NoFiles(jinja2.BaseLoader):
        def get_source(self, environment, template):
            raise TemplateBound(f"includes or imports another file ({template!r}); a chat template must be "
                                "self-contained")

    class Generation(jinja2.ext.Extension):
        """`{% generation %}...{% endgeneration %}` (transformers' assistant-mask tag): its body, rendered."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = Bounded(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols],
                  loader=NoFiles())
    env.filters["tojson"] = tojson
    env.filters = {name: _bounded_filter(name, f) for name, f in env.filters.items()}
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["namespace"] = BoundedNamespace
    env.globals[_ITER] = _bounded_iter
    env.globals.pop("lipsum", None)  # Python loops sized by its argument, and no chat template's business
    return env


_ITER = "agentgym_bounded_iter"


def _bounded_iter(iterable):
    for item in iterable:
        _check_time()
        yield item


def _bounded_filter(name: str, f):
    @functools.wraps(f)  # keeps jinja's pass_context / pass_environment marks
    def bounded(*args, **kwargs):
        _check_time()
        _check_args(args, kwargs)
        if name == "join":  # measure what it joins (an iterable is materialized once, then joined)
            args = tuple(list(a) if not isinstance(a, (str, *_SIZED)) and hasattr(a, "__iter__") else a
                         for a in args)
            items = next((a for a in args if isinstance(a, (list, tuple))), ())
            _check_expected(sum(len(str(i)) for i in items) + _longest(a for a in args if isinstance(a, str))
                            * len(items), "would join")
        else:
            _check_filter(name, args, kwargs)
        if not any(_large(a) for a in (*args, *kwargs.values())):
            return _check_size(f(*args, **kwargs))
        previous = sys.gettrace()  # the filter's own Python over a large input: each line it runs is counted
        sys.settrace(_count_lines)
        try:
            return _check_size(f(*args, **kwargs))
        finally:
            sys.settrace(previous)

    return bounded


def _large(value: Any) -> bool:
    """An input a filter may loop over for long: sized past COUNTED_ABOVE, or an iterator of unknown size."""
    if isinstance(value, _SIZED):
        return len(value) > COUNTED_ABOVE
    return hasattr(value, "__next__")


def _count_lines(frame, event, arg):
    """A trace function (this thread, one filter call): every line of Python is one operation."""
    _check_time()
    return _count_lines


@functools.lru_cache(maxsize=1)
def _shared_environment():
    return _environment()


@functools.lru_cache(maxsize=16)
def _compile(source: str):
    return _shared_environment().from_string(source)


def template_source(tokenizer: Any) -> str | None:
    """The chat template `apply_chat_template` would use (a dict of named templates: its default)."""
    getter = getattr(tokenizer, "get_chat_template", None)
    if callable(getter):
        try:
            return getter()
        except ValueError:  # "Cannot use chat template functions because tokenizer.chat_template is not set"
            return None
    return getattr(tokenizer, "chat_template", None) or None


def render_chat(tokenizer: Any, messages: list, add_generation_prompt: bool = True,
                operations: int = MAX_RENDER_OPERATIONS) -> str:
    """The text `tokenizer.apply_chat_template(messages, add_generation_prompt=..., tokenize=False)`
    renders, within the module's bounds; one line (ConfigError) when the template cannot render it."""
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    source = template_source(tokenizer)
    if not source:
        raise ConfigError(f"the tokenizer of {name!r} has no chat template: set tokenizer.chat_template (or use "
                          "an instruct model's tokenizer) so that conversations can be rendered")
    if len(source) > MAX_TEMPLATE_CHARS:
        raise ConfigError(f"the chat template of {name!r} is {len(source)} characters long (at most "
                          f"{MAX_TEMPLATE_CHARS}): a chat template is a few KB; use the model's own template")
    conversation_chars = sum(len(str(m.get("content") or "")) for m in messages if isinstance(m, dict))
    outer = (_render.operations_left, _render.operations, _render.limit)
    try:
        template = _compile(source)  # before the count starts: compiling is not the template's work
        _render.operations_left, _render.operations = operations, operations
        _render.limit = MAX_OUTPUT_CHARS + 4 * conversation_chars
        pieces, size = [], 0
        for piece in template.generate(messages=messages, tools=None, documents=None,
                                       add_generation_prompt=add_generation_prompt,
                                       **getattr(tokenizer, "special_tokens_map", {})):
            size += len(piece)
            if size > _render.limit:
                raise TemplateBound(f"rendered more than {_render.limit} characters for one prompt")
            pieces.append(piece)
        return "".join(pieces)
    except Exception as exc:  # noqa: BLE001 - whatever the template does (MemoryError and RecursionError too)
        raise ConfigError(f"the chat template of {name!r} {_why(exc)}") from None
    finally:
        _render.operations_left, _render.operations, _render.limit = outer


def _why(exc: BaseException) -> str:
    import jinja2

    detail = " ".join(str(exc).split())[:200]
    fix = "fix the template (chat_template in the model folder's tokenizer_config.json or chat_template.jinja) " \
          "or use the model's original one"
    if isinstance(exc, TemplateBound):
        return f"was stopped: it {detail}: {fix}"
    if isinstance(exc, jinja2.exceptions.SecurityError):
        return f"was stopped by the sandbox ({detail}): {fix}"
    if isinstance(exc, jinja2.exceptions.TemplateSyntaxError):
        return f"is not valid Jinja (line {exc.lineno}: {detail}): {fix}"
    if type(exc) is jinja2.exceptions.TemplateError:  # the template's own raise_exception(...)
        return f"refused the conversation: {detail}"
    if isinstance(exc, MemoryError):
        return f"ran out of memory rendering one prompt: {fix}"
    if isinstance(exc, RecursionError):
        return f"recursed too deep rendering one prompt: {fix}"
    return f"failed to render a prompt ({type(exc).__name__}: {detail}): {fix}"
