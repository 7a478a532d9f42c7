"""The ``otelhooks_tracing`` fixture under its package path, for ``-p
otelhooks.telemetry.pytest_plugin`` and ``pytest_plugins`` lists; the installed entry point loads
the top-level module :mod:`_otelhooks_pytest`, which costs a pytest session one small import."""

from __future__ import annotations

from _otelhooks_pytest import otelhooks_tracing

__all__ = ["otelhooks_tracing"]
