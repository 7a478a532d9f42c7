"""Approvals at the gateway: an ``ask`` (a Cedar permit marked ``@approval("required")``, or any
hook's) becomes MCP elicitation to the host that made the call, when it declared form
elicitation; otherwise a pending approval in the store, answered by ``otelhooks approvals``,
bounded by ``[cedar] approval_timeout`` (after which the call is blocked).

The form names the tool and the arguments as redacted, whole and as they are: a character that
does not print (a bidirectional override, a zero-width space, a line separator) is shown as its
escape, so that the text a person reads is the text that runs. A call whose arguments hold a
secret, or do not fit a form whole (:data:`MAX_SHOWN` characters), is never shown in a form: it
goes to the store (listed there by its digest, or whole). A request goes
only to the host session that made the call: each serving path sets :data:`HOST` for the call
it serves (the SDK server its request's session and id, the stdio relay its own host), so a
host of a shared upstream set never sees another host's call.

A host answers ``accept`` with ``approve: true`` (approved), ``accept`` with ``approve: false``,
``decline`` or ``cancel`` (each a denial saying which); an error, or no answer in the timeout,
denies.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import mcp.types as mcp_types

from ...core.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalSettings,
    Approve,
    Approver,
    Deny,
)
from .policy import DEFAULT_APPROVAL_TIMEOUT, ProxyPolicy

FORM_FIELD: Final = "approve"
MAX_SHOWN: Final = 2000
"""Characters of arguments a form shows; a call whose arguments are longer goes to the store."""


@dataclass(frozen=True, slots=True)
class HostAsk:
    """The host of the call in progress: whether it declared form elicitation, how to send it a
    request (its result, or ``ErrorData``), and who it is (for "approved by")."""

    form: bool
    send: Callable[[Any, Any], Awaitable[Any]]
    who: str


HOST: Final[contextvars.ContextVar[HostAsk | None]] = contextvars.ContextVar(
    "otelhooks_mcp_host_ask", default=None
)


@contextlib.contextmanager
def host_asking(host: HostAsk) -> Iterator[HostAsk]:
    """Within the block, approvals are asked of ``host``."""
    token = HOST.set(host)
    try:
        yield host
    finally:
        HOST.reset(token)


def host_label(caller: Any) -> str:
    """Who a host is, as an approval names who decided: ``host:<its identity>``."""
    identity = caller.identity if caller is not None else None
    return f"host:{identity.label}" if identity is not None else "host"


def declares_form(capabilities: Any) -> bool:
    """Whether client capabilities (the ``mcp`` model, or their JSON) declare form
    elicitation (an ``elicitation`` capability with neither mode named means form)."""
    if capabilities is None:
        return False
    if isinstance(capabilities, dict):
        found = capabilities.get("elicitation")
        if not isinstance(found, dict):
            return False
        return "form" in found or "url" not in found
    found = getattr(capabilities, "elicitation", None)
    if found is None:
        return False
    return found.form is not None or found.url is None


def printable(text: str) -> str:
    """``text`` with each character that does not print (controls, format characters such as a
    bidirectional override or a zero-width space, line and paragraph separators) escaped."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
        for c in text
    )


def shown_arguments(request: ApprovalRequest) -> str | None:
    """The arguments as a form shows them (redacted, every character visible); ``None`` when
    they do not fit a form whole."""
    shown = printable(json.dumps(dict(request.arguments), sort_keys=True, ensure_ascii=False))
    return shown if len(shown) <= MAX_SHOWN else None


def form_request(request: ApprovalRequest, shown: str) -> mcp_types.ElicitRequest:
    """The form a host is asked to fill: the tool, why, the arguments as ``shown`` (see
    :func:`shown_arguments`), a yes/no."""
    message = (
        f"Approve a call of the tool {request.tool!r}?\n"
        f"Why: {printable(request.reason)}\n"
        f"Arguments (redacted): {shown}\n"
        f"Argument digest: {request.digest}"
    )
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            FORM_FIELD: {
                "type": "boolean",
                "title": "Approve",
                "description": f"Run {request.tool} with these arguments, once",
            }
        },
        "required": [FORM_FIELD],
    }
    return mcp_types.ElicitRequest(
        params=mcp_types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


class GatewayApprover:
    """The gateway's approver (see the module's docs): the calling host's form, else
    ``store`` (the store's approver), each bounded by ``timeout`` seconds."""

    def __init__(self, store: Approver | None, timeout: float, *, forms: bool = True) -> None:
        self.store = store
        self.timeout = timeout
        # Without redaction nothing tells a secret argument apart: no call is shown in a form.
        self.forms = forms

    async def __call__(self, request: ApprovalRequest, /) -> ApprovalDecision:
        host = HOST.get()
        if host is not None and host.form and self.forms and not request.secret:
            shown = shown_arguments(request)
            if shown is not None:  # else too long to show whole: the store lists it
                return await self._elicit(host, request, shown)
        if self.store is None:
            return Deny(by="otelhooks", how="gateway", reason="no host to ask and no store")
        try:
            async with asyncio.timeout(self.timeout):
                return await self.store(request)
        except TimeoutError:
            return Deny(
                by="otelhooks",
                how="timeout",
                reason=f"no approval within {self.timeout:g} s",
            )

    async def _elicit(
        self, host: HostAsk, request: ApprovalRequest, shown: str
    ) -> ApprovalDecision:
        try:
            async with asyncio.timeout(self.timeout):
                answer = await host.send(form_request(request, shown), mcp_types.ElicitResult)
        except TimeoutError:
            return Deny(
                by="otelhooks",
                how="timeout",
                reason=f"the host did not answer in {self.timeout:g} s",
            )
        if not isinstance(answer, mcp_types.ElicitResult):
            message = getattr(answer, "message", "no answer")
            return Deny(by=host.who, how="elicitation", reason=f"the host could not ask: {message}")
        if answer.action == "accept" and (answer.content or {}).get(FORM_FIELD) is True:
            return Approve(by=host.who, how="elicitation")
        if answer.action == "accept":
            return Deny(by=host.who, how="elicitation", reason="the host's user refused it")
        return Deny(by=host.who, how="elicitation", reason=f"the host's user chose {answer.action}")


def gateway_approvals(policy: ProxyPolicy, pinning: Any) -> ApprovalSettings:
    """How an ask is answered at the gateway of ``policy``: the calling host's form, else the
    store (the pins' store when pinning is on, else ``[store] file``), within ``[cedar]
    approval_timeout``."""
    from ...builtin.approvers import StoreApprover

    config = policy.cedar
    timeout = config.approval_timeout if config is not None else DEFAULT_APPROVAL_TIMEOUT
    pins = pinning.store.store if pinning is not None else None
    store = StoreApprover(pins if pins is not None else policy.store.file)
    approver = GatewayApprover(store, timeout, forms=bool(policy.redaction))
    return ApprovalSettings(approver, ttl=max(timeout, 1.0))
