"""What a newcomer meets in the first hour: clear errors at registration, test helpers that say
what exists, a CLI that explains a missing extra, and a package that is cheap to import."""

from __future__ import annotations

import contextlib
import http.server
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from otelhooks import (
    Hooks,
    ToolCall,
    ToolExecutor,
    ToolRegistry,
    UnmatchedToolPattern,
    UnmatchedToolPatternError,
    block,
)
from otelhooks.builtin import ToolDenyList
from otelhooks.cli import install_hint
from otelhooks.telemetry.testing import InMemoryTracing, in_memory_tracing

from .jaeger_support import free_port


class Opaque:
    """A type pydantic has no JSON Schema for."""


def test_an_unsupported_parameter_type_names_the_tool_and_the_parameter() -> None:
    registry = ToolRegistry()

    def lookup(when: datetime, handle: Opaque) -> str:
        return ""

    with pytest.raises(TypeError, match=r"tool 'lookup': parameter 'handle' has type .*Opaque"):
        registry.register(lookup)


def test_a_lambda_needs_a_name_and_names_must_suit_providers() -> None:
    registry = ToolRegistry()
    with pytest.raises(ValueError, match="a lambda has no name: pass name="):
        registry.register(lambda: "x")
    for bad in ("has space", "dots.not.allowed", "x" * 65, ""):
        with pytest.raises(ValueError, match="invalid tool name"):
            registry.register(lambda: "x", name=bad)
    assert registry.register(lambda: "x", name="ok-name_2").name == "ok-name_2"


def test_a_hook_class_instead_of_an_instance_is_refused_at_add() -> None:
    class Audit:
        def before_tool_call(self, ctx: Any) -> None:
            return None

    with pytest.raises(TypeError, match=r"got the class Audit; pass an instance: hooks.add\(Audit"):
        Hooks().add(Audit)


def test_helper_failures_say_what_was_captured(
    otelhooks_tracing: InMemoryTracing, registry: ToolRegistry
) -> None:
    with pytest.raises(AssertionError, match="no spans were captured at all: was the executor"):
        otelhooks_tracing.tool_span(call_id="c1")
    executor = ToolExecutor(registry, tracer_provider=otelhooks_tracing.provider)

    async def run() -> None:
        await executor.execute(ToolCall("c1", "echo", {"text": "hi"}))

    import asyncio

    asyncio.run(run())
    with pytest.raises(AssertionError, match=r"execute_tool echo \(call_id='c1'\)"):
        otelhooks_tracing.tool_span(call_id="c2")
    span = otelhooks_tracing.tool_span(call_id="c1")
    with pytest.raises(AssertionError, match=r"its children: \['before', 'run', 'after'\]"):
        otelhooks_tracing.child(span, "rum")
    with pytest.raises(
        AssertionError, match=r"near misses: \[.execute_tool echo \{gen_ai.tool.name='echo'\}"
    ):
        otelhooks_tracing.find_one("execute_tool echo", gen_ai__tool__name="ecko")


def test_a_tool_pattern_that_matches_nothing_is_an_error_naming_what_it_meant() -> None:
    registry = ToolRegistry()
    registry.register(lambda: "rm", name="dangerous")
    hooks = Hooks(registry=registry)
    with pytest.raises(
        UnmatchedToolPatternError,
        match=r"'dangerus' matches no registered tool \(did you mean 'dangerous'\?\)",
    ):
        hooks.add(before=lambda ctx: block("no"), tools="dangerus")
    with pytest.raises(UnmatchedToolPatternError, match="'shell\\*'"):
        hooks.add(ToolDenyList(["shell*"]))  # a policy's own tool list is checked too
    assert len(hooks) == 0  # nothing half-registered
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hooks.add(before=lambda ctx: block("no"), tools="danger*")  # matches: silent
        hooks.add(before=lambda ctx: block("no"), tools="deploy", tools_later=True)  # deferred
    lenient = Hooks(registry=registry, strict=False)  # the explicit opt-out: warnings
    with pytest.warns(UnmatchedToolPattern, match="dangerus"):
        lenient.add(before=lambda ctx: block("no"), tools="dangerus")


async def test_the_agent_checks_tool_patterns_when_it_starts() -> None:
    from otelhooks import AssistantMessage
    from otelhooks.core.loop import Agent
    from otelhooks.providers import ScriptedProvider

    registry = ToolRegistry()
    registry.register(lambda: "rm", name="dangerous")
    hooks = Hooks()  # built before the tools were known: no check at registration
    hooks.add(before=lambda ctx: block("no"), tools="dangerus")
    provider = ScriptedProvider([AssistantMessage(text="ok")])
    agent = Agent(provider, tools=registry, hooks=hooks)
    with pytest.raises(UnmatchedToolPatternError, match="dangerus"):
        await agent.run("go")
    assert provider.requests == [] and not agent.running  # nothing was sent
    hooks.strict = False
    with pytest.warns(UnmatchedToolPattern, match="dangerus"):
        await agent.run("again")


def run_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_cli_without_the_sdk_says_what_to_install() -> None:
    done = run_python(
        """
        import sys
        sys.modules["opentelemetry.sdk"] = None  # as if otelhooks[sdk] were not installed
        from otelhooks.cli import main
        sys.exit(main(["demo", "--case", "allowed"]))
        """
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "otelhooks demo: opentelemetry.sdk is not installed; "
        f"install it with: {install_hint('sdk')}"
    ]
    # from this clone, the hint is the editable install of it
    assert install_hint("sdk").endswith(f"install -e '{Path(__file__).parents[1]}[sdk]'")
    assert "Traceback" not in done.stderr


def test_importing_the_package_imports_nothing_heavy() -> None:
    done = run_python(
        """
        import sys
        import _otelhooks_pytest  # the pytest plugin every session loads: one module
        print(sorted(m for m in sys.modules if m.startswith(("otelhooks", "_otelhooks"))))
        import otelhooks, otelhooks.telemetry.pytest_plugin
        heavy = [m for m in ("pydantic", "jsonschema", "asyncio", "opentelemetry.sdk",
                             "structlog", "otelhooks.core.execute") if m in sys.modules]
        print(heavy)
        from otelhooks import ToolRegistry  # a name costs its module on first use
        print("otelhooks.core.tools" in sys.modules, "jsonschema" in sys.modules)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['_otelhooks_pytest']", "[]", "True False"]


def test_in_memory_tracing_outside_pytest() -> None:
    tracing = in_memory_tracing()
    tracing.provider.get_tracer("t").start_span("x").end()
    assert [s.name for s in tracing.spans()] == ["x"]


# The trace viewer's first hour: ports, flags, the install, a stop while it starts.


def _time_wait_on(port: int) -> bool:
    """Whether a socket on 127.0.0.1:``port`` is in TIME-WAIT (state 06 of /proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "06":
            return True
    return False


def test_a_port_a_stopped_viewer_left_in_time_wait_is_free() -> None:
    """A server that closed its connections first leaves them in TIME-WAIT for a minute; a port
    check without address reuse calls the port taken all that time."""
    import socket

    from otelhooks.cli import ui

    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Phoenix's server binds
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server closes first: its side goes to TIME-WAIT
    server.close()
    client.recv(1)
    client.close()
    assert _time_wait_on(port)
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # what the check did before
    assert ui.port_free(port)


def test_a_taken_port_names_the_flag_of_the_command_that_was_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    from otelhooks.cli import main, ui

    monkeypatch.setenv(ui.ENV, "/bin/true")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setattr(ui, "answering", lambda url: False)  # a listener, not a viewer
        assert main(["demo", "--ui", "--ui-port", str(port)]) == 2
        err = capsys.readouterr().err
        assert f"port {port} is in use: stop what holds it, or give --ui-port N" in err
        assert main(["ui", "--port", str(port)]) == 2
        assert "or give --port N" in capsys.readouterr().err


def _tiny_wheel(folder: Path) -> str:
    """A wheel with nothing in it, for pip to install offline; returns its name."""
    import zipfile

    name, version = "otelhooks_viewer_stand_in", "0.1"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)
    return name


def test_ui_install_says_each_step_and_shows_pips_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """``otelhooks ui --install`` runs for minutes: it says what it is doing and lets pip show
    its progress (here offline, with a stand-in package from a local folder)."""
    from otelhooks.cli import ui

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    package = _tiny_wheel(wheels)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    program = ui.install(tmp_path / "env", requirement=package)
    assert program == tmp_path / "env" / "bin" / "phoenix"
    err = capfd.readouterr().err
    for step in ("1/3 making a virtual environment", "2/3 updating its pip", "3/3 installing"):
        assert f"otelhooks ui: {step}" in err, err
    assert f"Successfully installed {package.replace('_', '-')}" in err.replace("_", "-"), err
    assert "otelhooks ui: installed in " in err


def test_sigterm_while_the_viewer_starts_stops_it(tmp_path: Path) -> None:
    """A viewer still starting when the command is stopped (SIGTERM, as a runner or a service
    manager stops it) is stopped too, never left running on its own."""
    import os
    import signal
    import time

    pid_file = tmp_path / "viewer.pid"
    slow = tmp_path / "phoenix"
    slow.write_text(
        f"#!{sys.executable}\nimport os, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)\n"
    )
    slow.chmod(0o755)
    command = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "otelhooks",
            "ui",
            "--port",
            str(free_port()),
            "--data",
            str(tmp_path / "data"),
            "--phoenix",
            str(slow),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    viewer = 0
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        viewer = int(pid_file.read_text())
        command.send_signal(signal.SIGTERM)
        command.wait(timeout=60)
        deadline = time.monotonic() + 60
        while Path(f"/proc/{viewer}").exists() and time.monotonic() < deadline:
            state = Path(f"/proc/{viewer}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                break
            time.sleep(0.1)
        alive = (
            Path(f"/proc/{viewer}").exists()
            and "Z" not in Path(f"/proc/{viewer}/stat").read_text().rsplit(")", 1)[1].split()[:1]
        )
        assert not alive, "the viewer outlived the command"
    finally:
        if command.poll() is None:
            command.kill()
        if viewer:
            with contextlib.suppress(ProcessLookupError):
                os.kill(viewer, signal.SIGKILL)


def test_otlp_always_names_the_openinference_project_after_the_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OTLP sent straight to Phoenix lands in the service's project, with no otelhooks setting;
    a project set in the resource is kept. Read from what a real OTLP/HTTP exporter sent."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from otelhooks import setup_tracing

    monkeypatch.delenv("OTELHOOKS_OPENINFERENCE", raising=False)
    for name, resource_env, expected in (
        ("my-agent", None, "my-agent"),
        ("other-agent", "openinference.project.name=team-project", "team-project"),
    ):
        if resource_env:
            monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", resource_env)
        with serve_requests() as (url, bodies):
            setup = setup_tracing("otlp", service_name=name, otlp_endpoint=url, export_timeout=5)
            setup.provider.get_tracer("t").start_span("x").end()
            assert setup.shutdown().exported == 1
        request = ExportTraceServiceRequest.FromString(bodies[0])
        attributes = {
            a.key: a.value.string_value for a in request.resource_spans[0].resource.attributes
        }
        assert attributes["service.name"] == name
        assert attributes["openinference.project.name"] == expected


@contextlib.contextmanager
def serve_requests() -> Iterator[tuple[str, list[bytes]]]:
    """An OTLP/HTTP receiver on loopback that keeps each request's body and answers 200."""
    bodies: list[bytes] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


# What is missing says how to get it; what is set up says nothing that contradicts it.

# The modules the mcp extra brings that the base install does not.
MCP_EXTRA_MODULES = ("mcp", "anyio", "httpx", "httpx_sse", "sse_starlette", "starlette", "uvicorn")


def test_the_mcp_case_without_the_mcp_extra_gives_the_one_line_hint() -> None:
    done = run_python(
        f"""
        import sys
        for name in {MCP_EXTRA_MODULES!r}:  # as if otelhooks[mcp] were not installed
            sys.modules[name] = None
        from otelhooks.cli import main
        sys.exit(main(["demo", "--case", "mcp", "--exporter", "none"]))
        """
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"otelhooks demo: mcp is not installed; install it with: {install_hint('mcp')}"
    ]
    assert done.stdout == ""


def test_the_sdk_extra_brings_what_opentelemetry_instrument_needs() -> None:
    from importlib.metadata import requires

    sdk = [r for r in requires("otelhooks") or [] if 'extra == "sdk"' in r]
    assert any(r.startswith("opentelemetry-distro") for r in sdk), sdk


def test_opentelemetry_instrument_as_documented_says_nothing_contradictory(
    tmp_path: Path,
) -> None:
    """``OTEL_TRACES_EXPORTER=otelhooks_otlp opentelemetry-instrument otelhooks demo``: the
    traces arrive, and no line says the exporter is unknown or asks to set what is set."""
    import os

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}

    def instrumented_demo() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(instrument), sys.executable, "-m", "otelhooks", "demo", "--case", "blocked"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=tmp_path,
        )

    with serve_requests() as (url, bodies):
        env.update(
            OTEL_TRACES_EXPORTER="otelhooks_otlp",
            OTEL_SERVICE_NAME="my-agent",
            OTEL_EXPORTER_OTLP_ENDPOINT=url,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",  # the distro's default is grpc
            OTEL_METRICS_EXPORTER="none",
            OTEL_LOGS_EXPORTER="none",
        )
        done = instrumented_demo()
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("otelhooks:")] == []
    names = {
        span.name
        for body in bodies
        for resource in ExportTraceServiceRequest.FromString(body).resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    }
    assert {"invoke_agent demo-blocked", "execute_tool dangerous", "before"} <= names
    # without the redacting exporter named, the advice to name it is still given, once
    env["OTEL_TRACES_EXPORTER"] = "none"
    done = instrumented_demo()
    assert done.returncode == 0, done.stderr
    advice = [line for line in done.stderr.splitlines() if line.startswith("otelhooks:")]
    assert len(advice) == 1 and "OTEL_TRACES_EXPORTER=otelhooks_otlp" in advice[0], advice


def test_the_local_model_example_fails_when_it_cannot_reach_the_model() -> None:
    import os

    env = {**os.environ, "LOCAL_MODEL_URL": "http://127.0.0.1:9/v1"}
    done = subprocess.run(
        [sys.executable, "local_model.py"],
        cwd=Path(__file__).parents[1] / "examples",
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("the run failed: ") and "http://127.0.0.1:9/v1" in last, last
