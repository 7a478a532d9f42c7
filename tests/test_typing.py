"""The public API type-checks in users' code: ``mypy --strict`` on a typed user script."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent / "typing"
ROOT = Path(__file__).parent.parent


def _mypy(path: Path) -> tuple[str, int]:
    api = pytest.importorskip("mypy.api")
    stdout, stderr, status = api.run(
        ["--strict", "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary", str(path)]
    )
    return stdout + stderr, status


def test_a_typed_user_script_passes_mypy_strict() -> None:
    output, status = _mypy(HERE / "user_script.py")
    assert status == 0, output


def test_decorated_tools_keep_their_signatures() -> None:
    output, status = _mypy(HERE / "misuse.py")
    assert status == 1
    errors = [line for line in output.splitlines() if ": error:" in line]
    lines = {int(line.split(":")[1]) for line in errors}
    source = (HERE / "misuse.py").read_text().splitlines()
    expected = {i for i, text in enumerate(source, 1) if "# E:" in text}
    assert lines == expected, output
