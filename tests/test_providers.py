"""The OpenAI and Anthropic providers, on the official SDKs, against a local server that speaks
their documented wire formats (tests/model_server.py): full runs through the loop, message
mapping round trips, errors, and the chat spans and metrics."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import StatusCode

from otelhooks import Hooks, ToolRegistry, block
from otelhooks.builtin import RedactionHook, Redactor
from otelhooks.core.loop import Agent
from otelhooks.providers import ModelParams
from otelhooks.providers.anthropic import AnthropicMessages
from otelhooks.providers.openai import OpenAIChat, OpenAIResponses
from otelhooks.telemetry.testing import InMemoryTracing

from .model_server import (
    ModelServer,
    Reply,
    anthropic_error,
    anthropic_stream,
    chat_stream,
    openai_error,
    responses_stream,
)

SECRET = "ghp_Zq8RkT2mWx9LpN4vB7cY1dF6hJ3sA5eG0uIo"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as s:
        yield s


def weather_tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def get_weather(city: str) -> str:
        """Today's weather in a city."""
        return {"Paris": "rain, 11°C", "Rome": "sun, 19°C"}.get(city, "unknown")

    @registry.tool
    def read_config() -> str:
        """Read the service configuration."""
        return f"region=eu\ngithub_token={SECRET}"

    return registry


def metrics_reader() -> tuple[MeterProvider, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]), reader


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    found = []
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found.extend(metric.data.data_points)
    return found


# -- OpenAI Chat Completions --------------------------------------------------------------------


async def test_chat_completions_run_with_parallel_calls_streamed_in_pieces(
    server: ModelServer, otelhooks_tracing: InMemoryTracing
) -> None:
    server.queue(
        Reply(
            events=chat_stream(
                ["Let me ", "check."],
                [
                    ("call_a", "get_weather", ['{"ci', 'ty": "Pa', 'ris"}']),
                    ("call_b", "get_weather", ['{"city"', ': "Rome"}']),
                ],
                "tool_calls",
                prompt_tokens=50,
                completion_tokens=20,
                cached_tokens=32,
            )
        ),
        Reply(events=chat_stream(["Paris: rain. ", "Rome: sun."], prompt_tokens=90)),
    )
    meter_provider, reader = metrics_reader()
    agent = Agent(
        OpenAIChat(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0),
        tools=weather_tools(),
        model="gpt-4.1-mini",
        system_prompt="Be brief.",
        params=ModelParams(temperature=0.1, max_tokens=200, top_p=0.9, seed=7, stop=("END",)),
        tracer_provider=otelhooks_tracing.provider,
        meter_provider=meter_provider,
    )
    result = await agent.run("Weather in Paris and Rome?")
    assert result.final.text == "Paris: rain. Rome: sun."
    assert result.usage.input_tokens == 140 and result.usage.cache_read_tokens == 32

    first, second = (r.body for r in server.requests)
    assert first["messages"][0] == {"role": "system", "content": "Be brief."}
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert first["temperature"] == 0.1 and first["max_tokens"] == 200 and first["seed"] == 7
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assistant, tool_a, tool_b = second["messages"][2:5]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a", "call_b"]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert tool_a == {"role": "tool", "tool_call_id": "call_a", "content": "rain, 11°C"}
    assert tool_b["tool_call_id"] == "call_b" and tool_b["content"] == "sun, 19°C"

    chat = otelhooks_tracing.find("chat gpt-4.1-mini")
    assert len(chat) == 2
    attrs = dict(chat[0].attributes or {})
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "gpt-4.1-mini"
    assert attrs["gen_ai.response.model"] == "gpt-4.1-mini-2025-04-14"
    assert attrs["gen_ai.response.id"] == "chatcmpl-abc123"
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert attrs["gen_ai.usage.input_tokens"] == 50
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 32
    assert attrs["gen_ai.request.temperature"] == 0.1
    assert attrs["gen_ai.request.max_tokens"] == 200
    assert attrs["gen_ai.request.top_p"] == 0.9
    assert attrs["gen_ai.request.seed"] == 7
    assert attrs["gen_ai.request.stop_sequences"] == ("END",)
    assert attrs["server.address"] == "127.0.0.1"
    assert attrs["server.port"] == int(server.url.rsplit(":", 1)[1])
    run = otelhooks_tracing.find_one("invoke_agent agent")
    assert run.attributes["gen_ai.provider.name"] == "openai"  # type: ignore[index]
    assert run.attributes["gen_ai.usage.input_tokens"] == 140  # type: ignore[index]

    tokens = points(reader, "gen_ai.client.token.usage")
    by_type = {p.attributes["gen_ai.token.type"]: p for p in tokens}
    assert by_type["input"].sum == 140 and by_type["input"].count == 2
    assert by_type["input"].attributes["gen_ai.provider.name"] == "openai"
    calls = points(reader, "otelhooks.tool.calls")
    assert sum(p.value for p in calls) == 2
    assert {p.attributes["otelhooks.tool.outcome"] for p in calls} == {"allow"}
    assert points(reader, "gen_ai.client.operation.duration")[0].count == 2


async def test_refusal_and_content_filter_end_the_turn_with_a_reason(server: ModelServer) -> None:
    refusal = chat_stream(finish="stop")
    refusal.insert(
        1,
        (
            None,
            {
                **refusal[1][1],
                "choices": [
                    {
                        "index": 0,
                        "delta": {"refusal": "I can't help with that."},
                        "finish_reason": None,
                    }
                ],
            },
        ),
    )
    server.queue(
        Reply(events=refusal), Reply(events=chat_stream(["Some te"], finish="content_filter"))
    )
    provider = OpenAIChat(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0)
    refused = await Agent(provider, model="m").run("do something bad")
    filtered = await Agent(provider, model="m").run("again")
    assert refused.final.stop_reason == "error"
    assert refused.final.refusal == "I can't help with that."
    assert refused.final.finish_reason == "content_filter"
    assert filtered.final.stop_reason == "error" and filtered.final.text == "Some te"
    assert "content filter" in (filtered.final.error_message or "")


@pytest.mark.parametrize(
    ("reply", "error_type", "words"),
    [
        (
            Reply(
                401,
                openai_error(
                    401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key"
                ),
            ),
            "401",
            "Incorrect API key",
        ),
        (
            Reply(
                400,
                openai_error(
                    400,
                    "This model's maximum context length is 128000 tokens.",
                    "invalid_request_error",
                    "context_length_exceeded",
                ),
            ),
            "400",
            "maximum context length",
        ),
        (
            Reply(500, openai_error(500, "The server had an error", "server_error")),
            "500",
            "server had an error",
        ),
        (
            Reply(events=chat_stream(["Half an ans", "wer"]), cut_after=3),
            "stream_incomplete",
            "ended before",
        ),
    ],
    ids=["401", "400-context-length", "500", "cut-stream"],
)
async def test_provider_errors_end_the_turn_clearly(
    server: ModelServer,
    otelhooks_tracing: InMemoryTracing,
    reply: Reply,
    error_type: str,
    words: str,
) -> None:
    server.queue(reply)
    agent = Agent(
        OpenAIChat(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0),
        model="gpt-4.1-mini",
        tracer_provider=otelhooks_tracing.provider,
    )
    result = await agent.run("hello")
    assert result.final.stop_reason == "error"
    assert words in (result.final.error_message or ""), result.final.error_message
    chat = otelhooks_tracing.find_one("chat gpt-4.1-mini")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes["error.type"] == error_type  # type: ignore[index]
    assert otelhooks_tracing.find_one("invoke_agent agent").status.status_code is StatusCode.ERROR


async def test_rate_limits_are_retried_by_the_sdk_and_counted(
    server: ModelServer, otelhooks_tracing: InMemoryTracing
) -> None:
    limited = openai_error(
        429, "Rate limit reached for requests", "requests", "rate_limit_exceeded"
    )
    server.queue(
        Reply(429, limited, headers={"retry-after": "0"}),
        Reply(429, limited, headers={"retry-after": "0"}),
        Reply(events=chat_stream(["fine now"])),
        Reply(429, limited, headers={"retry-after": "0"}),
    )
    provider = OpenAIChat(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=2)
    agent = Agent(provider, model="m", tracer_provider=otelhooks_tracing.provider)
    ok = await agent.run("hi")
    assert ok.final.text == "fine now"
    assert otelhooks_tracing.find_one("chat m").attributes["otelhooks.chat.retries"] == 2  # type: ignore[index]
    otelhooks_tracing.clear()
    provider = OpenAIChat(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0)
    failed = await Agent(provider, model="m", tracer_provider=otelhooks_tracing.provider).run("hi")
    assert failed.final.error_type == "429"
    assert "retry after 0s" in (failed.final.error_message or "")


async def test_a_server_that_never_answers_times_out(server: ModelServer) -> None:
    server.queue(Reply(hang=True))
    provider = OpenAIChat(
        api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0, timeout=0.5
    )
    started = time.monotonic()
    result = await Agent(provider, model="m").run("hello?")
    assert time.monotonic() - started < 10
    assert result.final.stop_reason == "error" and result.final.error_type == "timeout"


async def test_a_local_openai_compatible_server_through_base_url(server: ModelServer) -> None:
    server.queue(Reply(events=chat_stream(["local hello"], model="llama3.2:3b")))
    provider = OpenAIChat(base_url=f"{server.url}/v1", api_key="ollama", provider_name="ollama")
    result = await Agent(provider, model="llama3.2:3b", params=ModelParams(max_tokens=64)).run("hi")
    assert result.final.text == "local hello" and result.final.provider == "ollama"
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].body["max_tokens"] == 64  # the field local servers know
    headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert headers["authorization"] == "Bearer ollama"


async def test_content_capture_in_the_conventions_shapes_redacted(
    server: ModelServer, otelhooks_tracing: InMemoryTracing
) -> None:
    server.queue(
        Reply(events=chat_stream([], [("call_1", "read_config", ["{}"])], "tool_calls")),
        Reply(events=chat_stream(["The region is eu."])),
    )
    agent = Agent(
        OpenAIChat(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0),
        tools=weather_tools(),
        hooks=Hooks([RedactionHook(redactor := Redactor())]),
        scrubber=redactor,
        model="m",
        system_prompt="You are terse.",
        capture_content=True,
        tracer_provider=otelhooks_tracing.provider,
    )
    await agent.run("Which region?")
    second = otelhooks_tracing.find("chat m")[1]
    attrs = dict(second.attributes or {})
    messages = json.loads(attrs["gen_ai.input.messages"])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[1]["parts"][0] == {
        "type": "tool_call",
        "id": "call_1",
        "name": "read_config",
        "arguments": {},
    }
    assert messages[2]["parts"][0]["type"] == "tool_call_response"
    assert "[REDACTED:" in messages[2]["parts"][0]["response"]
    assert json.loads(attrs["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "The region is eu."}],
            "finish_reason": "stop",
        }
    ]
    assert json.loads(attrs["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "You are terse."}
    ]
    assert json.loads(attrs["gen_ai.tool.definitions"])[0]["name"] == "get_weather"
    for span in otelhooks_tracing.spans():
        assert SECRET not in json.dumps(dict(span.attributes or {}), default=str)
    assert SECRET not in json.dumps(server.requests[1].body)  # nor did the model get it


async def test_an_instrumented_sdk_gets_no_second_chat_span(
    server: ModelServer, otelhooks_tracing: InMemoryTracing
) -> None:
    """What opentelemetry-instrumentation-openai-v2 does to the SDK (a wrapt wrapper on
    ``create``) is detected: the loop leaves the chat span, and its token counts, to it."""
    import wrapt
    from openai.resources.chat.completions import AsyncCompletions

    async def passthrough(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return await wrapped(*args, **kwargs)

    original = AsyncCompletions.create
    wrapt.wrap_function_wrapper(AsyncCompletions, "create", passthrough)
    try:
        server.queue(Reply(events=chat_stream(["hi"])), Reply(events=chat_stream(["hi"])))
        provider = OpenAIChat(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0)
        assert provider.instrumented
        auto = Agent(provider, model="m", tracer_provider=otelhooks_tracing.provider)
        await auto.run("hi")
        assert otelhooks_tracing.find("chat m") == []
        forced = Agent(
            provider, model="m", chat_spans="always", tracer_provider=otelhooks_tracing.provider
        )
        await forced.run("hi")
        assert len(otelhooks_tracing.find("chat m")) == 1
    finally:
        AsyncCompletions.create = original  # type: ignore[method-assign]
    assert not OpenAIChat(api_key="x").instrumented


# -- OpenAI Responses ---------------------------------------------------------------------------


async def test_responses_api_round_trips_reasoning_and_function_calls(
    server: ModelServer, otelhooks_tracing: InMemoryTracing
) -> None:
    server.queue(
        Reply(
            events=responses_stream(
                "",
                [("call_1", "get_weather", ['{"city":', ' "Paris"}'])],
                reasoning=("Need the weather.", "gAAAA-encrypted-reasoning"),
                cached_tokens=12,
            )
        ),
        Reply(events=responses_stream("Rain in Paris.")),
    )
    agent = Agent(
        OpenAIResponses(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0),
        tools=weather_tools(),
        model="gpt-5-mini",
        system_prompt="Be brief.",
        tracer_provider=otelhooks_tracing.provider,
    )
    result = await agent.run("Weather in Paris?")
    assert result.final.text == "Rain in Paris."
    first, second = (r.body for r in server.requests)
    assert server.requests[0].path == "/v1/responses"
    assert first["instructions"] == "Be brief." and first["store"] is False
    assert first["tools"][0]["name"] == "get_weather"
    items = second["input"]
    assert items[0]["role"] == "user"
    assert items[1]["type"] == "reasoning"
    assert items[1]["encrypted_content"] == "gAAAA-encrypted-reasoning"
    assert items[2] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    assert items[3] == {"type": "function_call_output", "call_id": "call_1", "output": "rain, 11°C"}
    chat = otelhooks_tracing.find("chat gpt-5-mini")[0]
    assert chat.attributes["gen_ai.response.id"] == "resp_0123"  # type: ignore[index]
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 12  # type: ignore[index]


async def test_responses_incomplete_is_length(server: ModelServer) -> None:
    server.queue(
        Reply(
            events=responses_stream(
                "Cut sh", status="incomplete", incomplete_reason="max_output_tokens"
            )
        )
    )
    provider = OpenAIResponses(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0)
    result = await Agent(provider, model="m").run("long story")
    assert result.final.stop_reason == "length" and result.final.text == "Cut sh"


# -- Anthropic Messages ---------------------------------------------------------------------------


async def test_anthropic_thinking_is_sent_back_with_the_tool_results(
    server: ModelServer, otelhooks_tracing: InMemoryTracing
) -> None:
    server.queue(
        Reply(
            events=anthropic_stream(
                [
                    {
                        "type": "thinking",
                        "thinking": "Two cities: two calls.",
                        "signature": "EqQBCgIYAhIM1",
                    },
                    {"type": "text", "text": "Checking both."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_02",
                        "name": "get_weather",
                        "input": {"city": "Rome"},
                    },
                ],
                "tool_use",
                input_tokens=30,
                cache_read=100,
                cache_write=20,
            )
        ),
        Reply(events=anthropic_stream([{"type": "text", "text": "Rain in Paris, sun in Rome."}])),
    )
    agent = Agent(
        AnthropicMessages(
            api_key="sk-ant-test",
            base_url=server.url,
            max_retries=0,
            thinking={"type": "enabled", "budget_tokens": 1024},
        ),
        tools=weather_tools(),
        model="claude-sonnet-5-5",
        system_prompt="Be brief.",
        tracer_provider=otelhooks_tracing.provider,
    )
    result = await agent.run("Paris and Rome?")
    assert result.final.text == "Rain in Paris, sun in Rome."
    first, second = (r.body for r in server.requests)
    assert server.requests[0].path == "/v1/messages"
    assert first["system"] == "Be brief." and first["thinking"]["budget_tokens"] == 1024
    assert first["tools"][0]["input_schema"]["properties"]["city"]["type"] == "string"
    _user, assistant, results = second["messages"]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "tool_use", "tool_use"]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "Two cities: two calls.",
        "signature": "EqQBCgIYAhIM1",
    }
    assert results["role"] == "user"
    assert [b["tool_use_id"] for b in results["content"]] == ["toolu_01", "toolu_02"]
    assert results["content"][0]["content"] == [{"type": "text", "text": "rain, 11°C"}]
    chat = dict(otelhooks_tracing.find("chat claude-sonnet-5-5")[0].attributes or {})
    assert chat["gen_ai.provider.name"] == "anthropic"
    assert chat["gen_ai.usage.input_tokens"] == 150  # 30 + 100 read + 20 written
    assert chat["gen_ai.usage.cache_read.input_tokens"] == 100
    assert chat["gen_ai.usage.cache_creation.input_tokens"] == 20
    assert chat["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert chat["gen_ai.response.id"] == "msg_01XFDUDYJgAACzvnptvVoYEL"


async def test_anthropic_errors_and_cut_streams(
    server: ModelServer, otelhooks_tracing: InMemoryTracing
) -> None:
    server.queue(
        Reply(
            400,
            anthropic_error(
                "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
            ),
        ),
        Reply(529, anthropic_error("overloaded_error", "Overloaded")),
        Reply(events=anthropic_stream([{"type": "text", "text": "partial answer"}]), cut_after=4),
    )
    provider = AnthropicMessages(api_key="sk-ant-test", base_url=server.url, max_retries=0)
    agent = Agent(provider, model="claude-sonnet-5-5", tracer_provider=otelhooks_tracing.provider)
    too_long = await agent.run("a very long prompt")
    overloaded = await agent.run("again")
    cut = await agent.run("and again")
    assert too_long.final.error_type == "400" and "prompt is too long" in str(
        too_long.final.error_message
    )
    assert overloaded.final.error_type == "529"
    assert cut.final.error_type == "stream_incomplete" and cut.final.text.startswith("parti")
    types = [s.attributes["error.type"] for s in otelhooks_tracing.find("chat claude-sonnet-5-5")]  # type: ignore[index]
    assert types == ["400", "529", "stream_incomplete"]


@pytest.mark.parametrize(
    ("error_type", "message"),
    [("overloaded_error", "Overloaded"), ("api_error", "Internal server error")],
)
async def test_anthropic_error_inside_the_stream_keeps_its_type(
    server: ModelServer, otelhooks_tracing: InMemoryTracing, error_type: str, message: str
) -> None:
    """The Messages API (and servers speaking its format, such as the LiteLLM proxy) may answer
    HTTP 200 and then send ``event: error`` in the stream: the type comes from the event."""
    events = list(anthropic_stream([{"type": "text", "text": "partial answer"}]))[:4]
    events.append(("error", anthropic_error(error_type, message)))
    server.queue(Reply(events=events))
    provider = AnthropicMessages(api_key="sk-ant-test", base_url=server.url, max_retries=0)
    agent = Agent(provider, model="claude-sonnet-5-5", tracer_provider=otelhooks_tracing.provider)
    result = await agent.run("hi")
    assert result.stop_reason == "error"
    assert result.final.error_type == error_type
    assert "200" not in str(result.error_message)
    assert message in str(result.error_message) and error_type in str(result.error_message)
    (chat,) = otelhooks_tracing.find("chat claude-sonnet-5-5")
    assert chat.attributes["error.type"] == error_type  # type: ignore[index]
    assert chat.status.description is not None and message in chat.status.description


async def test_anthropic_sdk_spans_replace_ours(
    server: ModelServer, otelhooks_tracing: InMemoryTracing
) -> None:
    """A client with the SDK's own spans on: one chat span per request (the SDK's), so that
    backends do not count its tokens twice."""
    from anthropic import AsyncAnthropic

    server.queue(Reply(events=anthropic_stream([{"type": "text", "text": "hello"}])))
    client = AsyncAnthropic(
        api_key="sk-ant-test",
        base_url=server.url,
        max_retries=0,
        open_telemetry={"traces": {"enabled": True}, "tracer_provider": otelhooks_tracing.provider},
    )
    provider = AnthropicMessages(client)
    assert provider.instrumented
    agent = Agent(provider, model="claude-sonnet-5-5", tracer_provider=otelhooks_tracing.provider)
    await agent.run("hi")
    with_tokens = [
        s
        for s in otelhooks_tracing.spans()
        if "gen_ai.usage.input_tokens" in (s.attributes or {})
        and s.attributes.get("gen_ai.operation.name") == "chat"  # type: ignore[union-attr]
    ]
    assert len(with_tokens) == 1
    assert with_tokens[0].instrumentation_scope.name != "otelhooks"  # type: ignore[union-attr]
    assert not AnthropicMessages(api_key="x").instrumented


async def test_a_blocked_call_is_a_tool_metric_with_outcome_block(server: ModelServer) -> None:
    server.queue(
        Reply(events=chat_stream([], [("c1", "read_config", ["{}"])], "tool_calls")),
        Reply(events=chat_stream(["ok"])),
    )
    meter_provider, reader = metrics_reader()
    hooks = Hooks()
    hooks.add(before=lambda ctx: block("no configs"), tools="read_config")
    agent = Agent(
        OpenAIChat(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0),
        tools=weather_tools(),
        hooks=hooks,
        model="m",
        meter_provider=meter_provider,
    )
    await agent.run("config?")
    calls = points(reader, "otelhooks.tool.calls")
    assert [
        (p.attributes["gen_ai.tool.name"], p.attributes["otelhooks.tool.outcome"], p.value)
        for p in calls
    ] == [("read_config", "block", 1)]


async def test_event_only_capture_puts_the_content_on_an_event(
    server: ModelServer, otelhooks_tracing: InMemoryTracing
) -> None:
    server.queue(Reply(events=chat_stream(["All good."])))
    agent = Agent(
        OpenAIChat(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0),
        model="m",
        capture_content="EVENT_ONLY",
        tracer_provider=otelhooks_tracing.provider,
    )
    await agent.run("status?")
    chat = otelhooks_tracing.find_one("chat m")
    assert "gen_ai.input.messages" not in (chat.attributes or {})
    (event,) = otelhooks_tracing.events(chat, "gen_ai.client.inference.operation.details")
    assert json.loads(event["gen_ai.input.messages"])[0]["parts"][0]["content"] == "status?"
    assert json.loads(event["gen_ai.output.messages"])[0]["parts"][0]["content"] == "All good."


def test_images_in_tool_results_go_where_each_api_allows_them() -> None:
    from otelhooks import AssistantMessage, MediaContent, ToolCall, ToolResult, UserMessage
    from otelhooks.core.cancel import CancelSignal
    from otelhooks.providers import ProviderRequest
    from otelhooks.providers.anthropic import anthropic_messages
    from otelhooks.providers.openai import chat_messages, response_input

    png = MediaContent("image", "iVBORw0KGgo=", "image/png")
    request = ProviderRequest(
        "m",
        "",
        (
            UserMessage("Take a screenshot"),
            AssistantMessage(tool_calls=(ToolCall("c1", "screenshot", {}),), stop_reason="toolUse"),
            ToolResult("c1", "screenshot", "the screen", media=(png,)),
        ),
        (),
        CancelSignal(),
    )
    chat = chat_messages(request)
    assert chat[2] == {"role": "tool", "tool_call_id": "c1", "content": "the screen"}
    assert chat[3]["role"] == "user"  # Chat Completions: tool messages carry no images
    assert chat[3]["content"][1]["image_url"]["url"] == "data:image/png;base64,iVBORw0KGgo="
    responses = response_input(request, "openai")
    assert responses[2]["output"][1] == {
        "type": "input_image",
        "image_url": "data:image/png;base64,iVBORw0KGgo=",
    }
    claude = anthropic_messages(request)
    result = claude[2]["content"][0]
    assert result["type"] == "tool_result" and result["content"][1]["type"] == "image"
    assert result["content"][1]["source"]["data"] == "iVBORw0KGgo="


async def test_tool_choice_reaches_each_api(server: ModelServer) -> None:
    server.queue(
        Reply(events=chat_stream(["a"])),
        Reply(events=responses_stream("b")),
        Reply(events=anthropic_stream([{"type": "text", "text": "c"}])),
    )
    params = ModelParams(tool_choice="get_weather")
    for provider in (
        OpenAIChat(api_key="k", base_url=f"{server.url}/v1", max_retries=0),
        OpenAIResponses(api_key="k", base_url=f"{server.url}/v1", max_retries=0),
        AnthropicMessages(api_key="k", base_url=server.url, max_retries=0),
    ):
        await Agent(provider, tools=weather_tools(), model="m", params=params).run("go")
    chat, responses, claude = (r.body["tool_choice"] for r in server.requests)
    assert chat == {"type": "function", "function": {"name": "get_weather"}}
    assert responses == {"type": "function", "name": "get_weather"}
    assert claude == {"type": "tool", "name": "get_weather"}


@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses", "anthropic"])
async def test_without_an_api_key_the_run_says_what_is_missing_and_sends_nothing(
    server: ModelServer, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    if kind == "anthropic":
        provider: Any = AnthropicMessages(base_url=server.url, max_retries=0)
        variable = "ANTHROPIC_API_KEY"
    else:
        cls = OpenAIChat if kind == "openai-chat" else OpenAIResponses
        provider = cls(base_url=f"{server.url}/v1", max_retries=0)
        variable = "OPENAI_API_KEY"
    result = await Agent(provider, model="m").run("hello")
    assert result.stop_reason == "error" and result.final.error_type == "configuration"
    assert variable in str(result.error_message) and "api_key=" in str(result.error_message)
    assert server.requests == []
