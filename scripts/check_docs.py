"""The documentation check: ``mkdocs build --strict`` into a scratch folder, failing on any
warning or error it prints.

``mkdocs build --strict --quiet`` exits 0 on a tree with a broken anchor (``--quiet`` hides the
warning that strict mode would count), and ``mkdocs serve`` then aborts on the same tree. This
check reads what mkdocs prints instead of trusting its exit code alone.

    python scripts/check_docs.py [--config mkdocs.yml]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PROBLEM = re.compile(r"^\s*(WARNING|ERROR)\b|Aborted with \d+ warnings", re.MULTILINE)


def check(config: Path) -> int:
    """Build the site of ``config``; print what mkdocs said when it warned; return 0 or 1."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    with tempfile.TemporaryDirectory() as site:
        done = subprocess.run(
            [str(mkdocs), "build", "--strict", "--config-file", str(config), "--site-dir", site],
            capture_output=True,
            text=True,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        )
    said = done.stdout + done.stderr
    problems = [m.group(0) for m in PROBLEM.finditer(said)]
    if done.returncode != 0 or problems:
        sys.stderr.write(said)
        sys.stderr.write(
            f"check_docs: mkdocs build --strict {'failed' if done.returncode else 'warned'} "
            f"(exit {done.returncode}, {len(problems)} warning or error lines)\n"
        )
        return 1
    print(f"check_docs: {config} builds with no warning")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("mkdocs.yml"))
    return check(parser.parse_args().config)


if __name__ == "__main__":
    sys.exit(main())
