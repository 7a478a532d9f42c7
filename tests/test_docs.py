"""Every Python block of the README and of docs/ runs as written.

A block marked ``<!-- fragment -->`` on the line before it is completed with
``tests/doc_prelude.py`` (the imports and objects the text introduced earlier); a block marked
``<!-- pytest -->`` is a test file, run by pytest in a fresh project (an empty directory with no
pytest configuration); every other block must run on its own. Each block runs in a fresh
interpreter, in an empty directory, with no ``OTEL_*`` variable set.
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
PRELUDE = (Path(__file__).parent / "doc_prelude.py").read_text()
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


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    fragment = block.marker == "<!-- fragment -->"
    source = (PRELUDE + "\n" + block.code) if fragment else block.code
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
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


POLICY = re.compile(r"<!-- policy -->\n```toml\n(.*?)^```", re.MULTILINE | re.DOTALL)
JSON_BLOCK = re.compile(r"^```json\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_policy_examples_load_and_host_configs_are_json() -> None:
    from otelhooks.integrations.mcp_policy import parse_policy

    policies = [m.group(1) for path in doc_files() for m in POLICY.finditer(path.read_text())]
    assert policies, "the README shows a policy file"
    for text in policies:
        policy = parse_policy(text, "README policy")
        assert policy.upstreams and policy.hook_specs()
    configs = [m.group(1) for path in doc_files() for m in JSON_BLOCK.finditer(path.read_text())]
    assert len(configs) >= 2
    for text in configs:
        json.loads(text)
