"""Copies Trivy's secret scanner (``pkg/fanal/secret`` of the pinned module) into the held-out
build as a package of its own, ``otelhooks.local/secret-heldout/trivysecret``.

The copy is the scanner and its built-in rules as Trivy ships them, with one change: the
function that describes the rules to Trivy's misconfiguration checks
(``GetSecretRulesMetadata``) is left out, with the two imports only it uses. It is not part of
scanning, and it pulls in Trivy's whole IaC engine (about 200 more packages to build).

Usage: ``python3 overlay.py TRIVY_MODULE_DIR DEST_DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path

FILES = ("scanner.go", "builtin-rules.go", "builtin-allow-rules.go")
DROPPED_IMPORTS = (
    '\tiacRules "github.com/aquasecurity/trivy/pkg/iac/rules"\n',
    '\txslices "github.com/aquasecurity/trivy/pkg/x/slices"\n',
)
DROPPED_FUNCTION = "func GetSecretRulesMetadata()"


def without_metadata(text: str) -> str:
    for line in DROPPED_IMPORTS:
        if line not in text:
            raise SystemExit(f"overlay: {line.strip()!r} not found: the pinned source changed")
        text = text.replace(line, "", 1)
    start = text.find(DROPPED_FUNCTION)
    end = text.find("\n}\n", start)
    if start < 0 or end < 0:
        raise SystemExit(f"overlay: {DROPPED_FUNCTION} not found: the pinned source changed")
    return text[:start] + text[end + 3 :]


def main() -> None:
    module, dest = Path(sys.argv[1]), Path(sys.argv[2])
    source = module / "pkg" / "fanal" / "secret"
    dest.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        text = (source / name).read_text()
        if name == "builtin-rules.go":
            text = without_metadata(text)
        (dest / name).write_text(text)


if __name__ == "__main__":
    main()
