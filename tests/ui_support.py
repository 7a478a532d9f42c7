"""The trace viewer (Arize Phoenix) and the headless browser the UI tests use: found where
scripts/install-phoenix.sh and scripts/install-browser.sh put them (test.sh exports them), else a
skip, or a failure with OTELHOOKS_REQUIRE_UI=1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from otelhooks.cli import ui
from otelhooks.cli.cache import cached

ROOT = Path(__file__).resolve().parents[1]
TRACE_VIEW = Path(__file__).with_name("browser") / "trace_view.cjs"


def _unavailable(reason: str) -> None:
    if os.environ.get("OTELHOOKS_REQUIRE_UI") == "1":
        pytest.fail(reason + " (OTELHOOKS_REQUIRE_UI=1)")
    pytest.skip(reason)


def require_phoenix() -> Path:
    """The phoenix program scripts/install-phoenix.sh installs (or OTELHOOKS_PHOENIX)."""
    given = os.environ.get(ui.ENV)
    candidate = (
        Path(given) if given else cached("phoenix", ui.PHOENIX_VERSION, "venv", "bin", "phoenix")
    )
    if candidate is None or not candidate.is_file():
        _unavailable(f"no Arize Phoenix at {candidate}: run `bash scripts/install-phoenix.sh`")
    return candidate


@dataclass(frozen=True)
class Browser:
    chromium: str
    node_modules: str

    def trace_view(self, **ask: Any) -> dict[str, Any]:
        """What tests/browser/trace_view.cjs saw (see there for ``ask``)."""
        env = {
            **os.environ,
            "OTELHOOKS_CHROMIUM": self.chromium,
            "OTELHOOKS_BROWSER_NODE_PATH": self.node_modules,
        }
        done = subprocess.run(
            ["node", str(TRACE_VIEW), json.dumps(ask)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        seen: dict[str, Any] = json.loads(done.stdout)
        return seen


def require_browser() -> Browser:
    """Headless Chromium with playwright-core, as scripts/install-browser.sh provides them."""
    chromium = os.environ.get("OTELHOOKS_CHROMIUM") or shutil.which("chromium")
    modules = os.environ.get("OTELHOOKS_BROWSER_NODE_PATH") or str(
        ROOT / ".cache" / "browser" / "node_modules"
    )
    if not chromium or not (Path(modules) / "playwright-core").is_dir() or not shutil.which("node"):
        _unavailable("no headless browser: run `bash scripts/install-browser.sh`")
    assert chromium is not None
    return Browser(chromium, modules)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def project_spans(viewer_url: str, project: str) -> list[dict[str, Any]]:
    """Every span the viewer holds for ``project``, through its REST API."""
    spans: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
        page = get_json(
            f"{viewer_url}/v1/projects/{urllib.parse.quote(project)}/spans?"
            + urllib.parse.urlencode(query)
        )
        spans.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return spans


def wait_for_spans(
    viewer_url: str, project: str, count: int, timeout: float = 300
) -> list[dict[str, Any]]:
    """The project's spans once there are ``count`` of them (the viewer takes spans in in the
    background), or what there is after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        spans = project_spans(viewer_url, project)
        if len(spans) >= count or time.monotonic() >= deadline:
            return spans
        time.sleep(0.25)
