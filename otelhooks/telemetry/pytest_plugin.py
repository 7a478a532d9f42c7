"""pytest plugin (entry point ``pytest11``): the ``otelhooks_tracing`` fixture.

Imported into every pytest session of every project that installs otelhooks, so it imports
nothing heavy at module level.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .testing import InMemoryTracing


@pytest.fixture
def otelhooks_tracing() -> Iterator[InMemoryTracing]:
    """A fresh in-memory tracing set-up for one test; pass ``.provider`` to the runtime."""
    from .testing import in_memory_tracing

    tracing = in_memory_tracing()
    try:
        yield tracing
    finally:
        tracing.shutdown()
