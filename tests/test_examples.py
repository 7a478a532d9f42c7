"""The examples run as users run them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(name: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("seed_allowed.py", ["The tool result is: checked: hi", "    after  "]),
        ("seed_blocked.py", ["blocked: this tool is disabled in the demo", "decision=block"]),
        (
            "custom_policy_hook.py",
            [
                "wrote 5 bytes to notes.txt",
                "files under locked/ are read-only",
                "must not contain '..'",
            ],
        ),
        ("parallel_tools.py", ["progress: a.example: 3/3", "answer: a.example: 200 OK; b.example"]),
    ],
)
def test_example_runs(name: str, expected: list[str]) -> None:
    out = run(name)
    for text in expected:
        assert text in out


# -- the model examples, against the local server that speaks the providers' wire formats ----


def run_with(name: str, env: dict[str, str], *args: str) -> str:
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, **env},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


TWO_CITIES = [
    ("call_p", "get_weather", ['{"city": ', '"Paris"}']),
    ("call_t", "get_weather", ['{"city": "Tok', 'yo"}']),
]
ANSWER = "Paris has light rain and Tokyo is clear."


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_agent_example(api: str) -> None:
    from .model_server import ModelServer, Reply, chat_stream, responses_stream

    with ModelServer() as server:
        if api == "chat":
            server.queue(
                Reply(events=chat_stream([], TWO_CITIES, "tool_calls")),
                Reply(events=chat_stream([ANSWER])),
            )
        else:
            server.queue(
                Reply(events=responses_stream("", TWO_CITIES)),
                Reply(events=responses_stream(ANSWER)),
            )
        env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{server.url}/v1"}
        out = run_with("openai_agent.py", env, *(["--responses"] if api == "responses" else []))
        sent = server.requests[1].body
    assert ANSWER in out
    assert "chat gpt-4.1-mini" in out and "execute_tool get_weather" in out
    assert "light rain, 11°C" in json.dumps(sent, ensure_ascii=False)  # results went back


def test_anthropic_agent_example() -> None:
    from .model_server import ModelServer, Reply, anthropic_stream

    with ModelServer() as server:
        server.queue(
            Reply(
                events=anthropic_stream(
                    [
                        {"type": "thinking", "thinking": "Two lookups.", "signature": "sig-1"},
                        {
                            "type": "tool_use",
                            "id": "toolu_p",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        },
                        {
                            "type": "tool_use",
                            "id": "toolu_t",
                            "name": "get_weather",
                            "input": {"city": "Tokyo"},
                        },
                    ],
                    "tool_use",
                )
            ),
            Reply(events=anthropic_stream([{"type": "text", "text": ANSWER}])),
        )
        env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.url}
        out = run_with("anthropic_agent.py", env)
        sent = server.requests[1].body
    assert ANSWER in out and "chat claude-sonnet-5-5" in out
    assert sent["messages"][1]["content"][0]["signature"] == "sig-1"


def test_local_model_example() -> None:
    from .model_server import ModelServer, Reply, chat_stream

    with ModelServer() as server:
        server.queue(
            Reply(events=chat_stream([], TWO_CITIES, "tool_calls", model="llama3.2")),
            Reply(events=chat_stream([ANSWER], model="llama3.2")),
        )
        out = run_with("local_model.py", {"LOCAL_MODEL_URL": f"{server.url}/v1"})
    assert ANSWER in out and "chat llama3.2" in out


@pytest.mark.parametrize(
    "name", ["pydantic_ai_agent.py", "openai_agents_agent.py", "langgraph_agent.py"]
)
def test_framework_examples_share_one_policy(name: str) -> None:
    out = run(name)
    assert "DATABASE_URL=postgres://app:[REDACTED:connection_string_password]@db/app" in out
    assert "s3cr3t-Passw0rd" not in out
    assert "blocked: tool 'delete_file' is denied by policy (delete_*)" in out
    assert "delete_file must never run" not in out
    assert "execute_tool read_file" in out and "  run  " in out
