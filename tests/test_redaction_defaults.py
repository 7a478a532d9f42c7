"""Secrets are kept from the model, spans and logs by default: the README's first example puts
the redaction hook in front of the model, ``setup_tracing`` scrubs spans and the structlog events
scrub their fields unless told not to, and identifiers semantic conventions define keep their
value (only the key-name rules spare them)."""

from __future__ import annotations

import asyncio
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import structlog

from otelhooks import NO_SCRUBBING, Hooks, ToolCall, ToolExecutor, ToolRegistry, setup_tracing
from otelhooks.builtin import RedactionHook, Redactor, StructlogEvents
from otelhooks.builtin.secret_rules import fill
from otelhooks.telemetry import attributes as A
from otelhooks.telemetry.testing import in_memory_tracing

from .gateway_support import gateway, host
from .mcp_support import time_command

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "hunter2hunter2"
TOKEN = fill("ghp_{a36}", "defaults")


def readme_example() -> str:
    """The README's first Python block, its echo tool returning a password."""
    block = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None
    code = block.group(1)
    assert code.count("    return text\n") == 1, "the example's echo tool changed"
    return code.replace(
        "    return text\n", f'    return {{"password": "{PASSWORD}", "text": text}}\n'
    )


def run_example(code: str, tmp_path: Path) -> str:
    (tmp_path / "example.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_the_readme_example_keeps_a_password_from_the_model_the_console_and_the_log(
    tmp_path: Path,
) -> None:
    code = readme_example()
    assert "hooks.add(RedactionHook())" in code
    out = run_example(code, tmp_path)
    assert PASSWORD not in out
    assert '"password": "[REDACTED:password]"' in out  # what the model quoted back
    assert '"otelhooks.redacted.paths"' in out  # the console span says what was redacted
    assert "tool_call.completed" in out  # the log line is there, without the password


def test_without_the_hook_and_with_redaction_turned_off_the_same_example_leaks(
    tmp_path: Path,
) -> None:
    """The test above can fail: what it checks for is there when redaction is off."""
    code = readme_example().replace("hooks.add(RedactionHook())", "pass")
    code = code.replace('service_name="my-agent")', 'service_name="my-agent", redactor=False)')
    off = "tracer_provider=tracing.provider, scrubber=NO_SCRUBBING)"
    code = code.replace("tracer_provider=tracing.provider)", off).replace(
        "import asyncio\n", "import asyncio\nfrom otelhooks import NO_SCRUBBING\n", 1
    )
    assert "scrubber=NO_SCRUBBING" in code
    assert PASSWORD in run_example(code, tmp_path)


def _call_returning(secret: str, tracer_provider: Any, **hook_options: Any) -> Any:
    registry = ToolRegistry()

    @registry.tool
    def emit() -> str:
        """Return a secret."""
        return f"token {secret}"

    executor = ToolExecutor(  # no scrubber of its own: what reaches the spans is the set-up's
        registry,
        Hooks(**hook_options),
        tracer_provider=tracer_provider,
        capture_content=True,
        scrubber=NO_SCRUBBING,
    )
    return asyncio.run(executor.execute(ToolCall("c1", "emit", {})))


def test_setup_tracing_scrubs_spans_by_default_and_false_turns_it_off() -> None:
    for redactor, leaks in ((None, False), (False, True)):
        setup = setup_tracing("memory", redactor=redactor, use_global=False)
        _call_returning(TOKEN, setup.provider)
        setup.provider.force_flush()
        assert setup.memory is not None
        spans = json.dumps([s.to_json() for s in setup.memory.get_finished_spans()])
        assert (TOKEN[:12] in spans) is leaks, redactor
        setup.shutdown()


def test_spans_are_scrubbed_under_a_tracer_provider_the_user_configured() -> None:
    """No ``setup_tracing``, no span processor of otelhooks', no scrubber given: what the
    executor writes on its spans (arguments, result, a handler's error) is still redacted."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = ToolRegistry()

    @registry.tool
    def emit(note: str) -> str:
        """Return a secret."""
        return f"token {TOKEN}"

    @registry.tool
    def fail(note: str) -> str:
        """Raise with a secret."""
        raise RuntimeError(f"upstream refused {TOKEN}")

    executor = ToolExecutor(registry, Hooks(), tracer_provider=provider, capture_content=True)
    for name in ("emit", "fail"):
        asyncio.run(executor.execute(ToolCall("c1", name, {"note": f"key {TOKEN}"})))
    spans = "\n".join(s.to_json() for s in exporter.get_finished_spans())
    assert "[REDACTED:github_token]" in spans and "upstream refused" in spans
    assert TOKEN[4:16] not in spans


def test_the_structlog_events_scrub_their_fields_whoever_configured_structlog() -> None:
    registry = ToolRegistry()

    @registry.tool
    def emit() -> str:
        """Nothing secret."""
        return "ok"

    for redactor, leaks in ((None, False), (False, True)):
        with structlog.testing.capture_logs() as logs:  # no redacting processor configured
            executor = ToolExecutor(registry, Hooks([StructlogEvents(redactor=redactor)]))
            asyncio.run(executor.execute(ToolCall(f"call-{TOKEN}", "emit", {})))
        assert (TOKEN[:12] in json.dumps(logs)) is leaks, (redactor, logs)


def test_semantic_convention_identifiers_are_exempt_from_key_name_rules_only() -> None:
    redactor = Redactor()
    ids = {
        A.MCP_SESSION_ID: "4f0e1c2ab8d94e7a9c3b5d6e7f8091a2",
        "session.id": "c7Q2xZp9Lm4Rt8Vw3Ny6Kb1H",
        A.GEN_AI_TOOL_CALL_ID: "call_7Q2xZp9Lm4Rt8Vw3Ny6Kb1H",
        "messaging.kafka.message.key": "Zp9Lm4Rt8Vw3Ny6Kb1Hc7Q2x",
    }
    assert redactor.redact(ids) == (ids, [])
    leaked = {A.MCP_SESSION_ID: TOKEN, "session.id": f"password={PASSWORD}"}
    scrubbed, _ = redactor.redact(leaked)
    assert TOKEN not in json.dumps(scrubbed) and PASSWORD not in json.dumps(scrubbed)
    assert redactor.redact({"session": "c7Q2xZp9Lm4Rt8Vw3Ny6Kb1H"})[0] == {
        "session": "[REDACTED:session]"
    }


LEGACY_POLICY = """
[proxy]
isolation = "shared"

[[upstream]]
name = "time"
command = {command}
"""


async def test_mcp_session_id_is_intact_on_a_real_gateway_span(tmp_path: Path) -> None:
    tracing = in_memory_tracing(redactor=Redactor())  # spans scrubbed as in production
    policy = LEGACY_POLICY.format(command=json.dumps(time_command()))
    async with (
        gateway(policy, tmp_path, tracer_provider=tracing.provider) as gw,
        host(gw.url, mode="legacy") as client,  # the handshake era: a session
    ):
        await client.call_tool("get_current_time", {"timezone": "UTC"})
    spans = tracing.tool_spans()
    assert spans
    session = dict(spans[0].attributes or {}).get(A.MCP_SESSION_ID)
    assert isinstance(session, str) and len(session) >= 16, dict(spans[0].attributes or {})
    assert not session.startswith("[REDACTED"), session


def test_redaction_hook_and_processors_share_the_default_redactor() -> None:
    from otelhooks.builtin.redaction import RedactingProcessor, default_redactor

    assert RedactionHook().redactor is default_redactor()
    assert RedactingProcessor().redactor is default_redactor()
    assert StructlogEvents().redactor is default_redactor()
    assert StructlogEvents(redactor=False).redactor is None
    out = io.StringIO()
    from otelhooks.builtin import json_logger

    json_logger(out).info("x", note=f"token {TOKEN}")
    assert TOKEN not in out.getvalue()
