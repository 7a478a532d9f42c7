"""One set of hooks for every framework example: redaction, a deny rule, a path guard."""

from __future__ import annotations

from otelhooks import Hooks
from otelhooks.builtin import PathGuard, RedactionHook, Redactor, ToolDenyList

REDACTOR = Redactor()  # the redaction hook and the boundary's scrubber


def shared_hooks() -> Hooks:
    hooks = Hooks([RedactionHook(REDACTOR)])
    hooks.add(ToolDenyList(["delete_*"]))
    hooks.add(PathGuard("path", "/srv/data"), tools="read_file")
    return hooks


def read_file(path: str) -> str:
    """Read a file under /srv/data."""
    return f"{path}: DATABASE_URL=postgres://app:s3cr3t-Passw0rd@db/app"


def delete_file(path: str) -> str:
    """Delete a file."""
    raise SystemExit("delete_file must never run: the policy blocks it")
