"""What the SDK-backed providers share: errors as assistant messages, attempts counted, the
server's address, tool-call arguments decoded."""

from __future__ import annotations

import contextvars
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from opentelemetry import trace

from ..core.messages import AssistantMessage, Usage
from ..telemetry import attributes as A

RETRIES: Final = A.CHAT_RETRIES
"""The chat span attribute: how many times the SDK sent the request again (429, 5xx, network)."""

_ATTEMPTS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "otelhooks_provider_attempts", default=None
)


async def count_attempt(request: Any) -> None:
    """An HTTP client event hook: one more request for the provider call in progress."""
    attempts = _ATTEMPTS.get()
    if attempts is not None:
        attempts[0] += 1


def counting_client(
    client_class: Callable[..., Any], http_class: Callable[..., Any], **options: Any
) -> Any:
    """An SDK client (``AsyncOpenAI``, ``AsyncAnthropic``) whose HTTP client counts every
    attempt, so that the SDK's retries can be recorded."""
    http = http_class(event_hooks={"request": [count_attempt]})
    return client_class(http_client=http, **options)


class SDKProvider:
    """What the providers on an official SDK share: the SDK client (one whose HTTP client counts
    the SDK's retries, unless the caller gives their own), the server it talks to
    (``server.address``/``server.port``), ``gen_ai.provider.name`` and fields merged into every
    request."""

    provider_name: str
    missing: str | None = None  # what keeps the provider from working (no key): said per run

    def _connect(
        self,
        client: Any,
        provider_name: str | None,
        extra_body: Mapping[str, Any] | None,
        make: Callable[[], Any],
    ) -> None:
        self.client = client if client is not None else make()
        self.server_address, self.server_port = server_of(self.client.base_url)
        if provider_name:
            self.provider_name = provider_name
        self.extra_body = dict(extra_body or {})


def missing_key(given: str | None, variables: Sequence[str], provider: str) -> str | None:
    """What to say when no API key was given or set (``None`` when one was)."""
    if given or any(os.environ.get(name) for name in variables):
        return None
    names = " or ".join(variables)
    return f"no {provider} API key: set {names}, or pass api_key= (a local server takes any string)"


def unusable(provider: SDKProvider, model: str) -> AssistantMessage | None:
    """The turn's message when the provider cannot work at all (no key): an error that says
    what is missing, before any request."""
    if provider.missing is None:
        return None
    return AssistantMessage(
        "",
        (),
        "error",
        model,
        None,
        provider.missing,
        provider=provider.provider_name,
        error_type="configuration",
        finish_reason="error",
    )


class Attempts:
    """Counts the HTTP requests of one provider call (the SDK's retries included) and records
    the retries on the current (``chat``) span."""

    def __enter__(self) -> Attempts:
        self.count = [0]
        self._token = _ATTEMPTS.set(self.count)
        return self

    def __exit__(self, *exc: object) -> None:
        _ATTEMPTS.reset(self._token)
        if self.count[0] > 1:
            span = trace.get_current_span()
            if span.is_recording():
                span.set_attribute(RETRIES, self.count[0] - 1)


def server_of(url: Any) -> tuple[str | None, int | None]:
    """``server.address`` and ``server.port`` of a base URL."""
    parts = urlsplit(str(url))
    if not parts.hostname:
        return None, None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def decode_arguments(text: str) -> Mapping[str, Any] | str:
    """Streamed tool-call arguments: the object, or the text as it came when it is not one (the
    loop then answers the model with an invalid-arguments result)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def error_message(
    exc: BaseException,
    model: str,
    provider: str,
    *,
    text: str = "",
    usage: Usage | None = None,
) -> AssistantMessage:
    """A failed request as the turn's message: ``stop_reason="error"``, a message saying what
    happened (status, the API's own message, when to retry) and ``error_type`` (the HTTP status,
    ``timeout``, ``connection_error`` or the exception's class; for an error sent inside an
    accepted stream, the type the error event gives)."""
    status = getattr(exc, "status_code", None)
    body_message = _api_message(exc)
    body_type = _api_error_type(exc)
    if isinstance(status, int) and status < 400 and body_type:
        # An error event inside a stream the server had accepted (HTTP 200): the Anthropic API
        # sends overloaded errors this way. The status says nothing; the event says what failed.
        error_type, what, detail = body_type, f"{provider} API error ({body_type})", body_message
    elif isinstance(status, int):
        error_type = str(status)
        what = f"{provider} API error {status}"
        retry_after = _retry_after(exc)
        if retry_after:
            what += f" (retry after {retry_after}s)"
        detail = body_message or str(exc)
    elif type(exc).__name__ == "APITimeoutError":
        error_type, what, detail = "timeout", f"{provider} API timed out", str(exc)
    elif type(exc).__name__ == "APIConnectionError":
        error_type, what, detail = "connection_error", f"cannot reach the {provider} API", str(exc)
    else:
        error_type, what, detail = type(exc).__qualname__, f"{provider} stream failed", str(exc)
    return AssistantMessage(
        text,
        (),
        "error",
        model,
        usage,
        f"{what}: {detail}" if detail else what,
        provider=provider,
        error_type=error_type,
        finish_reason="error",
    )


def _api_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) else ""


def _api_error_type(exc: BaseException) -> str | None:
    """The error's type as the API's body gives it (``overloaded_error``, ``api_error``)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("type"), str) and error["type"]:
            return str(error["type"])
    return None


def _retry_after(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    return str(value) if value else None


def wrapped(method: Callable[..., Any]) -> bool:
    """Whether an instrumentation wraps an SDK method: the OpenTelemetry instrumentations (and
    most others) replace it with a ``wrapt`` function wrapper."""
    return type(method).__module__.split(".")[0] in ("wrapt", "_wrappers") and hasattr(
        method, "_self_wrapper"
    )
