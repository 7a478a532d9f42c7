"""``otelhooks mcp proxy``: an MCP server that puts the hook boundary in front of others.

The proxy connects to one or more upstream servers (:class:`MCPServerTools`) and serves their
tools to a host (Claude Code, Claude Desktop, VS Code, any MCP client) over stdio or Streamable
HTTP. Every ``tools/call`` runs through before -> run -> after with the policy's hooks (see
:mod:`otelhooks.integrations.mcp_policy`) and redaction on by default: a blocked call answers
``isError: true`` with the reason and never reaches the upstream. Everything else (resources,
resource templates, prompts, completion) is passed through to the upstream that offers it, with
secrets redacted from the text when redaction is on; the SDK traces those as MCP spans.

Tracing: the host's ``params._meta.traceparent`` is the parent of the proxy's spans (the
``mcp`` SDK's server span, then otelhooks' ``execute_tool``), and the proxy's context is
injected into the upstream request, so host -> proxy -> server is one trace. Upstream progress is
passed on to the host; a host's cancellation cancels the upstream call. Sampling and elicitation
requests of an upstream go to the host whose call they belong to, when its connection can carry
server requests. With stdio, nothing but protocol is written to stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fnmatch
import logging
import uuid
import warnings
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import mcp.types as mcp_types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from opentelemetry.trace import TracerProvider
from pydantic import BaseModel, ValidationError

from ...builtin import RedactionHook, StructlogEvents
from ...core.execute import DEFAULT_TOOL_TIMEOUT, ToolExecutor
from ...core.hooks import Hooks, UnmatchedToolPattern, UnmatchedToolPatternError
from ...core.messages import AgentContext, ToolCall, ToolResult
from ...core.tools import ToolRegistry
from .client import MCPServerTools, progress_to, to_tool_output
from .policy import ProxyPolicy, UpstreamConfig

logger = logging.getLogger("otelhooks.mcp.proxy")

ModelT = TypeVar("ModelT", bound=BaseModel)


class ProxyStartError(RuntimeError):
    """The proxy cannot serve: no upstream started, or the policy does not fit the tools."""


@dataclass(slots=True)
class _HostCall:
    """A host's ``tools/call`` in flight: where an upstream's requests for it are sent."""

    session: Any
    request_id: Any


_HOST: contextvars.ContextVar[_HostCall | None] = contextvars.ContextVar(
    "otelhooks_proxy_host_call", default=None
)


@dataclass
class _Routes:
    """Which upstream serves a prompt or a resource the host asks for."""

    prompts: dict[str, tuple[MCPServerTools, str]] = field(default_factory=dict)
    resources: dict[str, MCPServerTools] = field(default_factory=dict)
    templates: dict[str, MCPServerTools] = field(default_factory=dict)


class MCPProxy:
    """The tools of ``upstreams`` (and the policy's own), served through the hook boundary.

    ``policy`` gives the hooks, limits and redaction (default: everything allowed, redaction on);
    ``hooks`` are more hook objects, run after the policy's. ``tracer_provider`` defaults to the
    global one. Use :meth:`start` / :meth:`close` around :meth:`serve_stdio`,
    :meth:`serve_http` or :meth:`server` (an ``mcp`` low-level ``Server`` to run yourself).
    """

    def __init__(
        self,
        policy: ProxyPolicy | None = None,
        upstreams: Sequence[UpstreamConfig] = (),
        *,
        hooks: Iterable[Any] = (),
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.policy = policy or ProxyPolicy()
        configs = [*self.policy.upstreams, *upstreams]
        if not configs:
            raise ValueError("the proxy needs at least one upstream server")
        names = [c.name for c in configs]
        if len(set(names)) != len(names):
            raise ValueError(f"upstream names must differ: {names}")
        prefixed = self.policy.prefix if self.policy.prefix is not None else len(configs) > 1
        self.servers: dict[str, MCPServerTools] = {
            c.name: MCPServerTools(
                c.url if c.url else list(c.command),
                prefix=(c.prefix or c.name) if prefixed else c.prefix,
                name=c.name,
                timeout=c.timeout,
                env=c.environment(),
                cwd=c.cwd,
                headers=c.headers,
                sampling_callback=self._forward_sampling,
                elicitation_callback=self._forward_elicitation,
                on_tools_changed=self._tools_changed,
                mode=c.mode,
            )
            for c in configs
        }
        self.prefixed = prefixed
        self.registry = ToolRegistry()
        self.hooks = Hooks()
        if self.policy.redaction:
            self.hooks.add(RedactionHook(self.policy.redactor))
        for spec in self.policy.hook_specs():
            self.hooks.add(
                spec.hook,
                tools=spec.tools,
                timeout=spec.timeout,
                before_failure=spec.before_failure or self.policy.before_failure,  # type: ignore[arg-type]
                after_failure=spec.after_failure or self.policy.after_failure,  # type: ignore[arg-type]
            )
        for hook in hooks:
            self.hooks.add(hook)
        self.hooks.add(StructlogEvents())
        self.executor = ToolExecutor(
            self.registry,
            self.hooks,
            tracer_provider=tracer_provider,
            tool_timeout=self.policy.timeout or DEFAULT_TOOL_TIMEOUT,
        )
        self._down: set[str] = set()
        self._routes = _Routes()
        self._in_flight: list[_HostCall] = []
        self._host_sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._run_ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._retry_lock = asyncio.Lock()

    # -- life --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every upstream and register their tools. An upstream that fails is logged and
        tried again when the host next lists tools; none starting is a :class:`ProxyStartError`.
        Tool patterns of the policy that match no tool are warned about (an error when the
        policy is strict)."""
        servers = list(self.servers.values())
        outcomes = await asyncio.gather(*(s.connect() for s in servers), return_exceptions=True)
        for server, outcome in zip(servers, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                logger.error("upstream %r did not start: %s", server.name, outcome)
                self._down.add(server.name)
            else:
                server.register(self.registry)
        if len(self._down) == len(servers):
            raise ProxyStartError("no upstream MCP server started (see the errors above)")
        self.check_policy()

    def check_policy(self) -> list[str]:
        """Warn (as log lines naming the tools there are) about policy tool patterns that
        match no tool; raise :class:`ProxyStartError` for them when the policy is strict."""
        names = [t.name for t in self.registry]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UnmatchedToolPattern)
            try:
                unmatched = self.hooks.check_tools(names, strict=self.policy.strict)
            except UnmatchedToolPatternError as exc:
                raise ProxyStartError(f"{self.policy.source}: {exc}") from None
        for warning in caught:
            logger.warning("%s: %s", self.policy.source, warning.message)
        return unmatched

    async def close(self) -> None:
        """Stop every upstream."""
        await asyncio.gather(*(s.close() for s in self.servers.values()), return_exceptions=True)

    async def __aenter__(self) -> MCPProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- serving -----------------------------------------------------------------------------

    def server(self) -> Server[Any]:
        """A low-level ``mcp`` server over the proxy: tools always; resources, prompts and
        completion when an upstream offers them."""
        handlers: dict[str, Any] = {
            "on_list_tools": self._list_tools,
            "on_call_tool": self._call_tool,
        }
        capabilities = [self._capabilities(s) for s in self.servers.values()]
        if any(c is not None and c.resources is not None for c in capabilities):
            handlers["on_list_resources"] = self._list_resources
            handlers["on_list_resource_templates"] = self._list_resource_templates
            handlers["on_read_resource"] = self._read_resource
        if any(c is not None and c.prompts is not None for c in capabilities):
            handlers["on_list_prompts"] = self._list_prompts
            handlers["on_get_prompt"] = self._get_prompt
        if any(c is not None and c.completions is not None for c in capabilities):
            handlers["on_completion"] = self._complete
        return Server(self.policy.name, version=_version(), **handlers)

    def initialization_options(self, server: Server[Any]) -> Any:
        """The options ``server.run`` takes: tools/list changes announced."""
        return server.create_initialization_options(NotificationOptions(tools_changed=True))

    async def serve_stdio(self) -> None:
        """Serve one host over this process's stdin/stdout until it closes them."""
        from mcp.server.stdio import stdio_server

        server = self.server()
        async with stdio_server() as (read, write):
            await server.run(read, write, self.initialization_options(server))

    async def serve_http(
        self, host: str = "127.0.0.1", port: int = 8765, path: str = "/mcp"
    ) -> None:
        """Serve hosts over Streamable HTTP at ``http://{host}:{port}{path}``."""
        import uvicorn

        app = self.server().streamable_http_app(streamable_http_path=path, host=host)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        await uvicorn.Server(config).serve()

    # -- tools -------------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        self._host_sessions.add(ctx.session)
        await self._retry_down()
        listed: list[mcp_types.Tool] = []
        for server in self.servers.values():
            for entry in server.listings:
                if self.policy.list_denied or not self.policy.denies(entry.name):
                    listed.append(entry.listing.model_copy(update={"name": entry.name}))
        return mcp_types.ListToolsResult(tools=listed)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        self._host_sessions.add(ctx.session)
        host = _HostCall(ctx.session, ctx.request_id)
        call_id = str(ctx.request_id) if ctx.request_id is not None else uuid.uuid4().hex

        async def forward_progress(done: float, total: float | None, message: str | None) -> None:
            try:
                await ctx.session.report_progress(done, total, message)
            except Exception:  # the host went away: the call goes on
                logger.debug("progress not delivered to the host", exc_info=True)

        token = _HOST.set(host)
        self._in_flight.append(host)
        try:
            with progress_to(forward_progress):
                result = await self.executor.execute(
                    ToolCall(call_id, params.name, dict(params.arguments or {})),
                    context=AgentContext(
                        run_id=self._run_id(ctx.session), agent_name=self.policy.name
                    ),
                    timeout=self._timeout_for(params.name),
                )
        finally:
            self._in_flight.remove(host)
            _HOST.reset(token)
        return call_tool_result(result)

    def _timeout_for(self, tool: str) -> float | None:
        for pattern, seconds in self.policy.tool_timeouts.items():
            if fnmatch.fnmatchcase(tool, pattern):
                return seconds
        return None

    def _run_id(self, session: Any) -> str:
        """One run per host connection: call limits count per connection."""
        run_id = self._run_ids.get(session)
        if run_id is None:
            run_id = self._run_ids[session] = uuid.uuid4().hex
        return run_id

    async def _retry_down(self) -> None:
        if not self._down:
            return
        async with self._retry_lock:
            for name in list(self._down):
                server = self.servers[name]
                try:
                    await asyncio.wait_for(server.connect(), timeout=30)
                except Exception as exc:
                    logger.warning("upstream %r is still down: %s", name, exc)
                    continue
                self._down.discard(name)
                server.register(self.registry)
                logger.info("upstream %r is up", name)

    async def _tools_changed(self, server: MCPServerTools) -> None:
        for session in list(self._host_sessions):
            with contextlib.suppress(Exception):  # a host that left, or one that listens instead
                await session.send_tool_list_changed()

    # -- pass-through ------------------------------------------------------------------------

    def _capabilities(self, server: MCPServerTools) -> mcp_types.ServerCapabilities | None:
        client = server._client
        return client.server_capabilities if client is not None else None

    def _offering(self, what: str) -> list[MCPServerTools]:
        return [
            s
            for s in self.servers.values()
            if (c := self._capabilities(s)) is not None and getattr(c, what) is not None
        ]

    def _scrub(self, model: ModelT) -> ModelT:
        """``model`` with secrets redacted from its text (unchanged when redaction is off)."""
        if not self.policy.redaction:
            return model
        data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
        clean, paths = self.policy.redactor.redact(data, "result")
        return model if not paths else type(model).model_validate(clean)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListResourcesResult:
        resources: list[mcp_types.Resource] = []
        for server in self._offering("resources"):
            client = await server.client()
            for item in await _all_pages(client.list_resources, "resources"):
                self._routes.resources[str(item.uri)] = server
                resources.append(item)
        return mcp_types.ListResourcesResult(resources=resources)

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListResourceTemplatesResult:
        templates: list[mcp_types.ResourceTemplate] = []
        for server in self._offering("resources"):
            client = await server.client()
            pages = await _all_pages(client.list_resource_templates, "resource_templates")
            for item in pages:
                self._routes.templates[item.uri_template] = server
                templates.append(item)
        return mcp_types.ListResourceTemplatesResult(resource_templates=templates)

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: mcp_types.ReadResourceRequestParams
    ) -> mcp_types.ReadResourceResult:
        uri = str(params.uri)
        owner = self._routes.resources.get(uri)
        candidates = [owner] if owner is not None else self._offering("resources")
        last: MCPError | None = None
        for server in candidates:
            client = await server.client()
            try:
                return self._scrub(await client.read_resource(uri, cache_mode="bypass"))
            except MCPError as exc:
                last = exc
        if last is not None:
            raise last
        raise MCPError(mcp_types.INVALID_PARAMS, f"no upstream offers the resource {uri}")

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListPromptsResult:
        prompts: list[mcp_types.Prompt] = []
        for server in self._offering("prompts"):
            client = await server.client()
            for item in await _all_pages(client.list_prompts, "prompts"):
                name = (
                    f"{server.prefix}_{item.name}" if self.prefixed and server.prefix else item.name
                )
                self._routes.prompts[name] = (server, item.name)
                prompts.append(item.model_copy(update={"name": name}))
        return mcp_types.ListPromptsResult(prompts=prompts)

    async def _prompt_route(self, name: str) -> tuple[MCPServerTools, str]:
        route = self._routes.prompts.get(name)
        if route is None:
            await self._list_prompts(None, None)  # type: ignore[arg-type]
            route = self._routes.prompts.get(name)
        if route is None:
            raise MCPError(mcp_types.INVALID_PARAMS, f"unknown prompt {name!r}")
        return route

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: mcp_types.GetPromptRequestParams
    ) -> mcp_types.GetPromptResult:
        server, name = await self._prompt_route(params.name)
        client = await server.client()
        return self._scrub(await client.get_prompt(name, params.arguments))

    async def _complete(
        self, ctx: ServerRequestContext[Any], params: mcp_types.CompleteRequestParams
    ) -> mcp_types.CompleteResult:
        ref = params.ref
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        if isinstance(ref, mcp_types.PromptReference):
            server, name = await self._prompt_route(ref.name)
            ref = ref.model_copy(update={"name": name})
            candidates = [server]
        else:
            owner = self._routes.templates.get(ref.uri)
            candidates = [owner] if owner is not None else self._offering("completions")
        for server in candidates:
            client = await server.client()
            with contextlib.suppress(MCPError):
                return await client.complete(ref, argument, context_arguments=context)
        return mcp_types.CompleteResult(completion=mcp_types.Completion(values=[]))

    # -- requests from upstreams -------------------------------------------------------------

    def _host(self) -> _HostCall | None:
        """The host call an upstream's request belongs to: the current one, else the only one
        in flight (a request that arrives on the upstream's own channel)."""
        host = _HOST.get()
        if host is None and len(self._in_flight) == 1:
            host = self._in_flight[0]
        return host

    async def _ask_host(
        self, what: str, request: Any, result_type: type[ModelT]
    ) -> ModelT | mcp_types.ErrorData:
        host = self._host()
        if host is None or not getattr(host.session, "can_send_request", False):
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message=f"otelhooks proxy: the host cannot answer {what} requests on this call",
            )
        try:
            return await host.session.send_request(  # type: ignore[no-any-return]
                request,
                result_type,
                metadata=ServerMessageMetadata(related_request_id=host.request_id),
            )
        except MCPError as exc:
            return exc.error

    async def _forward_sampling(
        self, context: Any, params: mcp_types.CreateMessageRequestParams
    ) -> Any:
        result_type: type[BaseModel] = (
            mcp_types.CreateMessageResultWithTools
            if params.tools
            else mcp_types.CreateMessageResult
        )
        return await self._ask_host(
            "sampling", mcp_types.CreateMessageRequest(params=params), result_type
        )

    async def _forward_elicitation(self, context: Any, params: Any) -> Any:
        return await self._ask_host(
            "elicitation", mcp_types.ElicitRequest(params=params), mcp_types.ElicitResult
        )


def call_tool_result(result: ToolResult) -> mcp_types.CallToolResult:
    """A :class:`~otelhooks.ToolResult` as the host sees it: the upstream's own result (every
    content block, ``structuredContent``) when the hooks kept it, redacted; else the result's
    text and media."""
    details = result.details
    if isinstance(details, dict) and isinstance(details.get("content"), list):
        try:
            upstream = mcp_types.CallToolResult.model_validate(details)
        except ValidationError:
            upstream = None
        if upstream is not None:
            same = to_tool_output(upstream)
            if same.content == result.content and same.is_error == result.is_error:
                return upstream
    blocks: list[Any] = [mcp_types.TextContent(type="text", text=result.content)]
    for media in result.media:
        kind = mcp_types.ImageContent if media.kind == "image" else mcp_types.AudioContent
        blocks.append(kind(type=media.kind, data=media.data, mime_type=media.mime_type))
    structured = details.get("structuredContent") if isinstance(details, dict) else None
    return mcp_types.CallToolResult(
        content=blocks,
        structured_content=structured if isinstance(structured, dict) else None,
        is_error=result.is_error,
    )


async def _all_pages(fetch: Callable[..., Awaitable[Any]], attribute: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(1000):  # a server that pages forever is cut off
        page = await fetch(cursor=cursor)
        items.extend(getattr(page, attribute))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


def _version() -> str:
    from ...version import __version__

    return __version__
