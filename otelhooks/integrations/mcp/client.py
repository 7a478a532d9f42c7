"""An MCP server's tools through the hook boundary (the ``mcp`` extra).

::

    async with MCPServerTools(["uvx", "mcp-server-time"], prefix="time") as time_tools:
        time_tools.register(registry)          # time_get_current_time, time_convert_time
        ...                                    # an Agent or ToolExecutor over the registry

Each tool of the server becomes a :class:`~otelhooks.Tool` whose arguments are validated against
the server's ``inputSchema`` before any hook sees them (properties the schema does not name are
refused unless ``allow_extra_arguments``), and whose handler calls the server through the
official ``mcp`` client. A call is then an ordinary ``execute_tool {tool}`` span with its
``before``/``run``/``after`` children; it gets the MCP semantic conventions' attributes
(``mcp.method.name``, ``mcp.protocol.version``, ``jsonrpc.request.id``, ``network.transport``,
``server.address``/``server.port``) instead of a second span, and the W3C trace context is
injected into the request's ``params._meta`` through the global propagator (SEP-414), so an
instrumented server's spans join the agent's trace.

The result maps to a :class:`~otelhooks.ToolOutput`: text blocks are the content, images and
audio are media, resource links and embedded resources are described in the text, the whole
``CallToolResult`` (``structuredContent`` included) is the details, and ``isError`` makes an
error result (``error.type=tool_error``). A JSON-RPC error is an error result whose
``error.type`` is its code. Progress notifications are the tool's progress (span events). A call
cancelled or timed out sends ``notifications/cancelled``. A server that crashes gives an error
result saying so, and is started again on the next call; a server that hangs is bounded by the
tool's timeout. The tools are refreshed when the server says its list changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import logging
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import urlsplit

import anyio
import mcp.types as mcp_types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from ...core.messages import MediaContent, ToolResult
from ...core.tools import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolRegistry,
    make_tool,
)
from ...telemetry import attributes as A
from .naming import exposed_name

if TYPE_CHECKING:
    from mcp.shared.dispatcher import ProgressFnT
    from mcp.types import RequestParamsMeta

logger = logging.getLogger("otelhooks.mcp")

ServerTarget = str | Sequence[str] | StdioServerParameters
"""A URL (Streamable HTTP), a command line, or ``StdioServerParameters``."""

CONNECTION_ERROR: Final = "connection_error"
RESULT_TOO_LARGE: Final = "result_too_large"
DISCOVERY: Final = A.MCP_DISCOVERY
"""``unsupported`` on the span of a discovery probe the server does not implement."""
# The notifications ``message_callback`` gets (log messages go to ``logging_callback``).
_PASSED_ON: Final = (
    mcp_types.ResourceUpdatedNotification,
    mcp_types.ResourceListChangedNotification,
    mcp_types.PromptListChangedNotification,
)
DEFAULT_START_TIMEOUT: Final = 30.0
"""Seconds a server has to start and answer ``initialize`` and ``tools/list``."""
# Sets PR_SET_PDEATHSIG (1) to SIGKILL (9), then becomes the command: it dies with its parent.
_PDEATHSIG_SHIM: Final = (
    "import ctypes,os,sys;ctypes.CDLL(None).prctl(1,9);"
    "os.getppid()==1 and sys.exit(1);os.execvp(sys.argv[1],sys.argv[1:])"
)


def dies_with_parent(command: Sequence[str]) -> list[str]:
    """``command`` made to die with the process that starts it (Linux: ``PR_SET_PDEATHSIG``),
    so that a server is not left behind when its host is killed outright. A server's own
    children see their stdin close instead. Elsewhere the command is unchanged."""
    if sys.platform != "linux":
        return list(command)
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        return [setpriv, "--pdeathsig", "KILL", "--", *command]
    return [sys.executable, "-c", _PDEATHSIG_SHIM, *command]


class MCPToolError(ToolError):
    """A call the MCP server answered with a JSON-RPC error, or could not answer at all."""


@dataclass(frozen=True, slots=True)
class MCPTool:
    """One tool of a server: the name it is registered under, and the server's own listing."""

    name: str
    listing: mcp_types.Tool
    tool: Tool


# -- the SDK's own client span --------------------------------------------------------------------

_OWN_SPAN: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "otelhooks_mcp_own_span", default=False
)


class _SpanlessWhileOurs:
    """The ``mcp`` SDK's tracer, made to start no span while otelhooks' ``execute_tool`` span is
    the call's span: the MCP conventions want the ``mcp.*`` attributes on that span rather than a
    second span for the same call. A discovery probe a server does not implement (``-32601``:
    it predates the 2026-07-28 revision) is recorded as such, not as an error. Other uses of
    the SDK in the process are untouched."""

    def __init__(self, inner: trace.Tracer) -> None:
        self.inner = inner

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        if _OWN_SPAN.get():
            return trace.INVALID_SPAN
        return self.inner.start_span(*args, **kwargs)

    @contextlib.contextmanager
    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if _OWN_SPAN.get():
            yield trace.INVALID_SPAN  # the current span stays ours: its context is injected
            return
        with self.inner.start_as_current_span(*args, **kwargs) as span:
            name = args[0] if args else kwargs.get("name")
            yield _DiscoveryProbe(span) if name == _DISCOVER_SPAN else span


_DISCOVER_SPAN: Final = "MCP send server/discover"
_METHOD_NOT_FOUND: Final = str(mcp_types.METHOD_NOT_FOUND)


class _DiscoveryProbe:
    """The span of a ``server/discover`` request: a server without discovery answers
    ``-32601``, which tells the client to fall back to the handshake; not a failure."""

    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self._unsupported = False

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        if attributes.get(A.ERROR_TYPE) == _METHOD_NOT_FOUND:
            self._unsupported = True
            attributes = {k: v for k, v in attributes.items() if k != A.ERROR_TYPE}
            attributes = {**attributes, DISCOVERY: "unsupported"}
        self._span.set_attributes(attributes)

    def set_status(self, *args: Any, **kwargs: Any) -> None:
        if not self._unsupported:
            self._span.set_status(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._span, name)


def _install_span_guard() -> None:
    try:
        from mcp.shared import _otel
    except ImportError:  # a later SDK moved it: the call gets the SDK's span as well
        return
    tracer = getattr(_otel, "_tracer", None)
    if tracer is not None and not isinstance(tracer, _SpanlessWhileOurs):
        _otel._tracer = cast(trace.Tracer, _SpanlessWhileOurs(tracer))


_install_span_guard()


# -- progress forwarding ---------------------------------------------------------------------------

ProgressFn = Callable[[float, "float | None", "str | None"], Any]
_FORWARD_PROGRESS: contextvars.ContextVar[ProgressFn | None] = contextvars.ContextVar(
    "otelhooks_mcp_forward_progress", default=None
)


@contextlib.contextmanager
def progress_to(callback: ProgressFn) -> Iterator[None]:
    """Within the block, the progress of every MCP call made through :class:`MCPServerTools`
    also goes to ``callback(progress, total, message)`` (sync or async): how the proxy passes an
    upstream's progress on to its host."""
    token = _FORWARD_PROGRESS.set(callback)
    try:
        yield
    finally:
        _FORWARD_PROGRESS.reset(token)


# -- results ---------------------------------------------------------------------------------------


def to_tool_output(result: mcp_types.CallToolResult) -> ToolOutput:
    """An MCP ``CallToolResult`` as a :class:`~otelhooks.ToolOutput` (see the module's docs)."""
    return output_of(result.model_dump(mode="json", by_alias=True, exclude_none=True))


def output_of(result: Mapping[str, Any]) -> ToolOutput:
    """A ``CallToolResult`` as JSON data (its wire form) as a :class:`~otelhooks.ToolOutput`:
    text blocks, resource links and text resources joined as the content (else the structured
    content as JSON), images and audio (also embedded) as media, the whole result as the
    details. Blocks of an unknown type are kept in the details only."""
    texts: list[str] = []
    media: list[MediaContent] = []
    blocks = result.get("content")
    for block in blocks if isinstance(blocks, list) else ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            media.append(_media(kind, block.get("data", ""), block.get("mimeType", "")))
        elif kind == "resource_link":
            texts.append(f"[resource link: {block.get('name')} <{block.get('uri')}>]")
        elif kind == "resource":
            resource = block.get("resource")
            if not isinstance(resource, dict):
                continue
            if "text" in resource:
                texts.append(str(resource["text"]))
                continue
            mime = resource.get("mimeType") or "application/octet-stream"
            major = mime.split("/", 1)[0]
            if major in ("image", "audio"):
                media.append(_media(major, resource.get("blob", ""), mime))
            else:
                texts.append(f"[embedded resource: <{resource.get('uri')}> ({mime})]")
    content = "\n".join(texts)
    structured = result.get("structuredContent")
    if not content and structured is not None:
        content = json.dumps(structured, ensure_ascii=False)
    return ToolOutput(content, dict(result), result.get("isError") is True, media=tuple(media))


def wire_result(result: ToolResult) -> dict[str, Any]:
    """A :class:`~otelhooks.ToolResult` as the ``CallToolResult`` sent to the host (JSON data):
    the upstream's own result (every content block, ``structuredContent``) when the hooks kept
    it, redacted; else the result's text and media."""
    details = result.details
    if isinstance(details, dict) and isinstance(details.get("content"), list):
        same = output_of(details)
        if same.content == result.content and same.is_error == result.is_error:
            return details
    return rebuilt_result(result)


def rebuilt_result(result: ToolResult) -> dict[str, Any]:
    """A ``CallToolResult`` (JSON data) of the result's own text, media and structured content."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": result.content}]
    for media in result.media:
        blocks.append({"type": media.kind, "data": media.data, "mimeType": media.mime_type})
    details = result.details
    structured = details.get("structuredContent") if isinstance(details, dict) else None
    data: dict[str, Any] = {"content": blocks, "isError": result.is_error}
    if isinstance(structured, dict):
        data["structuredContent"] = structured
    return data


def _media(kind: str, data: Any, mime_type: Any) -> MediaContent:
    return MediaContent("image" if kind == "image" else "audio", str(data), str(mime_type))


def strict_schema(schema: Mapping[str, Any], allow_extra: bool) -> dict[str, Any]:
    """``inputSchema`` as arguments are validated against: an object schema that does not say
    otherwise refuses properties it does not name, unless ``allow_extra``."""
    out = dict(schema)
    if out.get("type", "object") == "object":  # said either way: an unsaid one is closed
        out.setdefault("additionalProperties", allow_extra)
    out.setdefault("type", "object")
    return out


def tool_name(name: str, prefix: str | None, separator: str = "_") -> str:
    """The name a server's tool is registered under: the prefix, and characters providers
    refuse replaced; a name too long keeps a hash of the whole, so two cannot collide."""
    return exposed_name(name, prefix, separator)


# -- one server ------------------------------------------------------------------------------------


class MCPServerTools:
    """The tools of one MCP server, for a :class:`~otelhooks.ToolRegistry`.

    ``server`` is a URL (Streamable HTTP), a command line (stdio) or ``StdioServerParameters``.
    ``prefix`` is put before each tool's name (``{prefix}_{name}``) so two servers cannot
    collide; ``name`` names the server in messages (default: the prefix, or the command).
    ``timeout`` bounds each call (default: the executor's). ``headers`` go with every HTTP
    request (an ``Authorization`` header, say). ``sampling_callback`` and
    ``elicitation_callback`` answer the server's requests (see ``mcp.Client``; the capabilities
    declared are exactly those with a callback, so that a server offers what the client can
    answer), as do ``list_roots_callback`` (roots) and ``sampling_capabilities`` (sampling with
    tools). ``logging_callback`` gets the server's log messages and ``message_callback`` every
    resource update and prompt or resource list change it announces. ``start_timeout`` bounds the
    start (``initialize`` and the first ``tools/list``); a command line is made to die with
    this process (``die_with_parent``). A result of more than ``max_result_bytes`` bytes (as
    JSON) is refused with an error (``error.type=result_too_large``). The connection's own
    requests (discovery, initialize, listing) are traced in ``trace_context`` (default: a trace
    of their own). ``mode`` is
    ``mcp.Client``'s protocol negotiation: ``"auto"``, or ``"legacy"`` (the initialize
    handshake) for a server whose tools send requests of their own, such as elicitation.
    ``on_tools_changed(self)`` runs after the tools were refreshed on a change.

    Use it as an async context manager, or call :meth:`connect` and :meth:`close`.
    """

    def __init__(
        self,
        server: ServerTarget,
        *,
        prefix: str | None = None,
        name: str | None = None,
        allow_extra_arguments: bool = False,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        headers: Mapping[str, str] | None = None,
        sampling_callback: Any = None,
        elicitation_callback: Any = None,
        on_tools_changed: Callable[[MCPServerTools], Any] | None = None,
        mode: str = "auto",
        start_timeout: float | None = DEFAULT_START_TIMEOUT,
        die_with_parent: bool = True,
        sampling_capabilities: mcp_types.SamplingCapability | None = None,
        list_roots_callback: Any = None,
        logging_callback: Callable[[mcp_types.LoggingMessageNotificationParams], Any] | None = None,
        message_callback: Callable[[Any], Any] | None = None,
        max_result_bytes: int | None = None,
        trace_context: otel_context.Context | None = None,
    ) -> None:
        self.url, self.params, self.command = _target(server, env, cwd, die_with_parent)
        self.start_timeout = start_timeout
        self.prefix = prefix
        self.name = name or prefix or self.url or (self.command[0] if self.command else "")
        self.allow_extra_arguments = allow_extra_arguments
        self.timeout = timeout
        self.headers = dict(headers or {})
        self.sampling_callback = sampling_callback
        self.sampling_capabilities = sampling_capabilities
        self.elicitation_callback = elicitation_callback
        self.list_roots_callback = list_roots_callback
        self.logging_callback = logging_callback
        self.message_callback = message_callback
        self.max_result_bytes = max_result_bytes
        self.trace_context = trace_context
        self.on_tools_changed = on_tools_changed
        self.mode = mode
        self._tools: dict[str, MCPTool] = {}  # registered name -> tool
        self._registries: list[ToolRegistry] = []
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()
        self._failure: BaseException | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._span_attributes: dict[str, Any] = _transport_attributes(self.url)

    # -- life --------------------------------------------------------------------------------

    async def __aenter__(self) -> MCPServerTools:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Start (or reach) the server and list its tools, within ``start_timeout`` seconds: a
        server that does not answer ``initialize`` and ``tools/list`` by then is stopped and
        the failure says so (:class:`MCPToolError` with ``error_type`` ``connection_error``)."""
        try:
            async with asyncio.timeout(self.start_timeout):
                async with self._lock:
                    await self._connect_locked()
                await self.refresh()
        except TimeoutError:
            await self.close()
            what = " ".join(self.command) if self.command else self.url
            raise MCPToolError(
                f"the MCP server {self.name!r} did not answer initialize and tools/list within "
                f"{self.start_timeout:g} s ({what}); is it an MCP server? (start_timeout raises "
                "the bound)",
                error_type=CONNECTION_ERROR,
            ) from None

    async def _connect_locked(self) -> Client:
        if self._client is not None and self._owner is not None and not self._owner.done():
            return self._client
        if self._owner is not None and not self._owner.done():
            await _settle(self._owner)
        self._failure = None
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        # The connection outlives the call that started it: it runs in a context of its own
        # (``trace_context``, else none), outside that call's span, so its requests
        # (discovery, listen) are not the call's.
        detached = contextvars.copy_context()
        detached.run(otel_context.attach, self.trace_context or otel_context.Context())
        self._owner = asyncio.create_task(
            self._own(ready, self._stop), name=f"mcp {self.name}", context=detached
        )
        try:
            self._client = await ready
        except BaseException:
            self._owner.cancel()
            raise
        return self._client

    async def _own(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """The connection's own task: it enters and leaves the client's context (anyio wants
        both in one task), and watches the server's list of tools."""
        try:
            async with self._new_client() as client:
                if not ready.done():
                    ready.set_result(client)
                watcher = asyncio.create_task(self._watch_tools(client))
                try:
                    await stop.wait()
                finally:
                    watcher.cancel()
                    await asyncio.gather(watcher, return_exceptions=True)
        except BaseException as exc:  # the server died or could not start: say so at next use
            self._failure = exc
            if not ready.done():
                ready.set_exception(
                    MCPToolError(
                        f"cannot start or reach the MCP server {self.name!r}: "
                        f"{type(exc).__name__}: {_first_message(exc)}",
                        error_type=CONNECTION_ERROR,
                    )
                )
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._client = None

    def _new_client(self) -> contextlib.AbstractAsyncContextManager[Client]:
        common: dict[str, Any] = {
            "message_handler": self._on_message,
            "sampling_callback": self.sampling_callback,
            "sampling_capabilities": self.sampling_capabilities,
            "elicitation_callback": self.elicitation_callback,
            "list_roots_callback": self.list_roots_callback,
            "logging_callback": self.logging_callback,
            "cache": None,
            "mode": self.mode,
        }
        target = self.params if self.url is None else self.url
        assert target is not None
        return _open_client(target, self.headers, common, self._span_attributes)

    async def close(self) -> None:
        """Stop the connection (and the server process of a command line)."""
        owner, stop = self._owner, self._stop
        self._owner = None
        if owner is None or stop is None:
            return
        stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(owner), timeout=10)
        except TimeoutError:
            # Cancelled, and waited for: the SDK's transport stops the server process as it
            # unwinds, and a transport left to the garbage collector outlives the event loop.
            owner.cancel()
            await asyncio.wait({owner}, timeout=10)
        except BaseException:  # the connection had already failed: nothing more to close
            pass

    @property
    def connected(self) -> bool:
        """Whether the connection to the server is up."""
        return self._client is not None and self._owner is not None and not self._owner.done()

    @property
    def server_capabilities(self) -> mcp_types.ServerCapabilities | None:
        """What the server declared (``None`` when not connected)."""
        client = self._client
        return client.server_capabilities if client is not None else None

    @property
    def protocol_version(self) -> str | None:
        """The MCP protocol version negotiated (``None`` when not connected)."""
        client = self._client
        return client.protocol_version if client is not None else None

    # -- tools -------------------------------------------------------------------------------

    @property
    def tools(self) -> list[Tool]:
        """The server's tools as otelhooks tools."""
        return [t.tool for t in self._tools.values()]

    @property
    def listings(self) -> list[MCPTool]:
        """The server's tools with their MCP listings (names, schemas, annotations)."""
        return list(self._tools.values())

    def register(self, registry: ToolRegistry) -> list[Tool]:
        """Register the tools in ``registry``; a refresh keeps it up to date."""
        if registry not in self._registries:
            self._registries.append(registry)
        for tool in self.tools:
            registry.add(tool)
        return self.tools

    async def refresh(self) -> None:
        """List the server's tools again (done by itself when the server says they changed)."""
        listed = await _all_tools(await self._ensure())
        old = self._tools
        if old and [t.listing for t in old.values()] == listed:
            return  # the same tools (a change announced twice, or undone)
        self._tools = {}
        for listing in listed:
            registered = tool_name(listing.name, self.prefix)
            self._tools[registered] = MCPTool(
                registered, listing, self._make_tool(registered, listing)
            )
        for registry in self._registries:
            for name in old:
                if name not in self._tools and registry.get(name) is old[name].tool:
                    registry.remove(name)
            for tool in self.tools:
                registry.add(tool)
        if old and self.on_tools_changed is not None:
            result = self.on_tools_changed(self)
            if asyncio.iscoroutine(result):
                await result

    def _make_tool(self, registered: str, listing: mcp_types.Tool) -> Tool:
        upstream = listing.name

        async def call(ctx: ToolContext, **arguments: Any) -> ToolOutput:
            return to_tool_output(await self.call_tool(upstream, arguments, ctx))

        call.__name__ = registered
        return make_tool(
            call,
            name=registered,
            description=listing.description or listing.title or upstream,
            parameters=strict_schema(listing.input_schema, self.allow_extra_arguments),
            timeout=self.timeout,
            output_schema=listing.output_schema,
        )

    # -- calls -------------------------------------------------------------------------------

    async def client(self) -> Client:
        """The live ``mcp.Client`` (the server is started again if it died): for what the
        tools do not cover, such as resources and prompts."""
        return await self._ensure()

    async def _ensure(self) -> Client:
        """The live client, starting the server again if it died."""
        client = self._client
        if client is not None and self._owner is not None and not self._owner.done():
            return client
        async with self._lock:
            if self._owner is not None and self._client is None:
                await _settle(self._owner)
            return await self._connect_locked()

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        ctx: ToolContext | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        progress: Callable[[float, float | None, str | None], Any] | None = None,
    ) -> mcp_types.CallToolResult:
        """Call the server's tool ``name`` (its own name, not the registered one).

        With ``ctx``, the ``mcp.*`` attributes go on the call's ``execute_tool`` span and
        progress notifications become the tool's progress. The current trace context is
        injected into ``params._meta`` (over ``meta``'s own keys). Raises
        :class:`MCPToolError` for a JSON-RPC error or a server that is gone.
        """
        client = await self._ensure()
        attributes = {
            **self._span_attributes,
            A.MCP_METHOD_NAME: "tools/call",
            A.MCP_PROTOCOL_VERSION: client.protocol_version,
        }
        out_meta: dict[str, Any] = dict(meta or {})
        propagate.inject(out_meta)  # traceparent, tracestate, baggage: the current span's

        listeners = [fn for fn in (progress, _FORWARD_PROGRESS.get()) if fn is not None]

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            if ctx is not None:
                ctx.progress({"progress": done, "total": total, "message": message})
            for listener in listeners:
                outcome = listener(done, total, message)
                if inspect.isawaitable(outcome):
                    await outcome

        dispatcher = getattr(client.session, "_dispatcher", None)
        next_id = getattr(dispatcher, "_next_id", None)
        token = _OWN_SPAN.set(True)
        try:
            result = await client.call_tool(
                name,
                dict(arguments),
                progress_callback=cast("ProgressFnT", on_progress),
                meta=cast("RequestParamsMeta", out_meta) if out_meta else None,
            )
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                self._drop()
                raise self._gone(exc, attributes) from None
            code = str(exc.error.code)
            raise MCPToolError(
                f"MCP error {code}: {exc.error.message}",
                error_type=code,
                attributes={**attributes, A.RPC_RESPONSE_STATUS_CODE: code},
            ) from None
        except (OSError, EOFError, RuntimeError, anyio.ClosedResourceError) as exc:
            self._drop()
            raise self._gone(exc, attributes) from None
        except Exception as exc:
            if self._owner is None or self._owner.done():
                raise self._gone(exc, attributes) from None
            raise
        finally:
            _OWN_SPAN.reset(token)
        if isinstance(next_id, int) and getattr(dispatcher, "_next_id", None) == next_id + 1:
            attributes[A.JSONRPC_REQUEST_ID] = str(next_id)  # no other request in between
        if ctx is not None:
            ctx.set_attributes(attributes)
        if self.max_result_bytes is not None:
            _check_size(result, self.max_result_bytes, name, attributes)
        return result

    def _drop(self) -> None:
        """Let go of a connection that failed: the next call starts a new one."""
        self._client = None
        if self._stop is not None:
            self._stop.set()

    def _gone(self, exc: BaseException, attributes: Mapping[str, Any]) -> MCPToolError:
        reason = self._failure or exc
        return MCPToolError(
            f"the MCP server {self.name!r} is gone ({type(reason).__name__}: "
            f"{_first_message(reason)}); it is started again on the next call",
            error_type=CONNECTION_ERROR,
            attributes=attributes,
        )

    # -- changes -----------------------------------------------------------------------------

    async def _on_message(self, message: Any) -> None:
        notification = getattr(message, "root", message)
        if isinstance(notification, mcp_types.ToolListChangedNotification):
            task = asyncio.get_running_loop().create_task(self._refresh_quietly())
            self._background.add(task)  # held until done: the loop keeps only weak references
            task.add_done_callback(self._background.discard)
        elif self.message_callback is not None and isinstance(notification, _PASSED_ON):
            outcome = self.message_callback(notification)
            if inspect.isawaitable(outcome):
                await outcome

    async def _watch_tools(self, client: Client) -> None:
        """On a 2026-07-28 connection, listen for changes of the tool list."""
        capabilities = client.server_capabilities
        tools_cap = getattr(capabilities, "tools", None)
        if tools_cap is None or not getattr(tools_cap, "list_changed", False):
            return
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    await self._refresh_quietly()
        except Exception as exc:  # an older protocol (notifications instead) or a dropped stream
            logger.debug("no tools/list_changed subscription on %s: %s", self.name, exc)

    async def _refresh_quietly(self) -> None:
        try:
            await self.refresh()
        except Exception:
            logger.warning("refreshing the tools of MCP server %r failed", self.name, exc_info=True)


def _target(
    server: ServerTarget, env: Mapping[str, str] | None, cwd: str | None, die: bool
) -> tuple[str | None, StdioServerParameters | None, list[str] | None]:
    """(URL, stdio parameters, the command line as given) of a server target."""
    if isinstance(server, str):
        return server, None, None
    if isinstance(server, StdioServerParameters):
        return None, server, [server.command, *server.args]
    command = [str(part) for part in server]
    if not command:
        raise ValueError("an MCP server command line cannot be empty")
    launch = dies_with_parent(command) if die else command
    params = StdioServerParameters(
        command=launch[0], args=launch[1:], env=dict(env) if env else None, cwd=cwd
    )
    return None, params, command


@contextlib.asynccontextmanager
async def _open_client(
    target: str | StdioServerParameters,
    headers: Mapping[str, str],
    common: dict[str, Any],
    span_attributes: dict[str, Any],
) -> AsyncIterator[Client]:
    """An ``mcp.Client`` over stdio, or over Streamable HTTP (its session id kept in
    ``span_attributes``)."""
    if isinstance(target, StdioServerParameters):
        async with Client(target, **common) as client:
            yield client
        return
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def keep_session_id(response: Any) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id:
            span_attributes[A.MCP_SESSION_ID] = session_id

    http = create_mcp_http_client(headers=dict(headers) or None)
    http.event_hooks["response"].append(keep_session_id)
    async with (
        http,
        Client(streamable_http_client(target, http_client=http), **common) as client,
    ):
        yield client


def _transport_attributes(url: str | None) -> dict[str, Any]:
    if url is None:
        return {A.NETWORK_TRANSPORT: "pipe"}
    parts = urlsplit(url)
    attributes: dict[str, Any] = {A.NETWORK_TRANSPORT: "tcp"}
    if parts.hostname:
        attributes[A.SERVER_ADDRESS] = parts.hostname
        attributes[A.SERVER_PORT] = parts.port or (443 if parts.scheme == "https" else 80)
    return attributes


async def _settle(owner: asyncio.Task[None]) -> None:
    """Wait (briefly) for a dropped connection's task to finish closing it."""
    try:
        await asyncio.wait_for(asyncio.shield(owner), timeout=5)
    except TimeoutError:
        owner.cancel()
    except BaseException:
        pass


async def _all_tools(client: Client) -> list[mcp_types.Tool]:
    """The server's tools, every page (a paginator that never ends is cut off at 100)."""
    listed: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        listed.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return listed


def _check_size(
    result: mcp_types.CallToolResult, limit: int, name: str, attributes: Mapping[str, Any]
) -> None:
    """A result of more than ``limit`` bytes (as JSON) refused."""
    size = len(result.model_dump_json(by_alias=True, exclude_none=True))
    if size > limit:
        raise MCPToolError(
            f"the result of {name!r} is {size:,} bytes, more than the {limit:,} a "
            "message to the host may carry here (Streamable HTTP events are limited to "
            "1 MiB by most clients); ask for less, or serve with http_responses = "
            '"json"',
            error_type=RESULT_TOO_LARGE,
            attributes=attributes,
        )


def _first_message(exc: BaseException) -> str:
    """The message of an exception, or of the first one inside an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


@contextlib.asynccontextmanager
async def mcp_tools(
    registry: ToolRegistry, *servers: MCPServerTools
) -> AsyncIterator[list[MCPServerTools]]:
    """Connect to several servers and register their tools in ``registry``; close them after."""
    async with contextlib.AsyncExitStack() as stack:
        for server in servers:
            await stack.enter_async_context(server)
            server.register(registry)
        yield list(servers)
