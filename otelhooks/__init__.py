"""otelhooks: agent tool calls as before -> run -> after, one OpenTelemetry span tree per call.

The packages show the architecture: :mod:`otelhooks.core` (messages, tools, hooks, the executor,
the loop), :mod:`otelhooks.telemetry` (attribute names, content capture, tracing and metrics
set-up, span trees, test helpers), :mod:`otelhooks.builtin` (the hooks that come with it),
:mod:`otelhooks.providers` (models), :mod:`otelhooks.integrations` (MCP, frameworks) and
:mod:`otelhooks.cli` (the command).

The public names below are imported on first use (PEP 562), so ``import otelhooks`` (and the
pytest plugin every pytest session of a project loads) costs next to nothing; a name costs its
module's import the first time it is used. ``setup_tracing`` and ``in_memory_tracing`` need the
``sdk`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import core as _core
from ._lazy import lazy_names
from .core.scrub import Scrubber, use_default_scrubber
from .version import __version__

if TYPE_CHECKING:
    from .core import *
    from .telemetry import Capture, InMemoryTracing, TracingSetup, in_memory_tracing, setup_tracing

_TELEMETRY = "Capture InMemoryTracing TracingSetup in_memory_tracing setup_tracing"

__getattr__, __dir__ = lazy_names(
    __name__, globals(), {"core": _core.__all__, "telemetry": _TELEMETRY}
)


def _default_scrubber() -> Scrubber:
    from .builtin.redaction import default_redactor

    return default_redactor()


# Safe by default: a runtime given no scrubber redacts with the default redactor (made when the
# first such runtime is built; ``scrubber=NO_SCRUBBING`` turns it off).
use_default_scrubber(_default_scrubber)

__all__ = ["Capture", "InMemoryTracing", "TracingSetup", "__version__"]
__all__ += ["in_memory_tracing", "setup_tracing"]
__all__ += _core.__all__
