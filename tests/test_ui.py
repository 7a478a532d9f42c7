"""The trace viewer without Docker: ``otelhooks ui`` and ``otelhooks demo --ui`` with a real
Arize Phoenix process on loopback, read back through its REST API and looked at in headless
Chromium. Screenshots are kept in the test's folder (and refresh docs/images with
OTELHOOKS_UPDATE_SCREENSHOTS=1)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otelhooks.cli import main, ui
from otelhooks.cli.demo_cases import BLOCK_REASON, FAKE_API_KEY

from .jaeger_support import free_port
from .ui_support import ROOT, get_json, require_browser, require_phoenix, wait_for_spans

DOC_IMAGES = ROOT / "docs" / "images"


def otelhooks(*args: str, **env: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.Popen(
        [sys.executable, "-m", "otelhooks", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**clean, **env},
    )


def read_until(process: subprocess.Popen[str], text: str, timeout: float = 180) -> str:
    """Lines of the process's stdout up to the one holding ``text``."""
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return "".join(seen)
    stderr = process.stderr.read() if process.stderr and process.poll() is not None else ""
    raise AssertionError(f"no {text!r} in {''.join(seen)!r}; stderr: {stderr}")


def listeners(port: int) -> list[str]:
    """The addresses (hex, as /proc/net shows them) of the sockets listening on ``port``."""
    addresses = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                addresses.append(address)
    return addresses


def listens_on_loopback_only(port: int) -> bool:
    """Whether every socket listening on ``port`` (IPv4 and IPv6) is bound to loopback."""
    loopback = {"0100007F", "00000000000000000000000001000000"}
    return bool(listeners(port)) and set(listeners(port)) <= loopback


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ui.Viewer]:
    """A real Phoenix on a free loopback port, with the demo's four cases sent to it by
    ``otelhooks demo --ui``, for this module."""
    started = ui.start(require_phoenix(), free_port(), tmp_path_factory.mktemp("phoenix"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def demo_run(viewer: ui.Viewer) -> dict[str, Any]:
    port = viewer.url.rsplit(":", 1)[1]
    done = otelhooks("demo", "--ui", "--ui-port", port, "--service-name", "ui-e2e")
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    found = re.search(r"The traces in Phoenix: (\S+)", out)
    assert found, out
    spans = wait_for_spans(viewer.url, "ui-e2e", 34)
    return {"stdout": out, "stderr": err, "url": found.group(1), "spans": spans}


def keep_screenshot(shot: Path, name: str) -> None:
    if os.environ.get("OTELHOOKS_UPDATE_SCREENSHOTS") == "1":
        DOC_IMAGES.mkdir(exist_ok=True)
        shutil.copyfile(shot, DOC_IMAGES / name)


def children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[str]:
    return [s["name"] for s in spans if s["parent_id"] == parent["context"]["span_id"]]


@pytest.mark.ui
def test_demo_ui_sends_every_span_to_the_service_project(demo_run: dict[str, Any]) -> None:
    spans = demo_run["spans"]
    assert "34 of 34 spans exported" in demo_run["stderr"], demo_run["stderr"][-3000:]
    assert len(spans) == 34  # what the demo's summary line says it exported
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/projects/\w+=*", demo_run["url"])
    kinds = {(s["name"].split()[0], s["span_kind"]) for s in spans}
    assert kinds == {
        ("invoke_agent", "AGENT"),
        ("chat", "LLM"),
        ("execute_tool", "TOOL"),
        ("before", "GUARDRAIL"),
        ("run", "CHAIN"),
        ("after", "GUARDRAIL"),
    }
    roots = {s["name"] for s in spans if s["parent_id"] is None}
    assert roots == {f"invoke_agent demo-{case}" for case in DEMO_CASES_SHOWN}
    (blocked,) = [s for s in spans if s["name"] == "execute_tool dangerous"]
    assert children(spans, blocked) == ["before"]
    assert blocked["attributes"]["otelhooks.decision"] == "block"
    (allowed,) = [s for s in spans if s["name"] == "execute_tool echo"]
    assert sorted(children(spans, allowed)) == ["after", "before", "run"]
    (environment,) = [s for s in spans if s["name"] == "execute_tool environment"]
    assert "[REDACTED:openai_api_key]" in environment["attributes"]["output.value"]
    assert FAKE_API_KEY not in repr(spans)


DEMO_CASES_SHOWN = ("allowed", "blocked", "parallel", "redaction")


def look_at(
    demo_run: dict[str, Any], tmp_path: Path, case: str, span: str, tab: str, wait_for: str
) -> dict[str, Any]:
    """What a person sees on selecting ``span`` in the trace of the demo's ``case``; the
    screenshot is kept as ``ui-<case>.png``."""
    shot = tmp_path / f"ui-{case}.png"
    seen = require_browser().trace_view(
        url=demo_run["url"],
        trace=f"invoke_agent demo-{case}",
        span=span,
        tab=tab,
        wait_for=wait_for,
        screenshot=str(shot),
    )
    assert shot.stat().st_size > 10_000
    keep_screenshot(shot, shot.name)
    return seen


@pytest.mark.ui
def test_a_person_sees_the_allowed_call_in_its_three_phases(
    demo_run: dict[str, Any], tmp_path: Path
) -> None:
    seen = look_at(demo_run, tmp_path, "allowed", "execute_tool echo", "Info", "checked: hi")
    assert [(n["level"], n["name"]) for n in seen["tree"]] == [
        (0, "invoke_agent demo-allowed"),
        (1, "chat scripted"),
        (1, "execute_tool echo"),
        (2, "before"),
        (2, "run"),
        (2, "after"),
        (1, "chat scripted"),
    ]
    assert "checked: hi" in seen["detail"]  # the result, as the after-hook left it


@pytest.mark.ui
def test_a_person_sees_the_blocked_call_stop_before_run(
    demo_run: dict[str, Any], tmp_path: Path
) -> None:
    seen = look_at(
        demo_run, tmp_path, "blocked", "execute_tool dangerous", "Attributes", BLOCK_REASON
    )
    assert [(n["level"], n["name"]) for n in seen["tree"]] == [
        (0, "invoke_agent demo-blocked"),
        (1, "chat scripted"),
        (1, "execute_tool dangerous"),
        (2, "before"),
        (1, "chat scripted"),
    ]
    assert BLOCK_REASON in seen["detail"]


@pytest.mark.ui
def test_a_person_sees_the_result_redacted_and_never_the_secret(
    demo_run: dict[str, Any], tmp_path: Path
) -> None:
    redacted = "[REDACTED:openai_api_key]"
    seen = look_at(demo_run, tmp_path, "redaction", "execute_tool environment", "Info", redacted)
    assert [n["name"] for n in seen["tree"] if n["level"] == 2] == ["before", "run", "after"]
    assert redacted in seen["detail"]
    assert FAKE_API_KEY not in seen["html"]


@pytest.mark.ui
def test_ui_serves_on_loopback_until_ctrl_c(tmp_path: Path) -> None:
    phoenix = require_phoenix()
    port = free_port()
    process = otelhooks(
        "ui", "--port", str(port), "--data", str(tmp_path), "--phoenix", str(phoenix)
    )
    try:
        out = read_until(process, "Ctrl-C stops it.")
        assert f"Phoenix is running at http://127.0.0.1:{port}" in out
        assert f"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{port}" in out
        assert get_json(f"http://127.0.0.1:{port}/v1/projects")["data"]
        assert listens_on_loopback_only(port)
        # a second one on the same port says so, and leaves the first alone
        again = otelhooks("ui", "--port", str(port), "--phoenix", str(phoenix))
        _, err = again.communicate(timeout=30)
        assert again.returncode == 2
        assert "already answers" in err
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert listeners(port) == []  # Phoenix went with it
        assert (tmp_path / "phoenix.log").stat().st_size > 0  # its log, not our stdout
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.ui
def test_demo_ui_starts_a_viewer_and_keeps_it_for_a_look(tmp_path: Path) -> None:
    port = free_port()
    process = otelhooks(
        "demo",
        "--ui",
        "--ui-port",
        str(port),
        "--case",
        "blocked",
        "--no-tree",
        **{ui.ENV: str(require_phoenix()), "XDG_DATA_HOME": str(tmp_path)},
    )
    try:
        out = read_until(process, "Ctrl-C stops it.")
        assert f"Phoenix is running at http://127.0.0.1:{port}" in out
        url = re.search(r"The traces in Phoenix: (\S+)", out)
        assert url and "/projects/" in url.group(1), out
        spans = wait_for_spans(f"http://127.0.0.1:{port}", "otelhooks-demo", 5)
        assert sorted(s["name"] for s in spans) == [
            "before",
            "chat scripted",
            "chat scripted",
            "execute_tool dangerous",
            "invoke_agent demo-blocked",
        ]
        assert (tmp_path / "otelhooks" / "phoenix" / "phoenix.log").is_file()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert listeners(port) == []
    finally:
        if process.poll() is None:
            process.kill()


# What goes wrong says what to do, without a Phoenix.


def test_ui_without_phoenix_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(ui.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert main(["ui", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert "otelhooks ui --install" in err
    assert ui.PHOENIX_VERSION in err


def test_ui_on_a_taken_port_or_a_bad_one(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["ui", "--port", str(port), "--phoenix", "/bin/true"]) == 2
    assert f"port {port} is in use" in capsys.readouterr().err
    assert main(["ui", "--port", "0"]) == 2
    assert "--port must be 1 to 65535" in capsys.readouterr().err


def test_a_viewer_that_exits_at_once_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["ui", "--port", str(free_port()), "--data", str(tmp_path), "--phoenix", "/bin/false"]
    )
    assert code == 2
    assert "Phoenix exited (1)" in capsys.readouterr().err


def test_demo_ui_refuses_another_exporter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--ui", "--exporter", "console"]) == 2
    assert "--ui sends to the viewer over OTLP/HTTP" in capsys.readouterr().err
