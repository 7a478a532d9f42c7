"""Tools and the registry: schemas from signatures, argument validation, running a handler.

The registry knows nothing of hooks or spans. It turns a Python function into a :class:`Tool`
(name, description, JSON Schema of the parameters), validates a call's arguments against that
schema, and runs the handler (:meth:`ToolSet.run`: awaited if async, a sync one inline or in a
worker thread, a generator's items collected). Everything else wraps it from outside.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from types import CoroutineType
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Literal,
    TypedDict,
    TypeVar,
    Unpack,
    get_type_hints,
    overload,
)

import pydantic
import pydantic_core

from ..telemetry.content import cap_text
from .cancel import CancelSignal
from .messages import MediaContent, ToolCall, ToolSpec
from .threads import WORKERS

if TYPE_CHECKING:
    import jsonschema

ProgressCallback = Callable[[Any], None]
PrepareArguments = Callable[[Any], Any]
ExecutionMode = Literal["parallel", "sequential"]
F = TypeVar("F", bound=Callable[..., Any])

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What OpenAI, Anthropic and most providers accept as a tool name."""


class ToolError(Exception):
    """Base of the errors the registry reports as error results (never raised out of a run).

    A handler may raise one with an ``error_type`` (the span's ``error.type``; default: the
    exception's class name) and ``attributes`` for the call's span: an MCP server's JSON-RPC
    error carries its code this way."""

    def __init__(
        self,
        message: str = "",
        *,
        error_type: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.attributes = dict(attributes or {})


class ToolNotFound(ToolError):
    """The model named a tool that is not registered (an error result, never raised out of a
    run)."""

    pass


class InvalidArguments(ToolError):
    """Arguments that do not match the tool's schema, or are not a JSON object."""

    pass


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Given to a handler that declares a parameter annotated ``ToolContext``.

    ``progress(update)`` reports a partial result: it becomes a span event on the ``run`` span and
    a ``tool_execution_update`` event of the loop. ``set_attributes(attributes)`` adds attributes
    to the call's ``execute_tool`` span (what a tool knows of its own protocol: the MCP adapter
    records ``mcp.*`` there). ``signal`` is the run's cancellation signal.
    """

    tool_call_id: str
    tool_name: str
    signal: CancelSignal
    _on_progress: ProgressCallback | None = None
    _on_attributes: Callable[[Mapping[str, Any]], None] | None = None

    def progress(self, update: Any) -> None:
        """Report a partial result (a span event, and the loop's ``tool_execution_update``)."""
        if self._on_progress is not None:
            self._on_progress(update)

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Add attributes to the call's ``execute_tool`` span (ignored when it does not record)."""
        if self._on_attributes is not None:
            self._on_attributes(attributes)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A handler may return this to set the model-facing text and the details separately."""

    content: str
    details: Any = None
    is_error: bool = False
    terminate: bool = False
    media: tuple[MediaContent, ...] = ()


@dataclass(frozen=True, eq=False)
class Tool:
    """A registered tool. Build one with :func:`make_tool` or :meth:`ToolRegistry.register`.

    ``timeout`` (seconds) bounds one run of the handler; a sync handler with a timeout of its own,
    or marked ``blocking``, runs in a worker thread so that the event loop and the timeout stay
    live. ``prepare_arguments`` normalises the model's raw arguments (a mapping) before they are
    validated (Pi's ``prepareArguments``): use it to accept an old argument shape. ``execution``
    ``"sequential"`` makes the tool run alone: in a parallel batch, the calls before it finish
    first and the calls after it wait for it. ``context_param`` names the handler's parameter
    that receives a :class:`ToolContext` (``None`` when it takes none). A tool is immutable.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    handler: Callable[..., Any]
    timeout: float | None = None
    blocking: bool = False
    prepare_arguments: PrepareArguments | None = None
    execution: ExecutionMode = "parallel"
    output_schema: Mapping[str, Any] | None = None
    is_async: bool = field(init=False)
    spec: ToolSpec = field(init=False)
    context_param: str | None = field(default=None, repr=False)
    _model: type[pydantic.BaseModel] | None = field(default=None, repr=False)
    _validator: jsonschema.protocols.Validator | None = field(default=None, repr=False)
    _validate_fields: Callable[[Any], dict[str, Any]] | None = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.handler))
        model = self._model
        check = None if model is None else fields_validator(model)
        object.__setattr__(self, "_validate_fields", check)
        object.__setattr__(self, "spec", ToolSpec(self.name, self.description, self.parameters))
        if self.execution not in ("parallel", "sequential"):
            raise ValueError(
                f"tool {self.name!r}: execution must be 'parallel' or 'sequential', "
                f"got {self.execution!r}"
            )

    def validate(self, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
        """The validated arguments; :class:`InvalidArguments` says what is wrong."""
        args = decode_arguments(arguments)
        check = self._validate_fields
        if check is not None:
            try:
                return check(args)  # a fresh dict of field values
            except pydantic.ValidationError as exc:
                raise InvalidArguments(_pydantic_message(exc)) from None
        if self._validator is not None:
            errors = sorted(self._validator.iter_errors(args), key=lambda e: list(e.path))
            if errors:
                raise InvalidArguments("; ".join(_jsonschema_message(e) for e in errors))
        return dict(args)

    def may_receive(self, name: str) -> bool:
        """Whether a call's validated arguments may hold ``name``: ``False`` only when the
        signature's model validates them and has no such parameter (a JSON Schema may let any
        property through)."""
        model = self._model
        return model is None or name in model.model_fields

    def call(
        self,
        args: Mapping[str, Any],
        tool_call_id: str,
        signal: CancelSignal | None,
        on_progress: ProgressCallback | None = None,
        on_attributes: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> Any:
        """Call the handler with validated arguments; returns its value (an awaitable if async).
        ``signal`` is the call's (``None``: the call has none, and a handler that takes a
        :class:`ToolContext` gets a new one)."""
        if self.context_param is None:
            return self.handler(**args)
        kwargs = dict(args)
        kwargs[self.context_param] = ToolContext(
            tool_call_id,
            self.name,
            signal if signal is not None else CancelSignal(),
            on_progress,
            on_attributes,
        )
        return self.handler(**kwargs)


def fields_validator(model: type[pydantic.BaseModel]) -> Callable[[Any], dict[str, Any]]:
    """What validates arguments as ``model`` does and gives the field values an instance's
    ``__dict__`` would hold (a fresh dict), or raises the same ``pydantic.ValidationError``.

    A model's core schema is a ``model`` schema around a ``model-fields`` one, which does all of
    the validation and gives the field values (first of what it returns: taken by the
    validator itself, after it); validated with the model's config, that inner schema makes no
    instance. A model whose schema is not that shape (a root model, an ``__init__``, a
    ``model_post_init`` or a validator of its own) is validated through the model."""
    schema: Any = model.__pydantic_core_schema__
    inner = schema.get("schema") if schema.get("type") == "model" else None
    plain = not any(schema.get(key) for key in ("custom_init", "root_model", "post_init"))
    if plain and inner is not None and inner.get("type") == "model-fields":
        fields = pydantic_core.core_schema.no_info_after_validator_function(itemgetter(0), inner)
        validator = pydantic_core.SchemaValidator(fields, schema.get("config"))
        return validator.validate_python
    validate_model = model.__pydantic_validator__.validate_python
    return lambda args: validate_model(args).__dict__


_PLAIN = frozenset({str, int, float, bool, dict, list, tuple, type(None)})
_CONTAINERS = frozenset({dict, list, tuple})


def decode_arguments(arguments: Mapping[str, Any] | str) -> Mapping[str, Any]:
    """The arguments as a mapping (JSON text decoded), or :class:`InvalidArguments`."""
    if type(arguments) is not dict:  # a plain dict, the common case, skips the ABC checks
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise InvalidArguments(f"arguments are not valid JSON: {exc.msg}") from None
            except RecursionError:
                raise InvalidArguments("arguments are nested too deeply") from None
        if not isinstance(arguments, Mapping):
            got = type(arguments).__name__
            raise InvalidArguments(f"arguments must be a JSON object, got {got}")
    for value in arguments.values():
        kind = type(value)
        if kind in _CONTAINERS or (
            kind not in _PLAIN and isinstance(value, (Mapping, list, tuple))
        ):
            _check_depth(arguments)
            break
    return arguments


def prepared_arguments(
    tool: Tool, arguments: Mapping[str, Any] | str
) -> tuple[Mapping[str, Any] | str, bool]:
    """A call's raw arguments after the tool's ``prepare_arguments`` (Pi's
    ``prepareArguments``), and whether it changed them; :class:`InvalidArguments` when it
    raised or returned no mapping."""
    prepare = tool.prepare_arguments
    if prepare is None:
        return arguments, False
    raw = decode_arguments(arguments)
    try:
        prepared = prepare(dict(raw))
    except Exception as exc:
        raise InvalidArguments(f"prepare_arguments failed ({type(exc).__name__}: {exc})") from None
    if not isinstance(prepared, (Mapping, str)):
        raise InvalidArguments(
            f"prepare_arguments returned {type(prepared).__name__}, not a mapping"
        )
    return prepared, prepared != raw


MAX_ARGUMENT_DEPTH = 32


def _check_depth(arguments: Mapping[str, Any]) -> None:
    """Reject arguments nested deeper than :data:`MAX_ARGUMENT_DEPTH` (without recursion)."""
    stack: list[tuple[Any, int]] = [(arguments, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            children: Any = value.values()
        elif isinstance(value, (list, tuple)):
            children = value
        else:
            continue
        if depth >= MAX_ARGUMENT_DEPTH:
            raise InvalidArguments(f"arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children)


def _pydantic_message(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _jsonschema_message(err: jsonschema.ValidationError) -> str:
    loc = ".".join(str(p) for p in err.absolute_path) or "arguments"
    return f"{loc}: {err.message}"


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _description_from(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ")


class ToolOptions(TypedDict, total=False):
    """What :func:`make_tool`, :meth:`ToolRegistry.register` and ``@registry.tool`` accept
    besides the function; every key is optional."""

    name: str
    """The tool's name (default: the function's)."""
    description: str
    """What the model reads (default: the docstring's first paragraph)."""
    parameters: Mapping[str, Any]
    """A JSON Schema that replaces the one derived from the signature."""
    timeout: float | None
    """Seconds one run of the handler may take (see :class:`Tool`)."""
    blocking: bool
    """Run a sync handler in a worker thread."""
    prepare_arguments: PrepareArguments | None
    """Normalise the model's raw arguments before validation."""
    execution: ExecutionMode
    """``"sequential"`` makes the tool run alone in a parallel batch."""
    output_schema: Mapping[str, Any] | None
    """The JSON Schema of the structured result, when the tool declares one."""


def make_tool(fn: Callable[..., Any], **options: Unpack[ToolOptions]) -> Tool:
    """Build a :class:`Tool` from a sync or async function.

    The name defaults to the function's name, the description to the first paragraph of its
    docstring, and the parameters schema to one derived from the signature and type hints (with
    pydantic; ``Annotated[..., pydantic.Field(description=...)]`` documents a parameter). An
    explicit ``parameters`` JSON Schema replaces the derived one and is what arguments are
    validated against. A parameter annotated :class:`ToolContext` is injected, not exposed.

    Raises ``ValueError`` for a name providers would refuse (see :data:`TOOL_NAME`; a lambda has
    no usable name: pass ``name=``) and ``TypeError`` naming the tool and the parameter whose type
    has no JSON Schema.
    """
    if not callable(fn):
        raise TypeError(f"a tool handler must be callable, got {type(fn).__name__}")
    unknown = set(options) - set(ToolOptions.__annotations__)
    if unknown:
        raise TypeError(f"make_tool() got unknown options: {', '.join(sorted(unknown))}")
    tool_name = options.get("name", getattr(fn, "__name__", None))
    parameters = options.get("parameters")
    description = options.get("description")
    if not isinstance(tool_name, str) or TOOL_NAME.fullmatch(tool_name) is None:
        hint = " (a lambda has no name: pass name=...)" if tool_name == "<lambda>" else ""
        raise ValueError(
            f"invalid tool name {tool_name!r}{hint}: use 1 to 64 letters, digits, '_' or '-', "
            "as LLM providers require"
        )
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise TypeError(f"tool {tool_name!r}: cannot resolve its type hints: {exc}") from None
    context_param: str | None = None
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        annotation = hints.get(pname, Any)
        if annotation is ToolContext:
            context_param = pname
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, default)

    model: type[pydantic.BaseModel] | None = None
    validator: jsonschema.protocols.Validator | None = None
    if parameters is None:
        model, schema = _model_for(tool_name, fields)
    else:
        import jsonschema  # only tools with an explicit JSON Schema need it

        schema = dict(parameters)
        validator_cls = jsonschema.validators.validator_for(schema)
        try:
            validator_cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(
                f"tool {tool_name!r}: invalid parameters schema: {exc.message}"
            ) from None
        validator = validator_cls(_closed(schema))
    return Tool(
        name=tool_name,
        description=description if description is not None else _description_from(fn),
        parameters=schema,
        handler=fn,
        timeout=options.get("timeout"),
        blocking=options.get("blocking", False),
        prepare_arguments=options.get("prepare_arguments"),
        execution=options.get("execution", "parallel"),
        output_schema=options.get("output_schema"),
        context_param=context_param,
        _model=model,
        _validator=validator,
    )


_MODEL_CONFIG = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=True)
_SAYS_WHAT_ELSE: Final = ("additionalProperties", "unevaluatedProperties", "patternProperties")
_COMPOSED: Final = ("allOf", "anyOf", "oneOf", "$ref", "if", "dependentSchemas")


def _closed(schema: Mapping[str, Any]) -> dict[str, Any]:
    """What an explicit parameters schema validates against: as given when it says which other
    properties it allows, else refusing the properties it does not declare (as a schema derived
    from a signature does), so a ``**kwargs`` handler never gets an argument nobody declared.
    A schema that composes others (``allOf``, ``$ref``...) is closed with
    ``unevaluatedProperties`` (JSON Schema 2019-09 and later; older drafts ignore it)."""
    if any(key in schema for key in _SAYS_WHAT_ELSE):
        return dict(schema)
    if any(key in schema for key in _COMPOSED):
        return {**schema, "unevaluatedProperties": False}
    return {**schema, "additionalProperties": False}


def _model_for(
    tool_name: str, fields: dict[str, Any]
) -> tuple[type[pydantic.BaseModel], dict[str, Any]]:
    """The pydantic model validating a tool's arguments and its JSON Schema; a type that has no
    schema is reported with the tool's and the parameter's name."""
    try:
        model = pydantic.create_model(f"{tool_name}_arguments", __config__=_MODEL_CONFIG, **fields)
        return model, _strip_titles(model.model_json_schema())
    except Exception as exc:
        for pname, spec in fields.items():
            try:
                probe = pydantic.create_model("probe", __config__=_MODEL_CONFIG, **{pname: spec})
                probe.model_json_schema()
            except Exception as field_exc:
                raise TypeError(
                    f"tool {tool_name!r}: parameter {pname!r} has type {spec[0]!r}, which has "
                    f"no JSON Schema ({type(field_exc).__name__}); use a JSON-compatible type "
                    "or pass parameters=..."
                ) from None
        raise TypeError(f"tool {tool_name!r}: cannot build its arguments schema: {exc}") from None


class ToolSet:
    """Tools by name, fixed: what one turn of an agent uses (:meth:`ToolRegistry.snapshot`)."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self._tools[t.name] = t

    def get(self, name: str) -> Tool | None:
        """The tool registered as ``name``, or ``None``."""
        return self._tools.get(name)

    def resolve(self, call: ToolCall) -> Tool:
        """The tool a call names, or :class:`ToolNotFound`."""
        tool = self.get(call.name) if isinstance(call.name, str) else None
        if tool is None:
            raise self.not_found(call.name)
        return tool

    def not_found(self, name: object) -> ToolNotFound:
        """The error for a name no tool has: it lists the tools there are, for the model."""
        shown = cap_text(name if isinstance(name, str) else repr(name), 100)
        known = ", ".join(sorted(self._tools)) or "none"
        return ToolNotFound(f"unknown tool {shown!r}; available tools: {known}")

    def specs(self) -> list[ToolSpec]:
        """The tools as the model sees them (name, description, JSON schema), in order."""
        return [t.spec for t in self._tools.values()]

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def start(
        self,
        tool: Tool,
        args: Mapping[str, Any],
        tool_call_id: str,
        signal: CancelSignal | None,
        on_progress: ProgressCallback | None = None,
        on_attributes: Callable[[Mapping[str, Any]], None] | None = None,
        in_thread: bool = False,
    ) -> Any:
        """Start the handler (``signal``: the call's, ``None`` when it has none; see
        :meth:`Tool.call`): its value when it has one at once (a sync handler run inline that
        returned something that is neither awaitable nor a generator; never a coroutine), else
        a coroutine that gives the value (:meth:`run`'s): an async handler's, a handler's in a
        worker thread (``in_thread``), a generator's items collected into a list (each reported
        to ``on_progress``). No coroutine is made for a sync handler's plain value."""
        if in_thread and not tool.is_async:
            return _settled(
                WORKERS.run(
                    functools.partial(
                        tool.call,
                        args,
                        tool_call_id=tool_call_id,
                        signal=signal,
                        on_progress=on_progress,
                        on_attributes=on_attributes,
                    )
                ),
                on_progress,
                True,
            )
        value = tool.call(args, tool_call_id, signal, on_progress, on_attributes)
        if type(value) in _PLAIN:
            return value
        if tool.is_async or inspect.isawaitable(value):
            return _settled(value, on_progress, False)
        if inspect.isgenerator(value) or inspect.isasyncgen(value):
            return _collect(value, on_progress)
        return value

    async def run(
        self,
        tool: Tool,
        args: Mapping[str, Any],
        *,
        tool_call_id: str,
        signal: CancelSignal | None,
        on_progress: ProgressCallback | None = None,
        on_attributes: Callable[[Mapping[str, Any]], None] | None = None,
        in_thread: bool = False,
    ) -> Any:
        """Run the handler and return its value: awaited if async; a sync one inline, or in a
        worker thread when ``in_thread`` (so that a timeout can fire and other tools keep
        running). A generator's items are collected into a list, each reported to
        ``on_progress``. :meth:`start` awaited when it gives an awaitable."""
        value = self.start(
            tool,
            args,
            tool_call_id=tool_call_id,
            signal=signal,
            on_progress=on_progress,
            on_attributes=on_attributes,
            in_thread=in_thread,
        )
        return (await value) if isinstance(value, CoroutineType) else value


async def _settled(running: Any, on_progress: ProgressCallback | None, threaded: bool) -> Any:
    """The value of an awaitable handler, awaited once (``threaded``: of a worker thread's run,
    whose value is awaited in its turn when it is awaitable); a generator's items collected."""
    value = await running
    if type(value) in _PLAIN:
        return value
    if threaded and inspect.isawaitable(value):
        value = await value
        if type(value) in _PLAIN:
            return value
    if inspect.isgenerator(value) or inspect.isasyncgen(value):
        return await _collect(value, on_progress)
    return value


async def _collect(gen: Any, report: ProgressCallback | None) -> list[Any]:
    """A generator's items, each reported as progress (when there is someone to report to)."""
    items: list[Any] = []
    if inspect.isasyncgen(gen):
        async for item in gen:
            items.append(item)
            if report is not None:
                report(item)
        return items
    for item in gen:
        items.append(item)
        if report is not None:
            report(item)
        await asyncio.sleep(0)  # let timeouts and cancellation in between items
    return items


class ToolRegistry(ToolSet):
    """Tools by name, to register into. Registering a name twice replaces the earlier tool;
    :meth:`snapshot` gives the tools as they are now, fixed."""

    def __init__(self, tools: Iterable[Tool] | None = None) -> None:
        super().__init__()
        self._snapshot: ToolSet | None = None
        for t in tools or ():
            self.add(t)

    def add(self, tool: Tool) -> Tool:
        """Register a built :class:`Tool` (replacing one of the same name)."""
        self._tools[tool.name] = tool
        self._snapshot = None
        return tool

    def remove(self, name: str) -> Tool | None:
        """Unregister a tool by name; returns it, or ``None`` if there was none."""
        self._snapshot = None
        return self._tools.pop(name, None)

    def snapshot(self) -> ToolSet:
        """The tools registered now, as a :class:`ToolSet` that later registrations leave alone
        (the same object until the registry changes)."""
        if self._snapshot is None:
            self._snapshot = ToolSet(self._tools.values())
        return self._snapshot

    def register(self, fn: Callable[..., Any], **options: Unpack[ToolOptions]) -> Tool:
        """Build a tool from ``fn`` (see :func:`make_tool`) and register it."""
        return self.add(make_tool(fn, **options))

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(self, fn: None = None, /, **options: Unpack[ToolOptions]) -> Callable[[F], F]: ...

    def tool(self, fn: F | None = None, /, **options: Unpack[ToolOptions]) -> F | Callable[[F], F]:
        """Decorator: ``@registry.tool`` or ``@registry.tool(name=..., timeout=...)``.

        Returns the function unchanged (same signature and type), so it stays callable as plain
        Python.
        """

        def decorate(f: F) -> F:
            self.register(f, **options)
            return f

        return decorate(fn) if fn is not None else decorate
