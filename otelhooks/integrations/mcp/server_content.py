"""The SDK server's handlers for what is not a tool: resources (listing, templates, reading,
subscriptions), prompts, completion and the logging level. Each serves the caller's own
upstream set, shows only what the caller's grant allows, refuses the rest as if it did not
exist (in the audit log), and redacts what it passes on.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import mcp.types as mcp_types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from .access import Caller
from .client import MCPServerTools
from .gateway import RESOURCE_NOT_FOUND, Gateway, Refused
from .server_hosts import HostMessages, connection_of
from .upstreams import UpstreamSet

MAX_PAGES: Final = 100
"""Pages of a listing read from one upstream: a server that pages forever is cut off there."""


class Sessions(Protocol):
    """Who calls, and the upstream set that serves them (the SDK server)."""

    def caller(self, ctx: ServerRequestContext[Any]) -> Caller:
        """Who made the request of ``ctx`` (authenticated, with its grant)."""

    async def set_for(self, ctx: ServerRequestContext[Any], caller: Caller) -> UpstreamSet:
        """The upstream set that serves ``caller`` in the session of ``ctx`` (started on first
        use)."""


class ContentHandlers:
    """The handlers for resources, prompts, completion and logging, over ``sessions``."""

    def __init__(self, gateway: Gateway, sessions: Sessions, hosts: HostMessages) -> None:
        self.gateway = gateway
        self.sessions = sessions
        self.hosts = hosts

    async def listen(
        self, ctx: ServerRequestContext[Any], params: mcp_types.SubscriptionsListenRequestParams
    ) -> mcp_types.SubscriptionsListenResult:
        """``subscriptions/listen`` (2026-07-28): a stream of the events of this caller's
        upstream set only; the resources it names (those it may use) are subscribed upstream."""
        caller = self.sessions.caller(ctx)
        assert caller.grant is not None
        uset = await self.sessions.set_for(ctx, caller)
        for uri in params.notifications.resource_subscriptions or ():
            if caller.grant.resource(str(uri)):
                await self._subscribe_upstream(uset, None, str(uri))
        return await uset.listen(ctx, params)

    async def _resource_allowed(self, ctx: ServerRequestContext[Any], uri: str) -> Caller:
        caller = self.sessions.caller(ctx)
        assert caller.grant is not None
        if not caller.grant.resource(uri):
            refused = Refused(RESOURCE_NOT_FOUND, f"Resource not found: {uri[:200]}")
            await self.gateway.refuse(caller, ctx.method, uri, refused, "resource not allowed")
            raise refused
        return caller

    async def subscribe(
        self, ctx: ServerRequestContext[Any], params: mcp_types.SubscribeRequestParams
    ) -> mcp_types.EmptyResult:
        """``resources/subscribe``: only for a URI the caller may read, on its own upstream set."""
        uri = str(params.uri)
        caller = await self._resource_allowed(ctx, uri)
        uset = await self.sessions.set_for(ctx, caller)
        await self._subscribe_upstream(uset, connection_of(ctx.session), uri)
        return mcp_types.EmptyResult()

    async def _subscribe_upstream(self, uset: UpstreamSet, session: Any, uri: str) -> None:
        if session is not None:
            with contextlib.suppress(TypeError):
                self.hosts.subscribed.setdefault(session, set()).add(uri)
        for server in self._owners(uset, uri):
            client = await server.client()
            with contextlib.suppress(MCPError):
                await client.subscribe_resource(uri)
                return

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any], params: mcp_types.UnsubscribeRequestParams
    ) -> mcp_types.EmptyResult:
        """``resources/unsubscribe``: only for a URI the caller may read, on its own upstreams."""
        uri = str(params.uri)
        caller = await self._resource_allowed(ctx, uri)
        uset = await self.sessions.set_for(ctx, caller)
        self.hosts.subscribed.get(connection_of(ctx.session), set()).discard(uri)
        still = any(uri in self.hosts.subscribed.get(s, set()) for s in self.hosts.hosts(uset))
        if not still:
            for server in self._owners(uset, uri):
                why = self.gateway.cedar_refusal(caller, "resource", server.name, uri)
                if why is not None:
                    refused = Refused(RESOURCE_NOT_FOUND, f"Resource not found: {uri[:200]}")
                    await self.gateway.refuse(caller, ctx.method, uri, refused, why, hook="cedar")
                    raise refused
                client = await server.client()
                with contextlib.suppress(MCPError):
                    await client.unsubscribe_resource(uri)
        return mcp_types.EmptyResult()

    async def set_logging_level(
        self, ctx: ServerRequestContext[Any], params: mcp_types.SetLevelRequestParams
    ) -> mcp_types.EmptyResult:
        """``logging/setLevel`` on the caller's own upstreams that offer logging."""
        uset = await self.sessions.set_for(ctx, self.sessions.caller(ctx))
        for server in uset.offering("logging"):
            client = await server.client()
            with contextlib.suppress(MCPError), warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.set_logging_level(params.level)
        return mcp_types.EmptyResult()

    # -- resources, prompts, completion ------------------------------------------------------

    def _owners(self, uset: UpstreamSet, uri: str) -> list[MCPServerTools]:
        owner = uset.routes.resources.get(uri)
        return [owner] if owner is not None else uset.offering("resources")

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListResourcesResult:
        """``resources/list``: the resources the caller may read (empty when it may read none)."""
        caller = self.sessions.caller(ctx)
        assert caller.grant is not None
        if not caller.grant.may("resources"):
            return mcp_types.ListResourcesResult(resources=[])
        uset = await self.sessions.set_for(ctx, caller)
        resources: list[mcp_types.Resource] = []
        async with uset.using():
            for server in uset.offering("resources"):
                client = await server.client()
                for item in await _all_pages(client.list_resources, "resources"):
                    uri = str(item.uri)
                    uset.routes.resources[uri] = server
                    if caller.grant.resource(uri):
                        resources.append(item)
        return self.gateway.scrub(mcp_types.ListResourcesResult(resources=resources))

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListResourceTemplatesResult:
        """``resources/templates/list``: the templates of what the caller may read (empty when
        none)."""
        caller = self.sessions.caller(ctx)
        assert caller.grant is not None
        if not caller.grant.may("resources"):
            return mcp_types.ListResourceTemplatesResult(resource_templates=[])
        uset = await self.sessions.set_for(ctx, caller)
        templates: list[mcp_types.ResourceTemplate] = []
        async with uset.using():
            for server in uset.offering("resources"):
                client = await server.client()
                pages = await _all_pages(client.list_resource_templates, "resource_templates")
                for item in pages:
                    uset.routes.templates[item.uri_template] = server
                    if caller.grant.resource(item.uri_template):
                        templates.append(item)
        return self.gateway.scrub(
            mcp_types.ListResourceTemplatesResult(resource_templates=templates)
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: mcp_types.ReadResourceRequestParams
    ) -> mcp_types.ReadResourceResult:
        """``resources/read``: a URI the caller may read, from its own upstreams, redacted."""
        uri = str(params.uri)
        caller = await self._resource_allowed(ctx, uri)
        uset = await self.sessions.set_for(ctx, caller)
        last: MCPError | None = None
        async with uset.using():
            for server in self._owners(uset, uri):
                why = self.gateway.cedar_refusal(caller, "resource", server.name, uri)
                if why is not None:
                    refused = Refused(RESOURCE_NOT_FOUND, f"Resource not found: {uri[:200]}")
                    await self.gateway.refuse(caller, ctx.method, uri, refused, why, hook="cedar")
                    raise refused
                client = await server.client()
                try:
                    return self.gateway.scrub(await client.read_resource(uri, cache_mode="bypass"))
                except MCPError as exc:
                    last = exc
        if last is not None:
            raise last
        raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri[:200]}")

    async def _prompt_listing(self, uset: UpstreamSet) -> list[mcp_types.Prompt]:
        prompts: list[mcp_types.Prompt] = []
        for server in uset.offering("prompts"):
            client = await server.client()
            for item in await _all_pages(client.list_prompts, "prompts"):
                name = f"{server.prefix}_{item.name}" if server.prefix else item.name
                if name in uset.routes.prompts and uset.routes.prompts[name][0] is not server:
                    continue  # a name another upstream serves
                uset.routes.prompts[name] = (server, item.name)
                prompts.append(item.model_copy(update={"name": name}))
        return prompts

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListPromptsResult:
        """``prompts/list``: the prompts the caller may get (empty when none)."""
        caller = self.sessions.caller(ctx)
        assert caller.grant is not None
        if not caller.grant.may("prompts"):
            return mcp_types.ListPromptsResult(prompts=[])
        uset = await self.sessions.set_for(ctx, caller)
        async with uset.using():
            prompts = await self._prompt_listing(uset)
        return self.gateway.scrub(
            mcp_types.ListPromptsResult(prompts=[p for p in prompts if caller.grant.prompt(p.name)])
        )

    async def _prompt_route(
        self, ctx: ServerRequestContext[Any], name: str
    ) -> tuple[MCPServerTools, str]:
        caller = self.sessions.caller(ctx)
        assert caller.grant is not None
        refused = Refused(mcp_types.INVALID_PARAMS, f"Unknown prompt: {name[:100]!r}")
        if not caller.grant.prompt(name):
            await self.gateway.refuse(caller, ctx.method, name, refused, "prompt not allowed")
            raise refused
        uset = await self.sessions.set_for(ctx, caller)
        route = uset.routes.prompts.get(name)
        if route is None:
            await self._prompt_listing(uset)
            route = uset.routes.prompts.get(name)
        if route is None:
            raise refused
        why = self.gateway.cedar_refusal(caller, "prompt", route[0].name, route[1])
        if why is not None:
            await self.gateway.refuse(caller, ctx.method, name, refused, why, hook="cedar")
            raise refused
        return route

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], params: mcp_types.GetPromptRequestParams
    ) -> mcp_types.GetPromptResult:
        """``prompts/get``: a prompt the caller may get, from its upstream, redacted."""
        server, name = await self._prompt_route(ctx, params.name)
        client = await server.client()
        return self.gateway.scrub(await client.get_prompt(name, params.arguments))

    async def complete(
        self, ctx: ServerRequestContext[Any], params: mcp_types.CompleteRequestParams
    ) -> mcp_types.CompleteResult:
        """``completion/complete``: for a prompt or resource the caller may use, when completion is
        allowed to it."""
        caller = self.sessions.caller(ctx)
        ref = params.ref
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        if isinstance(ref, mcp_types.PromptReference):
            server, name = await self._prompt_route(ctx, ref.name)
            ref = ref.model_copy(update={"name": name})
            candidates = [server]
        else:
            await self._resource_allowed(ctx, ref.uri)
            uset = await self.sessions.set_for(ctx, caller)
            owner = uset.routes.templates.get(ref.uri)
            candidates = [owner] if owner is not None else uset.offering("completions")
        for server in candidates:
            client = await server.client()
            with contextlib.suppress(MCPError):
                return await client.complete(ref, argument, context_arguments=context)
        return mcp_types.CompleteResult(completion=mcp_types.Completion(values=[]))


async def _all_pages(fetch: Callable[..., Awaitable[Any]], attribute: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await fetch(cursor=cursor)
        items.extend(getattr(page, attribute))
        cursor = page.next_cursor
        if not cursor:
            break
    return items
