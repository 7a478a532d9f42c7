"""otelhooks' pytest plugin (entry point ``pytest11``): the ``otelhooks_tracing`` fixture.

Every pytest session of every project that installs otelhooks loads it, so it is one top-level
module that imports nothing but pytest (already loaded): importing a module of the ``otelhooks``
package would first import the package and its sub-packages. otelhooks itself is imported when a
test asks for the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from otelhooks.telemetry.testing import InMemoryTracing

__all__ = ["otelhooks_tracing"]


@pytest.fixture
def otelhooks_tracing() -> Iterator[InMemoryTracing]:
    """A fresh in-memory tracing set-up for one test; pass ``.provider`` to the runtime."""
    from otelhooks.telemetry.testing import in_memory_tracing

    tracing = in_memory_tracing()
    try:
        yield tracing
    finally:
        tracing.shutdown()
