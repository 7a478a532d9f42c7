"""The ``otelhooks`` command: one module per subcommand (``demo``, ``traces``, ``mcp``, ``ui``,
``fleet``, ``approvals``).

Each subcommand module has ``add_parser(subparsers)`` and ``run(args) -> int``. A subcommand
whose optional dependencies are missing says, in one line on stderr, what to install, and exits
with 2: never a traceback. One whose stdout's reader went away (``| head``) stops quietly with
141, the status of a program SIGPIPE ended.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS = ("demo", "traces", "mcp", "ui", "fleet", "approvals")

# Optional imports and the extra that brings each.
EXTRAS = {
    "opentelemetry.sdk": "sdk",
    "opentelemetry.exporter": "sdk",
    "mcp": "mcp",
    "openai": "openai",
    "anthropic": "anthropic",
}

# Programs a command runs that no extra brings (the demo's MCP case runs mcp-server-time).
PACKAGES = {"mcp_server_time": "mcp-server-time"}


def install_hint(extra: str) -> str:
    """The command that installs an extra where this otelhooks came from: its clone (an
    editable install from a checkout, otelhooks' only install for now), with this interpreter's
    pip; else the extra as a requirement."""
    from pathlib import Path

    source = Path(__file__).resolve().parents[2]
    pip = f"{sys.executable} -m pip"
    if (source / "pyproject.toml").is_file() and (source / "otelhooks").is_dir():
        return f"{pip} install -e '{source}[{extra}]'"
    return f"{pip} install 'otelhooks[{extra}]'"


def missing_extra(exc: ModuleNotFoundError) -> tuple[str, str] | None:
    """The package and the extra that provides the module an ImportError names, if it is one
    of ours."""
    name = exc.name or ""
    for prefix, extra in EXTRAS.items():
        if name == prefix or name.startswith(prefix + "."):
            return prefix, extra
    return None


def _parser() -> argparse.ArgumentParser:
    from ..version import __version__

    parser = argparse.ArgumentParser(
        prog="otelhooks",
        description="Agent tool calls as before -> run -> after, traced with OpenTelemetry.",
    )
    parser.add_argument("--version", action="version", version=f"otelhooks {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f".{name}", __name__).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    module = importlib.import_module(f".{args.command}", __name__)
    try:
        return int(module.run(args))
    except ModuleNotFoundError as exc:
        missing = missing_extra(exc)
        if missing is not None:
            package, extra = missing
            advice = install_hint(extra)
        elif exc.name in PACKAGES:
            package = advice = PACKAGES[exc.name]
            advice = f"{sys.executable} -m pip install {package}"
        else:
            raise
        print(
            f"otelhooks {args.command}: {package} is not installed; install it with: {advice}",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `otelhooks traces --json | head`: the reader had enough
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush at exit
        return 141  # 128 + SIGPIPE, as a program the signal ended (and as the demo)


if __name__ == "__main__":
    sys.exit(main())
