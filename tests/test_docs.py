"""Every Python block of the README and of docs/ runs as printed, with nothing added.

A block marked ``<!-- pytest -->`` is a test file, run by pytest in a fresh project (an empty
directory with no pytest configuration); a block marked ``<!-- model-server -->`` runs with
``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL`` and ``LOCAL_MODEL_URL`` pointing at
``tests/model_server.py``, a local server that answers in the OpenAI and Anthropic wire formats
(it calls the first tool offered, then says what the tool returned); every other block must run
on its own. Each block runs in a fresh interpreter, in an empty directory, with no ``OTEL_*``
variable set.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What the line before a Python block may say (an HTML comment, which the site does not show).
MARKERS = ("<!-- pytest -->", "<!-- model-server -->")
FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    code: str
    marker: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks() -> list[Block]:
    found = []
    for path in doc_files():
        text = path.read_text()
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip().splitlines()
            marker = before[-1].strip() if before else ""
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(path, line, match.group(1), marker))
    return found


ALL = blocks()


def test_the_docs_have_blocks_to_run() -> None:
    assert len(ALL) >= 10


def test_no_block_has_a_marker_the_runner_does_not_know() -> None:
    """A misspelt or retired marker (``<!-- fragment -->``, whose blocks ran with a hidden
    prelude) would quietly change how its block runs: every HTML comment before a block is one
    of the known markers."""
    unknown = [
        f"{b.id}: {b.marker}"
        for b in ALL
        if b.marker.startswith("<!--") and b.marker not in MARKERS
    ]
    assert not unknown, unknown


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    source = block.code
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "OPENAI_", "ANTHROPIC_", "LOCAL_MODEL"))
    }
    if block.marker == "<!-- model-server -->":
        server = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "model_server.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        env.update(
            {
                "OPENAI_API_KEY": "sk-test",
                "OPENAI_BASE_URL": f"{url}/v1",
                "ANTHROPIC_API_KEY": "sk-ant-test",
                "ANTHROPIC_BASE_URL": url,
                "LOCAL_MODEL_URL": f"{url}/v1",
            }
        )
    else:
        server = None
    try:
        out = _run_block(block, source, env, tmp_path)
    finally:
        if server is not None:
            server.communicate(timeout=60)
    if server is not None:  # the block really talked to the model
        assert "The tool said:" in out or "Hello from the test model." in out, out


def _run_block(block: Block, source: str, env: dict[str, str], tmp_path: Path) -> str:
    if block.marker == "<!-- pytest -->":
        (tmp_path / "test_from_docs.py").write_text(source)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", tmp_path.name]
        cwd = tmp_path.parent
    else:
        (tmp_path / "block.py").write_text(source)
        command, cwd = [sys.executable, "block.py"], tmp_path
    done = subprocess.run(
        command,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, f"{block.id} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


POLICY = re.compile(r"<!-- policy -->\n```toml\n(.*?)^```", re.MULTILINE | re.DOTALL)
JSON_BLOCK = re.compile(r"^```json\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_policy_examples_load_and_host_configs_are_json() -> None:
    from otelhooks.integrations.mcp.policy import parse_policy

    policies = [m.group(1) for path in doc_files() for m in POLICY.finditer(path.read_text())]
    assert policies, "the README shows a policy file"
    for text in policies:
        policy = parse_policy(text, "README policy")
        assert policy.upstreams and (policy.hook_specs() or policy.identities)
    configs = [m.group(1) for path in doc_files() for m in JSON_BLOCK.finditer(path.read_text())]
    assert len(configs) >= 2
    for text in configs:
        json.loads(text)


REFERENCE = re.compile(r"^::: (otelhooks[\w.]*)", re.MULTILINE)
NOT_IN_REFERENCE = (
    "otelhooks.cli",
    "otelhooks.__main__",
    "otelhooks.version",
    "otelhooks.telemetry.pytest_plugin",
    "otelhooks.builtin.secret_keys",
)


def test_the_api_reference_covers_every_module_and_every_public_name_has_a_docstring() -> None:
    import importlib
    import inspect
    import pkgutil

    import otelhooks

    pages = (ROOT / "docs" / "reference").glob("*.md")
    documented = {m for page in pages for m in REFERENCE.findall(page.read_text())}
    modules = {
        info.name
        for info in pkgutil.walk_packages(otelhooks.__path__, "otelhooks.")
        if not any(part.startswith("_") for part in info.name.split("."))
        and not info.name.startswith(NOT_IN_REFERENCE)
        and not info.ispkg
    }
    assert modules <= documented, sorted(modules - documented)
    missing = []
    for name in sorted(documented):
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if attr.startswith("_") or getattr(obj, "__module__", None) != name:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if not (obj.__doc__ or "").strip():
                missing.append(f"{name}.{attr}")
            members = vars(obj).items() if inspect.isclass(obj) else ()
            for member, value in members:
                fn = value.fget if isinstance(value, property) else value
                if not member.startswith("_") and inspect.isfunction(fn) and not fn.__doc__:
                    missing.append(f"{name}.{attr}.{member}")
    assert not missing, missing


def test_the_docs_check_fails_on_a_broken_anchor(tmp_path: Path) -> None:
    """scripts/check_docs.py (the documentation step of the test command) fails on a warning
    that ``mkdocs build --strict --quiet`` would hide, and names it."""
    import shutil

    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "concepts" / "hooks.md"
    page.write_text(page.read_text() + "\nSee [the hooks](../reference/core.md#no-such-anchor).\n")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_docs.py"), "--config", "mkdocs.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "#no-such-anchor" in done.stderr
