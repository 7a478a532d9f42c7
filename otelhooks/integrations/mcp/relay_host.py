"""What the stdio relay asks of its host on its own (an approval's form), and the Cedar
decisions on the resource reads and prompts it relays."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import mcp.types as mcp_types

from .access import Caller
from .gateway import RESOURCE_NOT_FOUND, Gateway, Refused
from .policy import UpstreamConfig


class OwnRequests:
    """Requests of the relay's own to the host (ids ``otelhooks-...``, never an upstream's),
    and the host's answers to them."""

    def __init__(self, to_host: Callable[[Any], None]) -> None:
        self.to_host = to_host
        self.waiting: dict[str, asyncio.Future[Any]] = {}

    async def ask(self, request: Any, result_type: Any) -> Any:
        """Send ``request`` (an ``mcp`` model) to the host and wait for its answer (the caller
        bounds the wait); the result as ``result_type``, or ``ErrorData``."""
        request_id = f"otelhooks-{uuid.uuid4().hex}"
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = answer
        data = request.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            self.to_host({"jsonrpc": "2.0", "id": request_id, **data})
            message = await answer
        finally:
            self.waiting.pop(request_id, None)
        if isinstance(message.get("error"), dict):
            return mcp_types.ErrorData.model_validate(message["error"])
        try:
            return result_type.model_validate(message.get("result") or {})
        except ValueError as exc:
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=str(exc)[:200])

    def answered(self, request_id: Any, message: dict[str, Any]) -> bool:
        """Whether ``message`` answers one of these requests (it is then taken)."""
        waiting = self.waiting.pop(request_id, None) if isinstance(request_id, str) else None
        if waiting is None:
            return False
        if not waiting.done():
            waiting.set_result(message)
        return True


def target_refused(
    gateway: Gateway, caller: Caller, config: UpstreamConfig, method: str, target: str | None
) -> Refused | None:
    """A resource or prompt ``caller`` may not use (its grant, then the Cedar policies),
    refused as if it did not exist (``None``: it may go on)."""
    grant = caller.grant
    assert grant is not None
    if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
        if target is None or not grant.resource(target):
            return Refused(RESOURCE_NOT_FOUND, f"Resource not found: {str(target)[:200]}")
    elif method == "prompts/get" and (target is None or not grant.prompt(target)):
        return Refused(mcp_types.INVALID_PARAMS, f"Unknown prompt: {str(target)[:100]!r}")
    if target is not None and method in ("resources/read", "prompts/get"):
        return cedar_refused(gateway, caller, config, method, target)
    return None


def cedar_refused(
    gateway: Gateway, caller: Caller, config: UpstreamConfig, method: str, target: str
) -> Refused | None:
    """A resource read or prompt of ``config``'s upstream the Cedar policies refuse, answered
    as if it did not exist (``None``: permitted)."""
    if method == "resources/read":
        if gateway.cedar_refusal(caller, "resource", config.name, target):
            return Refused(RESOURCE_NOT_FOUND, f"Resource not found: {target[:200]}")
        return None
    name = target
    if config.prefix and target.startswith(f"{config.prefix}_"):
        name = target[len(config.prefix) + 1 :]
    if gateway.cedar_refusal(caller, "prompt", config.name, name):
        return Refused(mcp_types.INVALID_PARAMS, f"Unknown prompt: {target[:100]!r}")
    return None
