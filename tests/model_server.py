"""A local HTTP server that answers like the OpenAI and Anthropic APIs, from a script.

The official SDKs talk to it over real HTTP; it speaks the wire formats their API references
document: JSON error bodies, and server-sent event streams (Chat Completions chunks ending in
``data: [DONE]``; Responses events; Anthropic's ``message_start`` ... ``message_stop``). A test
queues replies; each request takes the next one. A reply can cut its stream after some events
(the connection closes without the end event) or never answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # a JSON body
    events: Sequence[tuple[str | None, Any]] = ()  # SSE: (event name or None, data)
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None  # close the connection after this many events
    hang: bool = False  # never answer (until the server stops)


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


class ModelServer:
    """``with ModelServer() as server:`` ... ``server.url`` ... ``server.queue(Reply(...))``."""

    def __init__(self, *, auto: bool = False) -> None:
        self.auto = auto
        self.replies: deque[Reply] = deque()
        self.requests: list[Seen] = []
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                server.requests.append(Seen(self.path, dict(self.headers), body))
                if server.replies:
                    reply = server.replies.popleft()
                elif server.auto:
                    reply = auto_reply(self.path, body or {})
                else:
                    error = {"message": "no reply queued", "type": "server_error"}
                    reply = Reply(500, {"error": error})
                server.answer(self, reply)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> ModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.hang:
            self._stop.wait(120)
            return
        if not reply.events:
            data = json.dumps(reply.body if reply.body is not None else {}).encode()
            handler.send_response(reply.status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            for key, value in reply.headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(data)
            return
        handler.send_response(reply.status)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("connection", "close")
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        for index, (event, data) in enumerate(reply.events):
            if reply.cut_after is not None and index >= reply.cut_after:
                handler.wfile.flush()
                handler.close_connection = True
                return
            text = data if isinstance(data, str) else json.dumps(data)
            frame = (f"event: {event}\n" if event else "") + f"data: {text}\n\n"
            handler.wfile.write(frame.encode())
            handler.wfile.flush()
            time.sleep(0.001)
        handler.close_connection = True


# -- OpenAI Chat Completions -------------------------------------------------------------------


def chat_chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    index: int = 0,
    model: str = "gpt-4.1-mini-2025-04-14",
    usage: dict[str, Any] | None = None,
    id_: str = "chatcmpl-abc123",
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": id_,
        "object": "chat.completion.chunk",
        "created": 1764633600,
        "model": model,
        "system_fingerprint": "fp_test",
        "choices": []
        if delta is None
        else [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def chat_stream(
    text: Sequence[str] = (),
    calls: Sequence[tuple[str, str, Sequence[str]]] = (),
    finish: str = "stop",
    *,
    prompt_tokens: int = 21,
    completion_tokens: int = 9,
    cached_tokens: int = 0,
    model: str = "gpt-4.1-mini-2025-04-14",
) -> list[tuple[str | None, Any]]:
    """A streamed chat completion: text pieces, then tool calls whose arguments come in pieces
    (``(id, name, pieces)``), the finish chunk, the usage chunk and ``[DONE]``."""
    chunks = [chat_chunk({"role": "assistant", "content": ""}, model=model)]
    chunks += [chat_chunk({"content": piece}, model=model) for piece in text]
    for index, (call_id, name, pieces) in enumerate(calls):
        chunks.append(
            chat_chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                },
                model=model,
            )
        )
        chunks += [
            chat_chunk(
                {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, model=model
            )
            for piece in pieces
        ]
    chunks.append(chat_chunk({}, finish, model=model))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    chunks.append(chat_chunk(None, usage=usage, model=model))
    return [(None, c) for c in chunks] + [(None, "[DONE]")]


def openai_error(status: int, message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


# -- OpenAI Responses --------------------------------------------------------------------------


def responses_stream(
    text: str = "",
    calls: Sequence[tuple[str, str, Sequence[str]]] = (),
    *,
    status: str = "completed",
    incomplete_reason: str | None = None,
    reasoning: tuple[str, str] | None = None,  # (summary, encrypted)
    model: str = "gpt-4.1-mini-2025-04-14",
    input_tokens: int = 30,
    output_tokens: int = 12,
    cached_tokens: int = 0,
) -> list[tuple[str | None, Any]]:
    """A streamed response: optional reasoning item, a message with ``text`` in deltas, function
    calls with arguments in deltas, then ``response.completed`` (or ``incomplete``)."""
    seq = iter(range(1, 10_000))
    base = {
        "id": "resp_0123",
        "object": "response",
        "created_at": 1764633600,
        "model": model,
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "status": "in_progress",
    }
    events: list[tuple[str | None, Any]] = []

    def emit(kind: str, **data: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": next(seq), **data}))

    emit("response.created", response=base)
    output: list[dict[str, Any]] = []
    index = 0
    if reasoning is not None:
        item = {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": reasoning[0]}],
            "encrypted_content": reasoning[1],
        }
        emit("response.output_item.added", output_index=index, item={**item, "summary": []})
        emit("response.output_item.done", output_index=index, item=item)
        output.append(item)
        index += 1
    if text:
        message = {
            "type": "message",
            "id": "msg_1",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        emit("response.output_item.added", output_index=index, item=message)
        for piece in _pieces(text):
            emit(
                "response.output_text.delta",
                item_id="msg_1",
                output_index=index,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        done_message = {
            **message,
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        }
        emit("response.output_item.done", output_index=index, item=done_message)
        output.append(done_message)
        index += 1
    for call_id, name, pieces in calls:
        item_id = f"fc_{call_id}"
        added = {
            "type": "function_call",
            "id": item_id,
            "call_id": call_id,
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        emit("response.output_item.added", output_index=index, item=added)
        for piece in pieces:
            emit(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=piece,
            )
        done = {**added, "arguments": "".join(pieces), "status": "completed"}
        emit(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            arguments=done["arguments"],
            name=name,
        )
        emit("response.output_item.done", output_index=index, item=done)
        output.append(done)
        index += 1
    final = {
        **base,
        "status": status,
        "output": output,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }
    emit("response.completed" if status == "completed" else f"response.{status}", response=final)
    return events


def _pieces(text: str, size: int = 5) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


# -- Anthropic Messages ------------------------------------------------------------------------


def anthropic_stream(
    blocks: Sequence[dict[str, Any]],
    stop_reason: str = "end_turn",
    *,
    model: str = "claude-sonnet-5-5",
    input_tokens: int = 40,
    output_tokens: int = 15,
    cache_read: int = 0,
    cache_write: int = 0,
) -> list[tuple[str | None, Any]]:
    """A streamed message. ``blocks`` are content blocks as the final message has them
    (``{"type": "text", "text": ...}``, ``thinking`` with ``signature``, ``redacted_thinking``,
    ``tool_use`` with ``input``); each is sent as start, deltas (tool input as partial JSON in
    pieces), stop."""
    events: list[tuple[str | None, Any]] = []

    def emit(kind: str, **data: Any) -> None:
        events.append((kind, {"type": kind, **data}))

    emit(
        "message_start",
        message={
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": 1,
                "cache_read_input_tokens": cache_read,
                "cache_creation_input_tokens": cache_write,
            },
        },
    )
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            emit("content_block_start", index=index, content_block={"type": "text", "text": ""})
            for piece in _pieces(block["text"]):
                emit(
                    "content_block_delta", index=index, delta={"type": "text_delta", "text": piece}
                )
        elif kind == "thinking":
            emit(
                "content_block_start",
                index=index,
                content_block={"type": "thinking", "thinking": "", "signature": ""},
            )
            for piece in _pieces(block["thinking"], 12):
                emit(
                    "content_block_delta",
                    index=index,
                    delta={"type": "thinking_delta", "thinking": piece},
                )
            emit(
                "content_block_delta",
                index=index,
                delta={"type": "signature_delta", "signature": block["signature"]},
            )
        elif kind == "redacted_thinking":
            emit("content_block_start", index=index, content_block=block)
        elif kind == "tool_use":
            emit(
                "content_block_start",
                index=index,
                content_block={
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": {},
                },
            )
            for piece in _pieces(json.dumps(block["input"]), 7):
                emit(
                    "content_block_delta",
                    index=index,
                    delta={"type": "input_json_delta", "partial_json": piece},
                )
        emit("content_block_stop", index=index)
    emit(
        "message_delta",
        delta={"stop_reason": stop_reason, "stop_sequence": None},
        usage={"output_tokens": output_tokens},
    )
    emit("message_stop")
    return events


def anthropic_error(type_: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


# -- a model that answers anything (``python tests/model_server.py``) ---------------------------


def _example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for a tool's schema: each required property gets a plausible value."""
    samples = {"string": "Paris", "integer": 1, "number": 1.0, "boolean": True}
    properties = schema.get("properties") or {}
    return {
        name: samples.get(str(properties.get(name, {}).get("type")), "Paris")
        for name in schema.get("required") or []
    }


def auto_reply(path: str, body: dict[str, Any]) -> Reply:
    """A scripted model for any conversation: when tools are offered and none has answered
    yet, call the first one; otherwise say what the last tool said (or hello)."""
    if path.endswith("/messages"):  # Anthropic
        messages = body.get("messages") or []
        last = messages[-1]["content"] if messages else []
        results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
        tools = body.get("tools") or []
        if results:
            said = " ".join(
                c["text"] for r in results for c in r["content"] if c.get("type") == "text"
            )
            return Reply(
                events=anthropic_stream([{"type": "text", "text": f"The tool said: {said}"}])
            )
        if tools:
            tool = tools[0]
            call = {
                "type": "tool_use",
                "id": "toolu_auto",
                "name": tool["name"],
                "input": _example_arguments(tool["input_schema"]),
            }
            return Reply(events=anthropic_stream([call], "tool_use"))
        return Reply(
            events=anthropic_stream([{"type": "text", "text": "Hello from the test model."}])
        )
    if path.endswith("/responses"):
        items = body.get("input") or []
        outputs = [
            i["output"]
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        tools = body.get("tools") or []
        if outputs:
            return Reply(events=responses_stream(f"The tool said: {outputs[-1]}"))
        if tools:
            args = json.dumps(_example_arguments(tools[0]["parameters"]))
            return Reply(events=responses_stream("", [("call_auto", tools[0]["name"], [args])]))
        return Reply(events=responses_stream("Hello from the test model."))
    messages = body.get("messages") or []
    tools = body.get("tools") or []
    if messages and messages[-1].get("role") == "tool":
        return Reply(
            events=chat_stream(
                [f"The tool said: {messages[-1]['content']}"], model=body.get("model", "m")
            )
        )
    if tools:
        function = tools[0]["function"]
        args = json.dumps(_example_arguments(function["parameters"]))
        return Reply(
            events=chat_stream(
                [],
                [("call_auto", function["name"], [args])],
                "tool_calls",
                model=body.get("model", "m"),
            )
        )
    return Reply(events=chat_stream(["Hello from the test model."], model=body.get("model", "m")))


if __name__ == "__main__":
    import sys

    with ModelServer(auto=True) as running:
        print(running.url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin
