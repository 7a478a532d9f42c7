"""The examples run as users run them."""

from __future__ import annotations

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
